package ledger

import (
	"context"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/verify"
)

// reader is the ledger's readers part: every read of the committed log,
// for anyone: entries and state records (read.go), proofs, tiles and
// entry bundles (read.go), bundles and tlog-proofs (prove.go), the
// workflow index (wfindex.go), held receipts and approvals
// (approvals.go). Its exported methods are the Ledger's reads of the same
// names, documented on the Ledger below. It owns the prover and its proof
// cache, which the sequencer's answers share (Pending.Wait, prepare); it
// reads the store and the published head, and writes nothing.
//
// Locking: none of its own. The prover is safe for concurrent use, the
// head is an atomic pointer (heads), and a store's reads are safe for
// concurrent use. Set up once at open (load), before anything reads.
type reader struct {
	origin string
	store  storage.Store
	prover *merkle.Prover
	heads  *heads
}

// Head is the published head the reads are bounded by.
func (l *reader) Head() Head { return *l.heads.load() }

// LeafBytes returns the raw leaf at index.
func (l *Ledger) LeafBytes(index uint64) ([]byte, error) { return l.read.LeafBytes(index) }

// Entry returns the entry at index.
func (l *Ledger) Entry(index uint64) (*Entry, error) { return l.read.Entry(index) }

// EntryByID returns the entry of an accepted statement (or DENIAL) by id.
func (l *Ledger) EntryByID(id string) (*Entry, error) { return l.read.EntryByID(id) }

// NextSeq is the seq a key's next statement must carry.
func (l *Ledger) NextSeq(keyID string) (uint64, error) { return l.read.NextSeq(keyID) }

// KeyBinding returns a key's binding, or nil.
func (l *Ledger) KeyBinding(keyID string) (*authority.KeyRec, error) { return l.read.KeyBinding(keyID) }

// WorkflowIndexes returns the indexes of a workflow's leaves in log order.
func (l *Ledger) WorkflowIndexes(wf string) ([]uint64, error) { return l.read.WorkflowIndexes(wf) }

// TrustIndexes returns the GENESIS/PRINCIPAL chain from head back to 0, in
// log order.
func (l *Ledger) TrustIndexes(head uint64) ([]uint64, error) { return l.read.TrustIndexes(head) }

// InclusionProof proves the leaf at index in the tree of size (0: the
// latest committed size).
func (l *Ledger) InclusionProof(index, size uint64) ([]merkle.Hash, error) {
	return l.read.InclusionProof(index, size)
}

// ConsistencyProof proves the tree of size1 is a prefix of the tree of size2.
func (l *Ledger) ConsistencyProof(size1, size2 uint64) ([]merkle.Hash, error) {
	return l.read.ConsistencyProof(size1, size2)
}

// RootAt returns the root hash of the tree of an earlier size.
func (l *Ledger) RootAt(size uint64) (merkle.Hash, error) { return l.read.RootAt(size) }

// Tile returns a hash tile as tlog-tiles serves it: width hashes (1..256)
// of tile level, index, if the committed tree holds that many.
func (l *Ledger) Tile(level, index uint64, width int) ([]byte, error) {
	return l.read.Tile(level, index, width)
}

// EntryBundle returns the tlog-tiles entry bundle index of width leaves.
func (l *Ledger) EntryBundle(index uint64, width int) ([]byte, error) {
	return l.read.EntryBundle(index, width)
}

// StateRecords returns every stored authority state record, for audits
// that compare it with a replay of the log. Hints (authority.IsHint), which
// only save work and which a replay does not derive, are left out.
func (l *Ledger) StateRecords() (map[string][]byte, error) { return l.read.StateRecords() }

// Prove builds a bundle for the entry at subject: the trust chain it rests
// on and its workflow from the first leaf up to the subject (with
// wholeWorkflow, up to the workflow's latest leaf), each entry with an
// inclusion proof against the latest checkpoint.
func (l *Ledger) Prove(subject uint64, wholeWorkflow bool) (*verify.Bundle, error) {
	return l.read.Prove(subject, wholeWorkflow)
}

// ProveAt is Prove against the given committed head, which may be older
// than the latest (say, the newest one witnesses cosigned: its Checkpoint
// then carries their cosignatures, and the bundle carries them too).
// Leaves past the head's size are left out.
func (l *Ledger) ProveAt(subject uint64, wholeWorkflow bool, head Head) (*verify.Bundle, error) {
	return l.read.ProveAt(subject, wholeWorkflow, head)
}

// TLogProof returns a C2SP tlog-proof for the entry at index against the
// latest checkpoint, carrying the leaf in its extra data.
func (l *Ledger) TLogProof(index uint64) ([]byte, error) { return l.read.TLogProof(index) }

// TLogProofAt is TLogProof against the given committed head (see ProveAt).
func (l *Ledger) TLogProofAt(index uint64, head Head) ([]byte, error) {
	return l.read.TLogProofAt(index, head)
}

// WorkflowRange returns up to limit indexes of wf's leaves above after,
// in log order, and whether more follow. Its cost is O(log length + limit)
// record reads for an indexed workflow.
func (l *Ledger) WorkflowRange(ctx context.Context, wf string, after uint64, limit int) ([]uint64, bool, error) {
	return l.read.WorkflowRange(ctx, wf, after, limit)
}

// WorkflowList returns up to limit workflows from the list of workflows
// (wflist.go), newest first, beginning with the one just before position
// before (before 0 or past the end: the newest), and the list's length.
// Its cost is O(limit) record reads and a walk of the held receipts
// (bounded as the approvals list's is), however long the log.
func (l *Ledger) WorkflowList(ctx context.Context, before uint64, limit int, now time.Time) ([]WorkflowListing, uint64, error) {
	return l.read.WorkflowList(ctx, before, limit, now)
}

// WorkflowExists reports whether wf has a leaf in the committed log.
func (l *Ledger) WorkflowExists(wf string) (bool, error) { return l.read.WorkflowExists(wf) }

// WorkflowIndexesAfter returns the indexes of a workflow's leaves above
// after, in log order (from the workflow index: see WorkflowRange, which
// bounds how many).
func (l *Ledger) WorkflowIndexesAfter(wf string, after uint64) ([]uint64, error) {
	return l.read.WorkflowIndexesAfter(wf, after)
}

// StateView returns an engine over the ledger's committed state records,
// for reading (held receipts, their rules and states): never decide with
// it. Each call starts with an empty cache.
func (l *Ledger) StateView() *authority.Engine { return l.read.StateView() }

// HeldReceipts lists the receipts held for approval at time now (held
// state only), oldest first, at most max of them; keep, when not nil,
// picks which to return.
func (l *Ledger) HeldReceipts(now time.Time, max int, keep func(*authority.PendingRec) bool) ([]Held, error) {
	return l.read.HeldReceipts(now, max, keep)
}

// HeldReceipt returns what the ledger knows of one pending receipt that
// was held: its record and state at time now, and its entry. It returns
// ErrNotFound for an unknown receipt and ErrNotHeld for one never held.
func (l *Ledger) HeldReceipt(id string, now time.Time) (*Held, error) {
	return l.read.HeldReceipt(id, now)
}

// Approvals lists the APPROVAL entries of a workflow that answer one
// receipt, in log order, reading the workflow's chain after the receipt.
func (l *Ledger) Approvals(wf, receiptID string, after uint64) ([]*Entry, error) {
	return l.read.Approvals(wf, receiptID, after)
}
