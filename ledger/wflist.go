package ledger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
)

// # The list of workflows
//
// GET /v1/workflows lists the log's workflows, newest first, a page at a
// time, for the console and for scripts. Neither store can list records by
// prefix, and walking the log or every record grows with history, so the
// workflow index (wfindex.go) also keeps, in the same transaction as the
// leaves:
//
//	~wflist                the number of workflows listed (8 bytes, big endian)
//	~wflist/<page>         up to 32 workflow ids, each followed by "\n" (page: 8 hex)
//
// and, at the end of the workflow's count record ~wfidx/<workflow>
// (wfindex.go), its summary (JSON, a few hundred bytes; an index written
// before kept it in ~wfsum/<workflow>).
//
// A workflow joins the list with its first leaf; the page of the newest is
// rewritten once per batch that begins a workflow (at most 8 KiB: ids are
// identifiers of at most 256 bytes, never holding "\n"). The summary is
// rewritten with the workflow's count, in the same record, once per batch
// that appends to it:
// its first index, the time of its latest leaf, how many of its leaves are
// DENIALs, and the names of the first agents granted authority in it.
// A page of the list costs O(limit) record reads, whatever the log's size.
//
// Like the workflow index, the list is derived data: audit does not compare
// it, and a replay of the log rebuilds it. Workflows begun before the list
// existed are not on it (GET /v1/workflows/{id} still reads them).

const (
	wfListKey     = IndexPrefix + "wflist"
	wfListPage    = 32
	wfSumPrefix   = IndexPrefix + "wfsum/"
	maxSumAgents  = 8
	MaxListAnswer = 100 // the most workflows one page of the list holds
)

func wfListPageKey(page uint64) string { return fmt.Sprintf("%s/%08x", wfListKey, page) }

func wfSumKey(wf string) string { return wfSumPrefix + wf }

// wfSummary is the summary that ends a workflow's count record (or, in
// an index written before, what ~wfsum/<workflow> holds).
type wfSummary struct {
	First   uint64 `json:"first"`
	LastAt  string `json:"last_at,omitempty"`
	Denials uint64 `json:"denials,omitempty"`
	// Agents are the grantee names of the workflow's first CONFIRMs and
	// DELEGATEs, in log order, at most maxSumAgents; MoreAgents is set
	// once a grant named another.
	Agents     []string `json:"agents,omitempty"`
	MoreAgents bool     `json:"more_agents,omitempty"`
}

func (s *wfSummary) load(st storage.Store, wf string) error {
	raw, err := st.Record(context.Background(), wfSumKey(wf))
	if err != nil || raw == nil {
		return err
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return fmt.Errorf("workflow summary of %q: %w", wf, err)
	}
	return nil
}

// note counts st, logged at loggedAt, in the summary.
func (s *wfSummary) note(st statement.Statement, loggedAt string) {
	s.LastAt = loggedAt
	var grantee string
	switch d := st.(type) {
	case *statement.DenialDoc:
		s.Denials++
	case *statement.ConfirmDoc:
		grantee = d.Grantee.Name
	case *statement.DelegateDoc:
		grantee = d.Grantee.Name
	}
	if grantee == "" || slices.Contains(s.Agents, grantee) {
		return
	}
	if len(s.Agents) == maxSumAgents {
		s.MoreAgents = true
		return
	}
	s.Agents = append(s.Agents, grantee)
}

func (s *wfSummary) encode() []byte {
	b, _ := json.Marshal(s) // strings and numbers: cannot fail
	return b
}

// wfList is the list's state as the batches decided so far leave it: its
// count and last page, read once from the store and then kept by the
// sequencer (discard forgets it).
type wfList struct {
	loaded bool
	count  uint64
	page   []byte // the last page, whole or partial
	dirty  bool
	full   []fullPage // pages filled since the last write
}

func (x *wfList) load(st storage.Store) error {
	if x.loaded {
		return nil
	}
	ctx := context.Background()
	raw, err := st.Record(ctx, wfListKey)
	if err != nil {
		return err
	}
	*x = wfList{loaded: true}
	if raw == nil {
		return nil
	}
	if len(raw) != 8 {
		return fmt.Errorf("list of workflows: a count of %d bytes", len(raw))
	}
	x.count = binary.BigEndian.Uint64(raw)
	if x.count%wfListPage != 0 {
		p, err := st.Record(ctx, wfListPageKey(x.count/wfListPage))
		if err != nil {
			return err
		}
		x.page = append([]byte(nil), p...)
	}
	return nil
}

// add appends wf, a workflow's first leaf being decided, to the list.
func (x *wfList) add(st storage.Store, wf string) error {
	if err := x.load(st); err != nil {
		return err
	}
	if x.count%wfListPage == 0 {
		x.page = nil
	}
	x.page = append(append(x.page, wf...), '\n')
	x.count++
	if x.count%wfListPage == 0 {
		x.full = append(x.full, fullPage{wfListPageKey((x.count - 1) / wfListPage), x.page})
	}
	x.dirty = true
	return nil
}

func (x *wfList) written(put func(key string, value []byte)) {
	if !x.dirty {
		return
	}
	for _, f := range x.full {
		put(f.key, f.data)
	}
	x.full = x.full[:0]
	put(wfListKey, binary.BigEndian.AppendUint64(nil, x.count))
	if x.count%wfListPage != 0 {
		put(wfListPageKey(x.count/wfListPage), x.page[:len(x.page):len(x.page)])
	}
	x.dirty = false
}

// WorkflowListing is one workflow on the list, as the committed state
// says it stands.
type WorkflowListing struct {
	Workflow string
	Position uint64 // on the list: 0 for the log's first workflow
	Entries  uint64 // its leaves
	First    uint64 // the index of its first leaf
	Last     uint64 // and of its latest
	LastAt   string // the latest leaf's logged_at
	// OwnerKey is the key id of the principal of its first CONFIRM
	// (empty while it has none); Owner that key's bound name.
	OwnerKey, Owner string
	Agents          []string // the first agents granted authority in it
	MoreAgents      bool
	Denials         uint64 // its DENIAL leaves: the violations logged
	Held            int    // its receipts held for approval now
	Stop            *authority.StopRec
	StepStops       int64 // step STOPs in force
}

// WorkflowList is the Ledger's WorkflowList (readers.go).
func (l *reader) WorkflowList(ctx context.Context, before uint64, limit int, now time.Time) ([]WorkflowListing, uint64, error) {
	raw, err := l.store.Record(ctx, wfListKey)
	if err != nil {
		return nil, 0, err
	}
	if raw == nil {
		return nil, 0, nil
	}
	if len(raw) != 8 {
		return nil, 0, fmt.Errorf("list of workflows: a count of %d bytes", len(raw))
	}
	total := binary.BigEndian.Uint64(raw)
	if before == 0 || before > total {
		before = total
	}
	limit = min(max(limit, 1), MaxListAnswer)
	from := before - min(before, uint64(limit))
	var ids []string
	for p := from / wfListPage; p*wfListPage < before; p++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		page, err := l.store.Record(ctx, wfListPageKey(p))
		if err != nil {
			return nil, 0, err
		}
		names := strings.Split(strings.TrimSuffix(string(page), "\n"), "\n")
		if len(page) == 0 || !strings.HasSuffix(string(page), "\n") || len(names) > wfListPage {
			return nil, 0, fmt.Errorf("list of workflows: page %d is malformed (%d bytes)", p, len(page))
		}
		for i, n := range names {
			if pos := p*wfListPage + uint64(i); pos >= from && pos < before {
				ids = append(ids, n)
			}
		}
	}
	if uint64(len(ids)) != before-from {
		return nil, 0, fmt.Errorf("list of workflows: %d of positions %d..%d are stored", len(ids), from, before-1)
	}
	v := l.StateView()
	out := make([]WorkflowListing, 0, len(ids))
	at := map[string]int{}
	for i := len(ids) - 1; i >= 0; i-- {
		wf := ids[i]
		w := WorkflowListing{Workflow: wf, Position: from + uint64(i)}
		ix, _, err := l.workflowIndex(ctx, wf)
		if err != nil {
			return nil, 0, err
		}
		sum := ix.sum
		w.Entries, w.First, w.LastAt, w.Denials, w.Agents, w.MoreAgents = ix.count, sum.First, sum.LastAt, sum.Denials, sum.Agents, sum.MoreAgents
		if rec := v.Workflow(wf); rec != nil {
			w.Last, w.OwnerKey, w.StepStops = rec.Last, rec.Owner, rec.StepStops
			if rec.Owner != "" {
				if k := v.Key(rec.Owner); k != nil {
					w.Owner = k.Name
				}
			}
			w.Stop = v.StopInForce(wf, "")
		}
		at[wf] = len(out)
		out = append(out, w)
	}
	v.HeldReceipts(maxHeldListed, func(p *authority.PendingRec) bool {
		if i, ok := at[p.Workflow]; ok {
			if state, _ := v.HoldState(p, now); state == authority.HoldHeld {
				out[i].Held++
			}
		}
		return true
	})
	if err := v.Err(); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}
