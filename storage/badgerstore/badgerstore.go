// Package badgerstore is custody's embedded store: a Badger v4 database in
// the data folder, fsynced on every commit, owned by one process at a
// time (Badger's folder lock is the sequencer lock).
//
// Key layout. One byte of prefix, then fixed-width or free fields.
//
//	l <index u64>            leaf bytes
//	t <level u8> <index u64> hash tile (up to 256 hashes, grows in place);
//	                         level 64 (merkle.SummaryTileLevel): a level-0
//	                         tile's summary (up to 4 hashes). Level 0 is
//	                         no longer written here (quarters, below) but
//	                         still read in folders written before them
//	q <index u64> <q u8>     quarter q (0-3) of level-0 tile index: its
//	                         hashes 64q..64q+63 (2 KiB when full), so a
//	                         proof reads the one 2 KiB value around its
//	                         leaf, not the 8 KiB tile (docs/FORMATS.md)
//	h <dedup hash 32>        index of the leaf holding the decision
//	s <keyid hex> <seq u64>  (no longer written: an index nothing read; a
//	                         key's seq lives in its authority record)
//	a <state key>            authority state record (JSON)
//	m edge                   the tree's compact range
//	m checkpoint             the latest signed checkpoint
//	m origin                 the log's origin
package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/skl"
	"golang.org/x/sys/unix"

	"github.com/custodylog/custody/internal/durable"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
)

const (
	pLeaf = 'l'
	pTile = 't'
	// pQuarter keys the quarters of level-0 tiles.
	pQuarter = 'q'
	pHash    = 'h'
	pState   = 'a'
)

var (
	kEdge       = []byte("medge")
	kCheckpoint = []byte("mcheckpoint")
	kOrigin     = []byte("morigin")
)

// The lengths of the fixed-size keys (Weigh counts them).
const (
	leafKeyLen    = 9
	tileKeyLen    = 10
	quarterKeyLen = 10
	hashKeyLen    = 33
)

func leafKey(index uint64) []byte {
	k := make([]byte, leafKeyLen)
	k[0] = pLeaf
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func tileKey(level, index uint64) []byte {
	k := make([]byte, tileKeyLen)
	k[0] = pTile
	k[1] = byte(level)
	binary.BigEndian.PutUint64(k[2:], index)
	return k
}

// quarterHashes is the width of a level-0 tile's quarter: the group of
// leaves a proof reads (merkle's summary level, 64), 2 KiB when full.
const (
	quarterHashes = merkle.TileWidth / 4
	quarterSize   = quarterHashes * merkle.HashSize
)

func quarterKey(index uint64, q int) []byte {
	k := make([]byte, quarterKeyLen)
	k[0] = pQuarter
	binary.BigEndian.PutUint64(k[1:], index)
	k[9] = byte(q)
	return k
}

// quartered reports whether a tile is written as quarters: a well-formed
// level-0 tile. Anything else (never written by the ledger) is kept whole
// under its tile key, to be read back whole and rejected by its reader.
func quartered(t storage.Tile) bool {
	return t.Level == 0 && len(t.Data) > 0 && len(t.Data)%merkle.HashSize == 0 && len(t.Data) <= merkle.FullTileSize
}

// quarters is how many quarters a level-0 tile of n bytes is written as.
func quarters(n int) int { return (n + quarterSize - 1) / quarterSize }

func hashKey(h [32]byte) []byte { return append([]byte{pHash}, h[:]...) }

func stateKey(key string) []byte { return append([]byte{pState}, key...) }

func be64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// Options tune the store.
type Options struct {
	// Logger receives Badger's warnings and errors (default: discarded
	// unless CUSTODY_BADGER_LOG is set).
	Logger badger.Logger
	// ReserveBytes is the free space the store keeps on its filesystem
	// (default 256 MiB): a batch that would leave less is not committed
	// and fails with storage.ErrDiskFull.
	ReserveBytes int64
	// BallastBytes is the size of the ballast file the store keeps so
	// that a disk another program fills cannot crash it (ballast.go;
	// default 64 MiB, negative: none).
	BallastBytes int64
	// MemTableBytes is the size of Badger's memtables (default 12 MiB,
	// memTableSize). A smaller memtable is flushed into a table file
	// more often (the disk tests use one to make Badger write tables
	// while another program fills the disk), and bounds a transaction
	// (Budget) to a smaller size.
	MemTableBytes int64
	// ReadOnly opens a scratch copy of the database (scratch.go) and
	// never writes to the data folder. Commit fails.
	ReadOnly bool
}

// Store is a data folder's Badger database.
type Store struct {
	dir      string
	db       *badger.DB
	reserve  int64
	scratch  *scratch // the copy a ReadOnly store reads
	readOnly bool
	memTable int64     // Badger's memtable size
	ballast  *ballast  // nil when ReadOnly
	pre      *prealloc // nil when ReadOnly (prealloc.go)
	closed   atomic.Bool
}

var _ storage.Store = (*Store)(nil)

// Exists reports whether dir holds a database.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "db"))
	return err == nil
}

// Open opens (creating if needed) the database in dir/db.
func Open(dir string, o Options) (*Store, error) {
	if o.ReserveBytes <= 0 {
		o.ReserveBytes = 256 << 20
	}
	if o.MemTableBytes <= 0 {
		o.MemTableBytes = memTableSize
	}
	if o.MemTableBytes < minMemTable {
		return nil, fmt.Errorf("opening %s: a memtable of %d bytes: want at least %d", dir, o.MemTableBytes, minMemTable)
	}
	dbDir := filepath.Join(dir, "db")
	var sc *scratch
	if o.ReadOnly {
		var err error
		if sc, err = newScratch(dbDir); err != nil {
			return nil, err
		}
		dbDir = sc.dir
	}
	bo := badgerOptions(dbDir, o)
	// Badger checks a table's index, but not its blocks, when it opens a
	// table file; and its own check (ChecksumVerificationMode) crashes the
	// process on a damaged block. So every table file is checked here,
	// before Badger opens the folder.
	// A table found whole by an earlier read-write open, unchanged since
	// (verifiedName), is not read again.
	if damaged := checkTables(filepath.Join(dir, "db"), bo, checkedTables, loadVerified(dir)); len(damaged) > 0 {
		if !o.ReadOnly {
			sc.remove()
			return nil, &OpenError{Dir: dir, Err: errDamagedTable, Files: damaged}
		}
		sc.damage = append(sc.damage, damaged...)
	} else if !o.ReadOnly {
		saveVerified(dir, filepath.Join(dir, "db")) // on failure the next open checks them all again
	}
	var bl *ballast
	if o.ReadOnly {
		// Table checksums were checked (checkTables, above): a damaged
		// table is reported as damage and the rest of the folder can
		// still be inspected. Every block read is checked again, so that
		// a damaged block reads as absent (Badger does not return the
		// error) rather than as whatever its bytes decode to, or a panic.
		bo = bo.WithReadOnly(true).WithNumCompactors(0).WithChecksumVerificationMode(options.OnBlockRead)
	} else {
		if o.BallastBytes == 0 {
			o.BallastBytes = 64 << 20
		}
		// Released now if the disk is already full, before Badger writes
		// anything at open.
		bl = newBallast(dir, o.BallastBytes, o.ReserveBytes)
		if err := roomToOpen(dir, dbDir, bl, closeFlushRoom(o.MemTableBytes)); err != nil {
			bl.close()
			return nil, err
		}
	}
	if !o.ReadOnly {
		if err := removeEmptyLogs(dbDir); err != nil {
			bl.close()
			return nil, err
		}
	}
	db, err := badger.Open(bo)
	if err != nil {
		bl.close()
		sc.remove()
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (%v)", storage.ErrLocked, dir, err)
		}
		return nil, &OpenError{Dir: dir, Err: err, Files: diagnose(filepath.Join(dir, "db"), sc)}
	}
	st := &Store{dir: dir, db: db, reserve: o.ReserveBytes, scratch: sc, readOnly: o.ReadOnly, ballast: bl, memTable: o.MemTableBytes}
	if !o.ReadOnly {
		st.pre = newPrealloc(dbDir)
	}
	return st, nil
}

// OpenError is Open's error when Badger cannot open the database; Files
// names the files that look damaged.
type OpenError = storage.OpenError

// Close closes the database (and removes a read-only store's scratch
// copy).
//
// Badger's close writes the memtable into a new table file through a
// memory map: on a full disk, a page with no block behind it kills the
// process (SIGBUS). When less than closeFlushRoom is free, Close gives
// back the ballast (both files) first. If that still leaves too little
// (another program took it), Close does not close Badger: it leaves the
// folder as a crash would (every commit is already durable in the
// write-ahead log, which the next open replays), and the folder's lock
// goes with the process. It returns nil: nothing acknowledged is lost.
//
// A clean close removes the empty write-ahead log made ahead of Badger
// (prealloc.go), so that Badger's own Open (an operator's badger tool)
// opens the folder.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil // closed already (a ledger's error path may close twice)
	}
	if !s.readOnly {
		room := closeFlushRoom(s.memTable)
		if free, err := freeBytes(s.dir); err == nil && free < room {
			s.ballast.releaseForFlush()
			if free, err = freeBytes(s.dir); err == nil && free < room {
				s.ballast.close()
				return nil
			}
		}
	}
	err := s.db.Close()
	if s.pre != nil {
		// The write-ahead log made ahead (prealloc.go) is empty: Badger
		// itself cannot open a folder holding one, so a folder closed
		// cleanly is left without it, as Badger leaves its own (and an
		// operator's Badger tools open it). One left by a crash is
		// removed by the next Open.
		if rerr := removeEmptyLogs(s.pre.dir); err == nil && rerr != nil {
			err = fmt.Errorf("closing %s: removing the write-ahead log made ahead: %w", s.dir, rerr)
		}
	}
	s.ballast.close()
	s.scratch.remove()
	return err
}

// roomToOpen makes sure Badger's open will not write a page the disk has
// no block for: a write-ahead log left with transactions in it (after a
// crash, or a Close on a full disk) is flushed into a table file as soon
// as Badger opens. With less than closeFlushRoom free, the flush ballast
// is given back for it; if that is not enough, Open fails with
// storage.ErrDiskFull (a start refused, rather than a SIGBUS).
func roomToOpen(dir, dbDir string, bl *ballast, room int64) error {
	free, err := freeBytes(dir)
	if err != nil || free >= room {
		return nil
	}
	if !walPending(dbDir) {
		return nil
	}
	bl.releaseForFlush()
	if free, err = freeBytes(dir); err != nil || free >= room {
		return nil
	}
	return fmt.Errorf("%w: opening %s: its write-ahead log holds transactions the storage engine writes into a table file as it opens, which needs about %d MiB, and only %d MiB are free (another program filled the disk); free some space and start again: nothing is lost",
		storage.ErrDiskFull, dir, room>>20, free>>20)
}

// walPending reports whether a write-ahead log (*.mem) in dbDir holds a
// transaction.
func walPending(dbDir string) bool {
	ents, err := os.ReadDir(dbDir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".mem") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dbDir, e.Name()))
		if err != nil {
			return true // cannot tell: as if it did
		}
		if scanLog(data, int64(len(data))).validEnd > logHeaderSize {
			return true
		}
	}
	return false
}

// closeFlushRoom is the free space Close wants before Badger flushes a
// memtable of memTable bytes into a table file (at most about its size).
func closeFlushRoom(memTable int64) int64 { return memTable + 4<<20 }

// Diagnose names the files of the data folder that look damaged: a
// missing or damaged MANIFEST, missing table files, write-ahead or value
// logs that a read-write open would cut (known only for a ReadOnly
// store), table files that fail their checksums.
func (s *Store) Diagnose() []string {
	return diagnose(filepath.Join(s.dir, "db"), s.scratch)
}

// Damaged reports whether a read-write open would cut committed
// transactions from a write-ahead or value log (known only for a ReadOnly
// store), naming the files.
func (s *Store) Damaged() []string {
	if s.scratch == nil {
		return nil
	}
	return s.scratch.damage
}

// Location is the data folder.
func (s *Store) Location() string { return s.dir }

// memTableSize is Badger's memtable size unless Options say otherwise;
// minMemTable is the smallest the store takes (Badger wants a
// transaction's limit, 15% of a memtable, above the value threshold).
const (
	memTableSize = 12 << 20
	minMemTable  = 256 << 10
)

// valueThreshold is the value size from which Badger keeps a value in the
// value log, with only a pointer in the LSM tree.
const valueThreshold = 1 << 10

// budget is the most a batch's transaction may weigh by Badger's own
// reckoning (see weigh) with a memtable of memTable bytes: 90% of its
// limit, 15% of a memtable.
func budget(memTable int64) int { return int(memTable * 15 / 100 * 9 / 10) }

func badgerOptions(path string, o Options) badger.Options {
	if o.MemTableBytes <= 0 {
		o.MemTableBytes = memTableSize
	}
	bo := badger.DefaultOptions(path).
		// Every commit is fsynced: an acknowledged entry is durable.
		WithSyncWrites(true).
		// One writer (the sequencer) and no read-modify-write races between
		// transactions: conflict detection is pure overhead.
		WithDetectConflicts(false).
		// Leaves, tiles and records are written once and overwritten only
		// by the same key (tiles grow, records update): keep one version.
		WithNumVersionsToKeep(1).
		// 2 cores, small memory: two 12 MiB memtables, bounded caches for
		// the reads proofs and bundles do, and compaction on both cores.
		// Each memtable's arena (1.3 times its size) lives on the Go heap
		// from the moment the ledger opens, so it sets how far the
		// collector lets the heap grow: 32 MiB memtables cost about 60 MiB
		// more resident memory at 10M entries. A transaction may hold at
		// most 15% of a memtable (1.8 MiB); see budget.
		WithMemTableSize(o.MemTableBytes).
		WithNumMemtables(2).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		// 16 KiB table blocks, not 4 KiB: a table's index (read at open, and
		// resident through Badger's memory map) holds one entry per block,
		// so at 10M entries of 400 B indexes and Bloom filters take 19 MiB,
		// not 55. A point read decompresses one 16 KiB block (cached).
		// Tables written earlier keep their block size.
		WithBlockSize(16 << 10).
		// 8 MiB base tables, not 2: a 10M-entry log holds about 100 tables
		// instead of about 400, and opening it with a cold page cache reads
		// each table's index once (1.3 s -> 0.3-0.5 s at 10M).
		WithBaseTableSize(8 << 20).
		WithNumCompactors(2).
		// Values over 1 KiB (leaves, full tiles) go to the value log, so
		// compaction does not rewrite them; small records stay in the LSM.
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(256 << 20).
		// Values read from the value log are checked against their
		// checksum (a damaged one fails the read). Table files are
		// checked as the store opens (checkTables).
		WithVerifyValueChecksum(true).
		// Badger's expvar counters (a map lookup and an atomic add per
		// level per read, 3% of a proof's CPU at 10M entries): custody
		// exports its own metrics and never reads these.
		WithMetricsEnabled(false)
	switch {
	case o.Logger != nil:
		bo.Logger = o.Logger
	case os.Getenv("CUSTODY_BADGER_LOG") == "":
		bo.Logger = nil // Badger is chatty at INFO; errors reach callers anyway
	}
	return bo
}

func getValue(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

func (s *Store) get(key []byte) ([]byte, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		v, err = getValue(txn, key)
		return err
	})
	return v, err
}

// Head returns the committed head, or nil.
func (s *Store) Head(context.Context) (*storage.Head, error) {
	var edge, cp, origin []byte
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		if edge, err = getValue(txn, kEdge); err != nil {
			return err
		}
		if cp, err = getValue(txn, kCheckpoint); err != nil {
			return err
		}
		origin, err = getValue(txn, kOrigin)
		return err
	})
	if err != nil || edge == nil {
		return nil, err
	}
	e, err := merkle.ParseEdge(edge)
	if err != nil {
		return nil, fmt.Errorf("stored tree edge: %w", err)
	}
	return &storage.Head{Size: e.Size(), Edge: edge, Checkpoint: cp, Origin: string(origin)}, nil
}

// Leaf returns a leaf, or nil.
func (s *Store) Leaf(_ context.Context, index uint64) ([]byte, error) { return s.get(leafKey(index)) }

// Leaves returns up to n leaves from first on.
func (s *Store) Leaves(_ context.Context, first uint64, n int) ([][]byte, error) {
	var out [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for i := uint64(0); i < uint64(n); i++ {
			v, err := getValue(txn, leafKey(first+i))
			if err != nil {
				return err
			}
			if v == nil {
				return nil
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// Tile returns a stored tile, or nil.
func (s *Store) Tile(_ context.Context, level, index uint64) ([]byte, error) {
	if level != 0 {
		return s.get(tileKey(level, index))
	}
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		v, err = level0Range(txn, index, 0, merkle.TileWidth)
		return err
	})
	return v, err
}

// level0Range returns hashes from..to-1 of level-0 tile index (fewer if
// the tile holds fewer; nil if it is not stored), read from the quarters
// that hold them, or from the whole tile a folder written before quarters
// holds. As a tile grows, each commit writes its quarters from the first
// not yet full (fullQuarter), so they are stored in order and the first
// absent or short quarter ends the tile.
func level0Range(txn *badger.Txn, index uint64, from, to int) ([]byte, error) {
	var out []byte
	for q := from / quarterHashes; q*quarterHashes < to && q < 4; q++ {
		item, err := txn.Get(quarterKey(index, q))
		if errors.Is(err, badger.ErrKeyNotFound) {
			if q == from/quarterHashes && out == nil {
				return level0Fallback(txn, index, from, to, q)
			}
			break
		}
		if err != nil {
			return nil, err
		}
		short := false
		err = item.Value(func(val []byte) error {
			if len(val)%merkle.HashSize != 0 || len(val) > quarterSize {
				return fmt.Errorf("quarter %d of level-0 tile %d is %d bytes: %w", q, index, len(val), merkle.ErrMalformedTile)
			}
			lo := max(from-q*quarterHashes, 0) * merkle.HashSize
			hi := min(to-q*quarterHashes, quarterHashes) * merkle.HashSize
			lo, hi = min(lo, len(val)), min(hi, len(val))
			if out == nil {
				out = make([]byte, 0, (to-from)*merkle.HashSize)
			}
			// val is Badger's (its memory map): valid only in the transaction.
			out = append(out, val[lo:hi]...)
			short = len(val) < quarterSize
			return nil
		})
		if err != nil {
			return nil, err
		}
		if short {
			break
		}
	}
	return out, nil
}

// level0Fallback reads hashes from..to-1 of level-0 tile index when its
// quarter q is absent: past the end of a quartered tile (nothing), or a
// tile written whole before quarters.
func level0Fallback(txn *badger.Txn, index uint64, from, to, q int) ([]byte, error) {
	if q > 0 {
		if _, err := txn.Get(quarterKey(index, 0)); err == nil {
			return []byte{}, nil
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return nil, err
		}
	}
	item, err := txn.Get(tileKey(0, index))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v []byte
	err = item.Value(func(val []byte) error {
		lo, hi := 0, len(val) // a malformed tile goes back whole, for the caller to reject
		if len(val)%merkle.HashSize == 0 && len(val) <= merkle.FullTileSize {
			lo, hi = min(from*merkle.HashSize, len(val)), min(to*merkle.HashSize, len(val))
		}
		v = append(make([]byte, 0, hi-lo), val[lo:hi]...)
		return nil
	})
	return v, err
}

// TileRange copies hashes from..to-1 of a tile out of Badger's value log
// inside the read transaction: a proof needs 512 bytes, not the 8 KiB
// tile.
func (s *Store) TileRange(_ context.Context, level, index uint64, from, to int) ([]byte, error) {
	var v []byte
	if level == 0 && from >= 0 && to > from {
		err := s.db.View(func(txn *badger.Txn) error {
			var err error
			v, err = level0Range(txn, index, from, min(to, merkle.TileWidth))
			return err
		})
		return v, err
	}
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(tileKey(level, index))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(val []byte) error {
			lo, hi := 0, len(val) // a malformed tile goes back whole, for the caller to reject
			if to >= 0 && len(val)%merkle.HashSize == 0 && len(val) <= merkle.FullTileSize {
				lo, hi = min(from*merkle.HashSize, len(val)), min(to*merkle.HashSize, len(val))
			}
			// val is Badger's (its memory map): valid only in the transaction.
			v = append(make([]byte, 0, hi-lo), val[lo:hi]...)
			return nil
		})
	})
	return v, err
}

// Tiles returns tiles from..from+n-1 of a level (nil where none is
// stored), in one iterator over their keys, which sort together.
func (s *Store) Tiles(_ context.Context, level, from uint64, n int) ([][]byte, error) {
	out := make([][]byte, n)
	if n <= 0 {
		return out[:0], nil
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pTile, byte(level)}, PrefetchValues: false})
		defer it.Close()
		for it.Seek(tileKey(level, from)); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != tileKeyLen {
				continue
			}
			i := binary.BigEndian.Uint64(k[2:])
			if i < from || i-from >= uint64(n) {
				break
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[i-from] = v
		}
		if level == 0 {
			return level0Tiles(txn, from, out)
		}
		return nil
	})
	return out, err
}

// level0Tiles sets out[i] to level-0 tile from+i for every tile stored as
// quarters (over a whole tile from before quarters), in one iterator.
func level0Tiles(txn *badger.Txn, from uint64, out [][]byte) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pQuarter}, PrefetchValues: false})
	defer it.Close()
	n := uint64(len(out))
	started := make([]bool, n) // quarter 0 seen: the quarters replace a whole tile
	for it.Seek(quarterKey(from, 0)); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != quarterKeyLen {
			continue
		}
		i, q := binary.BigEndian.Uint64(k[1:]), int(k[9])
		if i < from || i-from >= n {
			break
		}
		t := &out[i-from]
		if q == 0 {
			*t = make([]byte, 0, merkle.FullTileSize)
			started[i-from] = true
		} else if !started[i-from] || len(*t) != q*quarterSize {
			continue // past the tile's end (a short or missing quarter before it)
		}
		err := it.Item().Value(func(val []byte) error {
			if len(val)%merkle.HashSize != 0 || len(val) > quarterSize {
				return fmt.Errorf("quarter %d of level-0 tile %d is %d bytes: %w", q, i, len(val), merkle.ErrMalformedTile)
			}
			*t = append(*t, val...)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Record returns an authority record, or nil.
func (s *Store) Record(_ context.Context, key string) ([]byte, error) { return s.get(stateKey(key)) }

// Records calls fn for every authority record.
func (s *Store) Records(_ context.Context, fn func(string, []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pState}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(string(it.Item().Key()[1:]), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Dedup returns the index a dedup hash maps to.
func (s *Store) Dedup(_ context.Context, h [32]byte) (uint64, bool, error) {
	v, err := s.get(hashKey(h))
	if err != nil || v == nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("dedup index of %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// writes is b as Badger keys and values. The keys (and the dedup
// values) are cut from one buffer each, not allocated one by one: a batch
// writes a few per entry.
func writes(b *storage.Batch) [][2][]byte {
	n := len(b.Leaves) + len(b.Dedup) + len(b.Tiles) + len(b.Records) + 3
	size := len(b.Leaves)*leafKeyLen + len(b.Dedup)*hashKeyLen
	for _, t := range b.Tiles {
		if quartered(t) {
			q := quarters(len(t.Data))
			size += q * quarterKeyLen
			n += q - 1
		} else {
			size += tileKeyLen
		}
	}
	for _, r := range b.Records {
		size += 1 + len(r.Key)
	}
	keys := make([]byte, 0, size)
	// key returns what the last append added to keys, capped so that no
	// later append can write into it.
	key := func(start int) []byte { return keys[start:len(keys):len(keys)] }
	w := make([][2][]byte, 0, n)
	for i, leaf := range b.Leaves {
		start := len(keys)
		keys = append(keys, pLeaf)
		keys = binary.BigEndian.AppendUint64(keys, b.From+uint64(i))
		w = append(w, [2][]byte{key(start), leaf})
	}
	values := make([]byte, 0, 8*len(b.Dedup))
	for _, d := range b.Dedup {
		start := len(keys)
		keys = append(append(keys, pHash), d.Hash[:]...)
		v := len(values)
		values = binary.BigEndian.AppendUint64(values, d.Index)
		w = append(w, [2][]byte{key(start), values[v:len(values):len(values)]})
	}
	for _, t := range b.Tiles {
		if quartered(t) {
			for q := range quarters(len(t.Data)) {
				start := len(keys)
				keys = append(keys, pQuarter)
				keys = binary.BigEndian.AppendUint64(keys, t.Index)
				keys = append(keys, byte(q))
				w = append(w, [2][]byte{key(start), t.Data[q*quarterSize : min((q+1)*quarterSize, len(t.Data))]})
			}
			continue
		}
		start := len(keys)
		keys = append(keys, pTile, byte(t.Level))
		keys = binary.BigEndian.AppendUint64(keys, t.Index)
		w = append(w, [2][]byte{key(start), t.Data})
	}
	for _, r := range b.Records {
		if r.Value != nil {
			start := len(keys)
			keys = append(append(keys, pState), r.Key...)
			w = append(w, [2][]byte{key(start), r.Value})
		}
	}
	w = append(w, [2][]byte{kEdge, b.Edge}, [2][]byte{kCheckpoint, b.Checkpoint})
	if b.Origin != "" {
		w = append(w, [2][]byte{kOrigin, []byte(b.Origin)})
	}
	return w
}

// Budget is the most a transaction may weigh.
func (s *Store) Budget() int { return budget(s.memTable) }

// Weigh is what b's writes weigh against Badger's transaction limits, in
// its own reckoning: per write, the key, the value (or a 12-byte pointer
// for a value in the value log), two bytes of metadata and ten of
// version; and, against the limit on entries, MaxNodeSize bytes each. The
// larger of the two counts.
// It counts the writes Commit makes (writes) without building their keys.
func (s *Store) Weigh(b *storage.Batch) int {
	var bytes, n int
	add := func(key, value int) {
		if value >= valueThreshold {
			value = 12
		}
		bytes += key + value + 2 + 10
		n++
	}
	for _, leaf := range b.Leaves {
		add(leafKeyLen, len(leaf))
	}
	for range b.Dedup {
		add(hashKeyLen, 8)
	}
	for _, t := range b.Tiles {
		if quartered(t) {
			for q := range quarters(len(t.Data)) {
				add(quarterKeyLen, min(quarterSize, len(t.Data)-q*quarterSize))
			}
			continue
		}
		add(tileKeyLen, len(t.Data))
	}
	for _, r := range b.Records {
		if r.Value != nil {
			add(1+len(r.Key), len(r.Value))
		}
	}
	add(len(kEdge), len(b.Edge))
	add(len(kCheckpoint), len(b.Checkpoint))
	if b.Origin != "" {
		add(len(kOrigin), len(b.Origin))
	}
	return max(bytes, n*skl.MaxNodeSize)
}

// Commit writes b in one transaction with SyncWrites. The folder lock
// makes this process the only writer; the head is still checked, so a
// caller that lost track of it is told.
func (s *Store) Commit(_ context.Context, b *storage.Batch) error {
	w := writes(b)
	size := 0
	for _, kv := range w {
		size += len(kv[0]) + len(kv[1])
	}
	// Leaves, their tiles, state and indexes, written to the value log and
	// then again by compaction: reserve three times the batch.
	if err := s.checkSpace(3 * size); err != nil {
		return err
	}
	wb, vb := logBytes(w)
	if err := s.pre.before(wb, vb); err != nil {
		return err
	}
	defer s.pre.after(wb, vb)
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := s.fence(txn, b.From); err != nil {
		return err
	}
	for _, kv := range w {
		if full, err := fullQuarter(txn, kv[0], kv[1]); err != nil {
			return err
		} else if full {
			continue
		}
		if err := txn.Set(kv[0], kv[1]); err != nil {
			return fmt.Errorf("committing %d entries: %w", len(b.Leaves), err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("committing %d entries: %w", len(b.Leaves), err)
	}
	return nil
}

// fullQuarter reports whether the write of key=value is a full quarter of
// a level-0 tile that is already stored full. A tile only grows (each
// version a prefix of the next), so a full quarter never changes: a tile
// that grows is written again from the quarter that is not yet full, and
// the value log does not take a copy of the full ones at every batch.
// Only the key is looked up (Badger's ValueSize reads the value pointer,
// and is exact to a few bytes of header; the next smaller quarter is 32
// bytes shorter).
func fullQuarter(txn *badger.Txn, key, value []byte) (bool, error) {
	if len(key) != quarterKeyLen || key[0] != pQuarter || len(value) != quarterSize {
		return false, nil
	}
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return item.ValueSize() > quarterSize-merkle.HashSize/2, nil
}

// fence checks that the committed head has size.
func (s *Store) fence(txn *badger.Txn, size uint64) error {
	edge, err := getValue(txn, kEdge)
	if err != nil {
		return err
	}
	var have uint64
	if edge != nil {
		// Only the size is compared: read it, and check the length that
		// size implies, as ParseEdge would, without rebuilding the edge.
		if len(edge) < 8 || len(edge) != 8+bits.OnesCount64(binary.BigEndian.Uint64(edge))*merkle.HashSize {
			return fmt.Errorf("stored tree edge: %w: %d bytes", merkle.ErrMalformedEdge, len(edge))
		}
		have = binary.BigEndian.Uint64(edge)
	}
	if have != size {
		return fmt.Errorf("%w: the stored head has size %d, the batch extends %d", storage.ErrFenced, have, size)
	}
	return nil
}

// SetCheckpoint replaces the head's checkpoint.
func (s *Store) SetCheckpoint(_ context.Context, size uint64, cp []byte) error {
	wb, vb := logBytes([][2][]byte{{kCheckpoint, cp}})
	if err := s.pre.before(wb, vb); err != nil {
		return err
	}
	defer s.pre.after(wb, vb)
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := s.fence(txn, size); err != nil {
		return err
	}
	if err := txn.Set(kCheckpoint, cp); err != nil {
		return err
	}
	return txn.Commit()
}

// checkSpace fails if committing about need more bytes would leave less
// than the reserve free on the data folder's filesystem.
//
// Badger writes its value log and memtables through memory maps. When a
// filesystem has no room for a mapped page, the kernel answers with SIGBUS
// and the process dies: no error reaches the caller. So the store refuses
// to commit while less than the reserve would stay free, fails the batch
// (nothing is acknowledged), and resumes by itself once space is freed.
func (s *Store) checkSpace(need int) error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return nil // cannot tell; Badger's own errors still apply
	}
	free := st.Bavail * uint64(st.Bsize)
	want := uint64(s.reserve) + uint64(need)
	s.ballast.checkFree(int64(free))
	if released := s.ballast.released(); free < want || released {
		return fmt.Errorf("%w: %s", storage.ErrDiskFull, diskFullError(int64(free), s.reserve, s.dir, released))
	}
	return nil
}

// ReadFile reads a file of the data folder (name relative to it, or
// absolute).
func (s *Store) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(s.path(name))
}

func (s *Store) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.dir, filepath.FromSlash(name))
}

// WriteFile replaces a file of the data folder atomically and durably.
func (s *Store) WriteFile(name string, data []byte) error {
	if s.readOnly {
		return fmt.Errorf("writing %s: the store is open read-only", name)
	}
	path := s.path(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return durable.Replace(path, data, 0o600)
}
