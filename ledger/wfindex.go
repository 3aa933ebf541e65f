package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// # The workflow index
//
// Reading a workflow (its event stream, GET /v1/workflows/{id}, a bundle)
// used to walk prev_in_workflow back-links one leaf read at a time from
// the workflow's latest leaf: O(workflow length) reads for every request,
// however little of it the request wanted. So the ledger also keeps, per
// workflow, the list of its leaves' indexes in pages of 256, written in
// the same transaction as the leaves:
//
//	~wfidx/<workflow>              the number of leaves (8 bytes, big endian),
//	                               then the indexes of the leaves past the
//	                               last whole chunk of 32 (the tail), then
//	                               the workflow's summary (wflist.go)
//	~wfidx/<workflow>/<page>       a full page: 256 indexes, 8 bytes each (page: 8 hex)
//	~wfidx/<workflow>/<page>/<c>   a full chunk of a page not yet full: the
//	                               32 indexes from 256*page+32*c (c: 1 hex)
//
// A read of the leaves after index N costs a binary search over the pages
// (O(log length) record reads) and one page read per 256 leaves it
// returns; the last page, if partial, is its chunks (at most 7 reads) and
// the tail. An append rewrites one record per workflow per batch, the
// count with the tail (at most 248 bytes) and the summary, and writes a
// chunk or a page once, when it fills; the sequencer keeps the count and
// last page of recently appended workflows (wfCached), so it does not read
// them back for every batch. (The chunks of a page that filled stay in the
// store, unread: 7 records per 256 leaves.)
//
// An index written before the tail and the summary went into the count
// record has a count of 8 bytes alone, its partial last page in
// ~wfidx/<workflow>/<page> and its summary in ~wfsum/<workflow>; it is
// read as it is, and its next batch writes the present records (the
// chunks of its partial page, the count record; the old partial page is
// overwritten when the page fills; the old summary stays, never read
// again).
//
// The index is derived data, not authority state: audit does not compare
// it, and a replay of the log rebuilds it. Workflows begun before this
// index existed are not indexed (their first new leaf finds no count);
// their reads keep walking the back-links.

// IndexPrefix starts the keys of the ledger's own derived records in the
// store's record space, which the authority engine never uses.
const IndexPrefix = "~"

const (
	wfIndexPrefix = IndexPrefix + "wfidx/"
	wfPageSize    = 256
	wfChunk       = 32 // indexes per chunk of a partial page
	// wfLegacy marks a workflow begun before the index: never written.
	wfLegacy = ^uint64(0)
)

func wfCountKey(wf string) string { return wfIndexPrefix + wf }

func wfPageKey(wf string, page uint64) string {
	return fmt.Sprintf("%s%s/%08x", wfIndexPrefix, wf, page)
}

func wfChunkKey(wf string, page, chunk uint64) string {
	return fmt.Sprintf("%s%s/%08x/%x", wfIndexPrefix, wf, page, chunk)
}

// wfState is a workflow's index as the batches decided so far leave it.
type wfState struct {
	count uint64 // wfLegacy: not indexed
	page  []byte // the last page, whole or partial
	job   uint64 // the last batch that changed it
	// countKey is wfCountKey(wf); pageKey is wfPageKey(wf, pageNo), the
	// key of the last page filled, kept so that a batch builds no key.
	countKey, pageKey string
	pageNo            uint64
	// sum is the workflow's summary (wflist.go), written with its count.
	sum wfSummary
	// oldPage: read from the older layout, whose partial page has no
	// chunks yet; its next write writes them.
	oldPage bool
}

// lastPageKey is the key of the page holding the workflow's last leaf.
func (s *wfState) lastPageKey(wf string) string {
	if p := (s.count - 1) / wfPageSize; s.pageKey == "" || p != s.pageNo {
		s.pageKey, s.pageNo = wfPageKey(wf, p), p
	}
	return s.pageKey
}

// testWfLegacy, set by tests only, writes the index as it was written
// before the tail went into the count record.
var testWfLegacy bool

// wfCached bounds how many workflows' index states the sequencer keeps
// once their batches have committed (at most 2 KiB each: the last page).
// A workflow appended to again finds its count and last page here instead
// of reading both from the store in every batch; past the bound, committed
// states are forgotten at random and read again when next needed.
var wfCached = 1024 // a variable for tests

// wfIndexer keeps the index of the batches decided but not yet known to
// be committed, and of up to wfCached workflows whose batches have
// committed (what the store holds: only this sequencer writes the index,
// and discard forgets it all whenever the store may hold something else);
// owned by the sequencer goroutine.
type wfIndexer struct {
	pending map[string]*wfState
	list    wfList // the list of workflows (wflist.go)
	job     uint64 // the batch being decided
	dirty   map[string]bool
	full    []fullPage // pages the batch being decided filled
}

type fullPage struct {
	key  string
	data []byte
}

// state returns wf's index state, from the pending batches or the store.
func (x *wfIndexer) state(l *sequencer, wf string) (*wfState, error) {
	if s, ok := x.pending[wf]; ok {
		return s, nil
	}
	ctx := context.Background()
	s := &wfState{countKey: wfCountKey(wf)}
	raw, err := l.store.Record(ctx, s.countKey)
	if err != nil {
		return nil, err
	}
	if raw != nil {
		ix, err := l.read.wfRecord(ctx, wf, raw)
		if err != nil {
			return nil, err
		}
		s.count, s.sum, s.oldPage = ix.count, ix.sum, ix.oldPage
		if s.count%wfPageSize != 0 {
			p, err := l.read.wfLastPage(ctx, wf, ix)
			if err != nil {
				return nil, err
			}
			s.page = append(make([]byte, 0, wfPageSize*8), p...)
		}
	}
	if x.pending == nil {
		x.pending = map[string]*wfState{}
	}
	x.pending[wf] = s
	return s, nil
}

// add records that the leaf at index, logged at loggedAt, joins wf; prev
// is its prev_in_workflow (nil for the workflow's first leaf), st its
// statement (a DENIAL for a denied one).
func (x *wfIndexer) add(l *sequencer, wf string, index uint64, prev *uint64, st statement.Statement, loggedAt string) error {
	s, err := x.state(l, wf)
	if err != nil {
		return err
	}
	if s.count == 0 && prev != nil {
		s.count = wfLegacy // the workflow is older than the index
	}
	if s.count == wfLegacy {
		return nil
	}
	if s.count == 0 {
		if err := x.list.add(l.store, wf); err != nil {
			return err
		}
		s.sum.First = index
	}
	s.sum.note(st, loggedAt)
	if s.count%wfPageSize == 0 {
		s.page = make([]byte, 0, wfPageSize*8)
	}
	s.page = binary.BigEndian.AppendUint64(s.page, index)
	s.count++
	switch {
	case s.count%wfPageSize == 0:
		x.full = append(x.full, fullPage{s.lastPageKey(wf), s.page})
	case s.count%wfChunk == 0 && !testWfLegacy:
		// The page only grows past these bytes: they can go as they are.
		n := len(s.page)
		x.full = append(x.full, fullPage{wfChunkKey(wf, s.count/wfPageSize, uint64(n/8/wfChunk-1)), s.page[n-8*wfChunk : n : n]})
	}
	s.job = x.job
	if x.dirty == nil {
		x.dirty = map[string]bool{}
	}
	x.dirty[wf] = true
	return nil
}

// written hands the records the batch changed to put, and forgets them as
// dirty.
func (x *wfIndexer) written(put func(key string, value []byte)) {
	for _, f := range x.full {
		put(f.key, f.data)
	}
	x.full = x.full[:0]
	for wf := range x.dirty {
		s := x.pending[wf]
		var tail []byte
		if s.count%wfPageSize != 0 {
			tail = s.page
		}
		if testWfLegacy {
			put(s.countKey, binary.BigEndian.AppendUint64(nil, s.count))
			if tail != nil {
				put(s.lastPageKey(wf), bytes.Clone(tail))
			}
			put(wfSumKey(wf), s.sum.encode())
			continue
		}
		if s.oldPage {
			// The chunks the older layout's partial page never had.
			for c := 0; c < len(tail)/8/wfChunk; c++ {
				put(wfChunkKey(wf, s.count/wfPageSize, uint64(c)), tail[8*wfChunk*c:8*wfChunk*(c+1):8*wfChunk*(c+1)])
			}
			s.oldPage = false
		}
		tail = tail[len(tail)-8*int(s.count%wfChunk):]
		sum := s.sum.encode()
		v := make([]byte, 8, 8+len(tail)+len(sum))
		binary.BigEndian.PutUint64(v, s.count)
		put(s.countKey, append(append(v, tail...), sum...))
	}
	clear(x.dirty)
	x.list.written(put)
}

// committed records that the batches up to job are in the store: past
// wfCached workflows, it forgets states no later batch changed (the store
// holds them) until a quarter of the room is free again.
func (x *wfIndexer) committed(job uint64) {
	if len(x.pending) <= wfCached {
		return
	}
	for wf, s := range x.pending {
		if s.job <= job {
			delete(x.pending, wf)
			if len(x.pending) <= wfCached*3/4 {
				return
			}
		}
	}
}

// discard forgets everything not committed.
func (x *wfIndexer) discard() {
	x.list = wfList{}
	clear(x.pending)
	clear(x.dirty)
	x.full = x.full[:0]
}

func (l *reader) WorkflowRange(ctx context.Context, wf string, after uint64, limit int) ([]uint64, bool, error) {
	ix, ok, err := l.workflowIndex(ctx, wf)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		// Not indexed: walk the back-links (a workflow begun before the
		// index existed).
		idx, err := l.walkAfter(ctx, wf, after)
		if err != nil {
			return nil, false, err
		}
		if len(idx) > limit {
			return idx[:limit], true, nil
		}
		return idx, false, nil
	}
	count := ix.count
	pages := (count + wfPageSize - 1) / wfPageSize
	page := func(p uint64) ([]byte, error) {
		if p == count/wfPageSize {
			return l.wfLastPage(ctx, wf, ix) // partial (count%wfPageSize > 0)
		}
		raw, err := l.store.Record(ctx, wfPageKey(wf, p))
		if err != nil {
			return nil, err
		}
		if len(raw)%8 != 0 || len(raw) == 0 {
			return nil, fmt.Errorf("workflow index of %q: page %d holds %d bytes", wf, p, len(raw))
		}
		return raw, nil
	}
	// The first page whose last index is above after.
	lo, hi := uint64(0), pages
	for lo < hi {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		mid := (lo + hi) / 2
		raw, err := page(mid)
		if err != nil {
			return nil, false, err
		}
		if binary.BigEndian.Uint64(raw[len(raw)-8:]) > after {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	var out []uint64
	for p := lo; p < pages; p++ {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		raw, err := page(p)
		if err != nil {
			return nil, false, err
		}
		for i := 0; i < len(raw); i += 8 {
			v := binary.BigEndian.Uint64(raw[i:])
			if v <= after {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, v)
		}
	}
	return out, false, nil
}

// wfLastPage is the partial last page of the index ix of wf (count not a
// multiple of 256): its chunks, read, then the tail.
func (l *reader) wfLastPage(ctx context.Context, wf string, ix wfIndex) ([]byte, error) {
	if ix.oldPage {
		return ix.tail, nil
	}
	page, n := ix.count/wfPageSize, ix.count%wfPageSize/wfChunk
	out := make([]byte, 0, 8*wfChunk*n+uint64(len(ix.tail)))
	for c := uint64(0); c < n; c++ {
		raw, err := l.store.Record(ctx, wfChunkKey(wf, page, c))
		if err != nil {
			return nil, err
		}
		if len(raw) != 8*wfChunk {
			return nil, fmt.Errorf("workflow index of %q: chunk %d of page %d holds %d bytes, want %d", wf, c, page, len(raw), 8*wfChunk)
		}
		out = append(out, raw...)
	}
	return append(out, ix.tail...), nil
}

// wfIndex is what a workflow's count record says.
type wfIndex struct {
	count uint64
	// tail: the indexes past the last whole chunk; in the older layout
	// (oldPage), the whole partial page.
	tail    []byte
	sum     wfSummary
	oldPage bool
}

// workflowIndex reads wf's count record; ok is false when wf is not
// indexed, and the error wraps ErrNotFound when wf does not exist.
func (l *reader) workflowIndex(ctx context.Context, wf string) (wfIndex, bool, error) {
	raw, err := l.store.Record(ctx, wfCountKey(wf))
	if err != nil {
		return wfIndex{}, false, err
	}
	if raw != nil {
		ix, err := l.wfRecord(ctx, wf, raw)
		return ix, err == nil, err
	}
	exists, err := l.WorkflowExists(wf)
	if err != nil {
		return wfIndex{}, false, err
	}
	if !exists {
		return wfIndex{}, false, fmt.Errorf("workflow %q: %w", wf, ErrNotFound)
	}
	return wfIndex{}, false, nil
}

// wfRecord parses wf's count record raw: the count, the indexes of the
// partial last page and the summary; or (an index written before they
// went there) the count alone, with the partial page and the summary read
// from their own records.
func (l *reader) wfRecord(ctx context.Context, wf string, raw []byte) (wfIndex, error) {
	if len(raw) < 8 {
		return wfIndex{}, fmt.Errorf("workflow index of %q: a count record of %d bytes, want at least 8", wf, len(raw))
	}
	ix := wfIndex{count: binary.BigEndian.Uint64(raw)}
	part := int(ix.count % wfPageSize)
	if len(raw) == 8 {
		ix.oldPage = true
		if part != 0 {
			p, err := l.store.Record(ctx, wfPageKey(wf, ix.count/wfPageSize))
			if err != nil {
				return wfIndex{}, err
			}
			// (A page that filled since the count was read holds more.)
			if len(p) < 8*part {
				return wfIndex{}, fmt.Errorf("workflow index of %q: page %d holds %d bytes, but the count %d wants %d", wf, ix.count/wfPageSize, len(p), ix.count, 8*part)
			}
			ix.tail = p[:8*part]
		}
		return ix, ix.sum.load(l.store, wf)
	}
	part = int(ix.count % wfChunk)
	if len(raw) <= 8+8*part {
		return wfIndex{}, fmt.Errorf("workflow index of %q: a count of %d wants a tail of %d indexes and a summary, but the record holds %d bytes", wf, ix.count, part, len(raw))
	}
	if part != 0 {
		ix.tail = raw[8 : 8+8*part]
	}
	if err := json.Unmarshal(raw[8+8*part:], &ix.sum); err != nil {
		return wfIndex{}, fmt.Errorf("workflow summary of %q: %w", wf, err)
	}
	return ix, nil
}

func (l *reader) WorkflowExists(wf string) (bool, error) {
	raw, err := l.store.Record(context.Background(), workflowKey(wf))
	return raw != nil, err
}

// walkAfter is the back-link walk, for workflows without an index.
func (l *reader) walkAfter(ctx context.Context, wf string, after uint64) ([]uint64, error) {
	var rec struct {
		Last uint64 `json:"last"`
	}
	ok, err := l.record(workflowKey(wf), &rec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("workflow %q: %w", wf, ErrNotFound)
	}
	var out []uint64
	for next := &rec.Last; next != nil && *next > after; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, *next)
		p, err := l.leafLinks(*next)
		if err != nil {
			return nil, err
		}
		next = p
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// isIndexKey reports whether a record key is the ledger's own.
func isIndexKey(k string) bool { return strings.HasPrefix(k, IndexPrefix) }

func (l *reader) WorkflowIndexesAfter(wf string, after uint64) ([]uint64, error) {
	idx, _, err := l.WorkflowRange(context.Background(), wf, after, math.MaxInt)
	return idx, err
}

func workflowKey(wf string) string { return authority.WorkflowRecordKey(wf) }
