package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
)

// ErrNotFound is returned for an index, id or tile the log does not hold.
var ErrNotFound = errors.New("not found")

// Entry is one leaf of the log, decoded.
type Entry struct {
	Index     uint64
	Leaf      []byte // the exact bytes the tree hashes
	LoggedAt  time.Time
	Prev      *uint64 // prev_in_workflow
	TrustHead uint64
	Envelope  *sign.Parsed
	Statement statement.Statement
}

// Kind is the entry's statement kind.
func (e *Entry) Kind() statement.Kind { return e.Statement.Head().Type }

func (l *reader) LeafBytes(index uint64) ([]byte, error) {
	v, err := l.store.Leaf(context.Background(), index)
	if err == nil && v == nil {
		return nil, fmt.Errorf("entry %d: %w (the log has %d entries)", index, ErrNotFound, l.Head().Size)
	}
	return v, err
}

func (l *reader) Entry(index uint64) (*Entry, error) {
	raw, err := l.LeafBytes(index)
	if err != nil {
		return nil, err
	}
	return DecodeEntry(index, raw)
}

// DecodeEntry decodes a stored leaf. It checks form, not authority.
func DecodeEntry(index uint64, raw []byte) (*Entry, error) {
	leaf, at, err := statement.ParseLeaf(raw)
	if err != nil {
		return nil, fmt.Errorf("entry %d: %w", index, err)
	}
	env, err := sign.ParseEnvelope(leaf.Envelope)
	if err != nil {
		return nil, fmt.Errorf("entry %d: %w", index, err)
	}
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	st, err := statement.Parse(kind, env.Payload)
	if err != nil {
		return nil, fmt.Errorf("entry %d: %w", index, err)
	}
	return &Entry{Index: index, Leaf: raw, LoggedAt: at, Prev: leaf.PrevInWorkflow, TrustHead: leaf.TrustHead, Envelope: env, Statement: st}, nil
}

func (l *reader) record(key string, v any) (bool, error) {
	raw, err := l.store.Record(context.Background(), key)
	if err != nil || raw == nil {
		return false, err
	}
	return true, json.Unmarshal(raw, v)
}

func (l *reader) EntryByID(id string) (*Entry, error) {
	var rec authority.IDRec
	ok, err := l.record(authority.IDRecordKey(id), &rec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("statement %q: %w", id, ErrNotFound)
	}
	return l.Entry(rec.Index)
}

func (l *reader) NextSeq(keyID string) (uint64, error) {
	var rec authority.KeyRec
	ok, err := l.record(authority.KeyRecordKey(keyID), &rec)
	if err != nil || !ok {
		return 1, err
	}
	return rec.LastSeq + 1, nil
}

func (l *reader) KeyBinding(keyID string) (*authority.KeyRec, error) {
	var rec authority.KeyRec
	ok, err := l.record(authority.KeyRecordKey(keyID), &rec)
	if err != nil || !ok {
		return nil, err
	}
	return &rec, nil
}

func (l *reader) WorkflowIndexes(wf string) ([]uint64, error) {
	return l.WorkflowIndexesAfter(wf, 0)
}

func (l *reader) leafLinks(index uint64) (*uint64, error) {
	raw, err := l.LeafBytes(index)
	if err != nil {
		return nil, err
	}
	leaf, _, err := statement.ParseLeaf(raw)
	if err != nil {
		return nil, err
	}
	return leaf.PrevInWorkflow, nil
}

func (l *reader) TrustIndexes(head uint64) ([]uint64, error) {
	var out []uint64
	for next := &head; next != nil; {
		out = append(out, *next)
		if *next == 0 {
			break
		}
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

func (l *reader) InclusionProof(index, size uint64) ([]merkle.Hash, error) {
	head := l.Head()
	if size == 0 {
		size = head.Size
	}
	if size > head.Size || index >= size {
		return nil, fmt.Errorf("no inclusion proof for index %d at size %d: the log has %d entries", index, size, head.Size)
	}
	return l.prover.InclusionProof(index, size)
}

func (l *reader) ConsistencyProof(size1, size2 uint64) ([]merkle.Hash, error) {
	head := l.Head()
	if size1 > size2 || size2 > head.Size || size1 == 0 {
		return nil, fmt.Errorf("no consistency proof from %d to %d: need 0 < from <= to <= %d", size1, size2, head.Size)
	}
	return l.prover.ConsistencyProof(size1, size2)
}

func (l *reader) RootAt(size uint64) (merkle.Hash, error) {
	if size > l.Head().Size {
		return merkle.Hash{}, fmt.Errorf("size %d is beyond the log's %d entries", size, l.Head().Size)
	}
	return l.prover.RootAt(size)
}

// storeTiles reads committed hash tiles for the tree builder and the
// prover. It is a merkle.TileRangeReader: a proof needs only the group of
// 16 hashes around its leaf from the leaf's level-0 tile (the cache holds
// the rest), so it asks the store for those 512 bytes, not the 8 KiB tile.
type storeTiles struct{ st storage.Store }

// ReadTile returns the stored tile.
func (t storeTiles) ReadTile(level, index uint64) ([]byte, error) {
	v, err := t.st.Tile(context.Background(), level, index)
	if err == nil && v == nil {
		return nil, fmt.Errorf("tile %d/%d is not stored", level, index)
	}
	return v, err
}

// ReadTileRange returns hashes from..to-1 of the stored tile (fewer if it
// holds fewer).
func (t storeTiles) ReadTileRange(level, index uint64, from, to int) ([]byte, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("tile %d/%d: bad range %d..%d", level, index, from, to)
	}
	v, err := t.st.TileRange(context.Background(), level, index, from, to)
	if err == nil && v == nil {
		return nil, fmt.Errorf("tile %d/%d is not stored", level, index)
	}
	return v, err
}

func (l *reader) Tile(level, index uint64, width int) ([]byte, error) {
	v, err := l.store.Tile(context.Background(), level, index)
	if err != nil {
		return nil, err
	}
	// A tile may have grown past the committed head only in a transaction
	// that has not committed, which a reader cannot see.
	if len(v) < width*merkle.HashSize {
		return nil, fmt.Errorf("tile %d/%d of width %d: %w", level, index, width, ErrNotFound)
	}
	return v[:width*merkle.HashSize], nil
}

func (l *reader) EntryBundle(index uint64, width int) ([]byte, error) {
	first := index * merkle.TileWidth
	if first+uint64(width) > l.Head().Size {
		return nil, fmt.Errorf("entry bundle %d of width %d: %w", index, width, ErrNotFound)
	}
	leaves, err := l.store.Leaves(context.Background(), first, width)
	if err != nil {
		return nil, err
	}
	if len(leaves) < width {
		return nil, fmt.Errorf("entry %d: %w", first+uint64(len(leaves)), ErrNotFound)
	}
	return merkle.EncodeEntryBundle(leaves)
}

func (l *reader) StateRecords() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := l.store.Records(context.Background(), func(k string, v []byte) error {
		if !isIndexKey(k) && !authority.IsHint(k) { // derived records, not authority state
			out[k] = v
		}
		return nil
	})
	return out, err
}

// recentTiles serves the tiles one batch wrote from memory, and every other
// tile from the store: a batch's answers prove their leaves against the head
// that batch committed, whose right edge (every tile the batch changed) is
// exactly these tiles, so most proofs read nothing from Badger. The tiles
// are those committed, so the prover's cache stays consistent.
type recentTiles struct {
	tiles map[[2]uint64][]byte
	base  storeTiles
}

// ReadTile returns the stored tile.
func (r *recentTiles) ReadTile(level, index uint64) ([]byte, error) {
	if t, ok := r.tiles[[2]uint64{level, index}]; ok {
		return t, nil
	}
	return r.base.ReadTile(level, index)
}

// ReadTileRange returns hashes from..to-1 of the stored tile.
func (r *recentTiles) ReadTileRange(level, index uint64, from, to int) ([]byte, error) {
	if t, ok := r.tiles[[2]uint64{level, index}]; ok {
		if from < 0 || to < from {
			return nil, fmt.Errorf("tile %d/%d: bad range %d..%d", level, index, from, to)
		}
		lo, hi := min(from*merkle.HashSize, len(t)), min(to*merkle.HashSize, len(t))
		return t[lo:hi], nil
	}
	return r.base.ReadTileRange(level, index, from, to)
}
