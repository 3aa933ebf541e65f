// Package storage is the seam between custody's ledger and the database
// that holds a log. The ledger decides; a Store keeps what it decided.
//
// Each driver lives in its own package and shares no storage code with
// the others: storage/badgerstore (the embedded default, one process per
// data folder) and storage/pgstore (PostgreSQL, any number of servers on
// one log, one sequencer at a time under a fenced lease). The conformance
// suite in storage/storagetest runs against every driver.
//
// A Store holds committed state only. Everything a batch changes — its
// leaves, dedup indexes, hash tiles, authority records, the tree edge and
// the signed checkpoint — reaches the store in one Batch, committed in one
// durable transaction, or not at all.
package storage

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store is one log's database.
type Store interface {
	// Head returns the committed tree head, or nil for a store that holds
	// no log yet.
	Head(ctx context.Context) (*Head, error)
	// Leaf returns the leaf at index, or nil if the store does not hold it.
	Leaf(ctx context.Context, index uint64) ([]byte, error)
	// Leaves returns the n leaves from first on; fewer if the store does
	// not hold them all (it stops at the first missing one).
	Leaves(ctx context.Context, first uint64, n int) ([][]byte, error)
	// Tile returns the stored hash tile, or nil. TileRange returns hashes
	// from..to-1 of it (fewer if it holds fewer; a malformed tile whole).
	Tile(ctx context.Context, level, index uint64) ([]byte, error)
	TileRange(ctx context.Context, level, index uint64, from, to int) ([]byte, error)
	// Record returns an authority state record, or nil.
	Record(ctx context.Context, key string) ([]byte, error)
	// Records calls fn for every authority state record.
	Records(ctx context.Context, fn func(key string, value []byte) error) error
	// Dedup returns the index of the leaf that decided the submission
	// with this dedup hash.
	Dedup(ctx context.Context, hash [32]byte) (index uint64, ok bool, err error)

	// Weigh returns what b weighs against Budget, the most one
	// transaction may hold; the ledger splits a batch that weighs more.
	Weigh(b *Batch) int
	Budget() int
	// Commit writes b in one durable transaction, fenced: it fails with
	// ErrFenced, writing nothing, unless the committed head's size is
	// b.From (and, on a store with a sequencer lease, the lease is still
	// this store's). It returns ErrCommitUnknown (wrapped) when the
	// transaction may or may not have committed; the caller must read the
	// head back before deciding anything else.
	Commit(ctx context.Context, b *Batch) error
	// SetCheckpoint replaces the checkpoint of the head of size with cp,
	// the same tree signed by other keys (after a key rotation), fenced
	// as Commit is.
	SetCheckpoint(ctx context.Context, size uint64, cp []byte) error

	// ReadFile and WriteFile hold the log's config and key files: in the
	// data folder for a folder store, in the database otherwise. A
	// missing file is an error wrapping fs.ErrNotExist. WriteFile
	// replaces a file atomically and durably.
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error
	// Location names the store for messages (a folder, or a URL without
	// its password).
	Location() string
	// Capabilities declares the optional parts of the seam this store
	// has; the ledger uses what it declares and nothing else.
	Capabilities() Capabilities

	Close() error
}

// Capabilities are the optional parts of the seam a store declares
// (Store.Capabilities). A nil field is a capability the store has not
// got; the ledger then does without it (one sequencer, polling, one
// lookup per submission).
type Capabilities struct {
	// Lease: many servers share the store and one at a time sequences
	// (PostgreSQL).
	Lease Leaser
	// Watch announces other servers' commits (PostgreSQL: LISTEN/NOTIFY).
	Watch HeadWatcher
	// Settle waits out a commit whose outcome is unknown.
	Settle Settler
	// Prefer lets a server prefer to sequence the log (serve --prefer).
	Prefer Preferrer
	// DedupBatch looks up a whole batch's dedup hashes in one round trip.
	DedupBatch DedupBatcher
	// TileBatch reads consecutive tiles of one level in one round trip
	// (the prover's level-0 tile summaries, 64 at a time).
	TileBatch TileBatcher
	// Damaged, when set, reports what a read-write open would lose that
	// the store holds (Badger: committed transactions past a cut in its
	// write-ahead log, seen by a read-only open); empty when nothing.
	Damaged func() []string
	// Diagnose, when set, names what looks damaged in the store (files of
	// a data folder), for the message of a store that failed its checks.
	Diagnose func() []string
}

// OpenError is a store that could not be opened over what it holds (not
// for want of a permission or of space): Files name what the driver found
// wrong, so that the ledger can report the folder as damaged.
type OpenError struct {
	Dir   string
	Err   error
	Files []string
}

func (e *OpenError) Error() string {
	s := fmt.Sprintf("opening the store in %s: %v", e.Dir, e.Err)
	for _, f := range e.Files {
		s += "; " + f
	}
	return s
}

func (e *OpenError) Unwrap() error { return e.Err }

// Head is a committed tree head.
type Head struct {
	Size       uint64
	Edge       []byte // the tree's compact range (merkle.Edge, binary)
	Checkpoint []byte // the signed checkpoint of Size
	Origin     string
}

// Batch is everything one commit writes.
type Batch struct {
	From   uint64   // the committed size it extends: the fence
	Leaves [][]byte // leaves From, From+1, …
	Dedup  []Dedup
	// Tiles and Records given twice in one batch (the same level and
	// index, the same key) keep the last one given.
	Tiles []Tile
	// Records are authority state records; a nil Value is never written.
	Records    []Record
	Edge       []byte
	Checkpoint []byte
	// Origin is set on the batch that holds leaf 0.
	Origin string
}

// Size is the tree size b commits.
func (b *Batch) Size() uint64 { return b.From + uint64(len(b.Leaves)) }

// Dedup maps a submission's dedup hash to the leaf that decided it.
type Dedup struct {
	Hash  [32]byte
	Index uint64
}

// A TileBatcher reads consecutive tiles of one level in one round trip
// (Capabilities.TileBatch): the ledger's prover reads level-0 tile
// summaries so, 64 at a time, where one would do.
type TileBatcher interface {
	// Tiles returns the stored tiles from..from+n-1 of the given level:
	// out[i] is tile from+i, nil where none is stored.
	Tiles(ctx context.Context, level, from uint64, n int) ([][]byte, error)
}

// Tile is a hash tile (up to 256 hashes); a tile grows in place.
type Tile struct {
	Level, Index uint64
	Data         []byte
}

// Record is an authority state record.
type Record struct {
	Key   string
	Value []byte
}

// ErrFenced is returned by Commit when the store's head is not the one
// the batch extends, or the sequencer lease is no longer this store's:
// another sequencer has committed since. Nothing was written.
var ErrFenced = errors.New("storage: fenced: the log moved on, or this server no longer holds the sequencer lease")

// ErrCommitUnknown is returned (wrapped) when a commit's outcome is
// unknown: the connection broke while the transaction was committing.
var ErrCommitUnknown = errors.New("storage: the commit's outcome is unknown")

// ErrUnavailable is returned (wrapped) when the database cannot be
// reached or will not take writes (a read-only standby).
var ErrUnavailable = errors.New("storage: the database is unavailable")

// ErrLocked is returned when another process has the data folder open.
var ErrLocked = errors.New("ledger: the data folder is in use by another process")

// ErrDiskFull is returned (wrapped) when a batch is not committed because
// the data folder's filesystem is nearly full.
var ErrDiskFull = errors.New("ledger: disk nearly full")

// ErrNewerSchema is returned when a database's schema was written by a
// newer custody than this one.
var ErrNewerSchema = errors.New("storage: the database schema is newer than this custody")

// Leaser is implemented by a store that many servers share (PostgreSQL):
// one of them at a time holds the sequencer lease and may commit; every
// Commit and SetCheckpoint is fenced by the lease's epoch.
type Leaser interface {
	// Acquire takes the lease for ttl if it is free or has expired,
	// increasing its epoch; advertise is where the taker accepts appends.
	// It returns the lease as it now stands (Mine: this store got it).
	Acquire(ctx context.Context, advertise string, ttl time.Duration) (Lease, error)
	// Renew extends the lease this store holds; ErrFenced (wrapped) if it
	// is no longer this store's.
	Renew(ctx context.Context, ttl time.Duration) (time.Time, error)
	// Release gives the lease up, so that another server takes it at once.
	Release(ctx context.Context) error
	// Drop forgets the lease locally: every later commit is fenced.
	Drop()
	// Lease reads the lease as it stands.
	Lease(ctx context.Context) (Lease, error)
}

// Lease is the state of a sequencer lease.
type Lease struct {
	Epoch   uint64
	Holder  string // the process holding it
	URL     string // where it takes appends
	Expires time.Time
	// Live is true while the lease has not expired (on the database's
	// clock); Mine when this store holds it.
	Live, Mine bool
	// Failovers counts acquisitions that took the lease from another
	// holder.
	Failovers uint64
}

// DedupBatcher is implemented by a store whose every read is a round trip
// to a server (PostgreSQL): DedupMany looks up many submission hashes in
// one, returning the index of each it holds (those it does not are
// absent from the map). The sequencer asks it once per batch instead of
// Dedup once per submission.
type DedupBatcher interface {
	DedupMany(ctx context.Context, hashes [][32]byte) (map[[32]byte]uint64, error)
}

// HeadWatcher is implemented by a store that many servers share and that
// can announce commits to them (PostgreSQL: LISTEN/NOTIFY). WatchHead
// returns a channel that receives, soon after any server commits a batch
// to this log, a signal (never blocking: one pending signal stands for
// any number of commits), until ctx ends or the store is closed. A signal
// may come without a commit (after the listening connection was made
// again, for what it may have missed); while the connection is down no
// signal comes at all, so the caller must keep polling the head as well.
type HeadWatcher interface {
	WatchHead(ctx context.Context) <-chan struct{}
}

// Settler is implemented by a store that can wait out a transaction whose
// commit outcome is unknown: SettleUnknown returns once that transaction
// has ended on the server (committed or rolled back, ending it if need
// be), so that a read of the head that follows tells which.
type Settler interface {
	SettleUnknown(ctx context.Context) error
}

// Preferrer is implemented by a store whose servers may prefer to
// sequence the log (custody serve --prefer): Prefer says so for as long
// as this server lives (a dead server prefers nothing), until ctx ends or
// the store is closed; Preferred reports whether another live server
// prefers it. A leader that does not prefer the log hands its lease over
// to one that does.
type Preferrer interface {
	Prefer(ctx context.Context)
	Preferred(ctx context.Context) (bool, error)
}
