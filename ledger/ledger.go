package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/skl"
	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Options tune an open ledger. The zero value is sensible.
type Options struct {
	// MaxBatch is the most submissions committed in one transaction
	// (default 1024). MaxBatchBytes bounds their total size (default 4 MiB).
	// A batch whose transaction would still pass Badger's size limit is
	// split in two and decided again (see txnBudget).
	MaxBatch      int
	MaxBatchBytes int
	// MaxDelay is how long the sequencer waits for more submissions once a
	// batch has started (default 0: a batch is whatever arrived while the
	// previous one was committing, which already groups commits under load
	// and adds no latency when idle).
	MaxDelay time.Duration
	// QueueSize bounds submissions waiting to be sequenced (default 8192);
	// Append blocks (or fails with its context) when it is full.
	QueueSize int
	// Workers verify signatures in parallel (default: one per core).
	Workers int
	// DenialsPerMinute is each key's budget of logged DENIALs (default
	// 600, with bursts of DenialBurst, default 100). Past it, denied
	// submissions are refused with rate_limited and not logged.
	DenialsPerMinute int
	DenialBurst      int
	// Clock is the ledger's time source (default time.Now).
	Clock func() time.Time
	// Passphrase supplies the log key file's passphrase if it is encrypted.
	Passphrase func() ([]byte, error)
	// ProofCacheTiles is how many full tiles proofs keep in memory
	// (default 65536; a level-0 tile takes about 350 B, so a 16M-entry
	// tree fits in about 22 MiB).
	ProofCacheTiles int
	// BadgerLog receives Badger's warnings and errors (default: discarded
	// unless CUSTODY_BADGER_LOG is set).
	BadgerLog badger.Logger
	// ReserveBytes is the free space the ledger keeps on its filesystem
	// (default 256 MiB): a batch that would leave less is not committed and
	// fails with ErrDiskFull. See ErrDiskFull for why.
	ReserveBytes int64
	// LogOnly enables AppendLeaves, which writes raw leaves with no
	// authority checks. It exists to measure the log alone (benchmarks and
	// the side-by-side comparison with other logs); a ledger written this
	// way does not replay and must never be used for real statements.
	LogOnly bool
}

func (o *Options) defaults() {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 4 << 20
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.DenialsPerMinute <= 0 {
		o.DenialsPerMinute = 600
	}
	if o.DenialBurst <= 0 {
		o.DenialBurst = 100
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.ReserveBytes <= 0 {
		o.ReserveBytes = 256 << 20
	}
	if o.ProofCacheTiles <= 0 {
		o.ProofCacheTiles = 65536
	}
}

// config is the data folder's custody.json.
type config struct {
	Origin string `json:"origin"`
	// LogKey is the path of the log's private key, relative to the folder
	// or absolute: the key GENESIS binds, which signs DENIALs, and
	// checkpoints too unless CheckpointKeys says otherwise.
	LogKey string `json:"log_key"`
	// CheckpointKeys are the key files that sign every checkpoint, in
	// order (absent: the log key alone). A rotation adds the new key here,
	// then drops the old one (see RotateCheckpointKey).
	CheckpointKeys []string `json:"checkpoint_keys,omitempty"`
	// RetiredKeys are checkpoint keys no longer in use, each with the
	// largest tree size it signed: verifiers keep them, bounded, so old
	// checkpoints still verify.
	RetiredKeys []retiredKey `json:"retired_checkpoint_keys,omitempty"`
	Created     string       `json:"created,omitempty"`
}

type retiredKey struct {
	VerifierKey string `json:"verifier_key"`
	MaxSize     uint64 `json:"max_size"`
	// Root is the tree's root at MaxSize (standard base64): the retired
	// key vouches for that head alone (DESIGN §6). A folder retired before
	// it was recorded has none; the ledger derives it from its tree when
	// it opens.
	Root string `json:"root,omitempty"`
}

// keyring is what an open ledger signs with.
type keyring struct {
	log        ed25519.PrivateKey   // GENESIS's log key: DENIALs
	checkpoint []ed25519.PrivateKey // every checkpoint, in order
	retired    []retiredKey
}

const configName = "custody.json"

// Ledger is an open log. Its methods are safe for concurrent use.
type Ledger struct {
	dir     string
	origin  string
	opts    Options
	db      *badger.DB
	kr      keyring
	signer  note.Signer   // the first checkpoint key
	signers []note.Signer // the others, during a rotation
	keySet  *merkle.KeySet
	vkey    string // keySet, as text: what verifiers need

	prover *merkle.Prover
	keys   sync.Map // key id -> ed25519.PublicKey, for the verify workers

	seqQ    chan *request
	verifyQ chan *request
	closing chan struct{}
	closed  atomic.Bool
	wg      sync.WaitGroup
	closeMu sync.RWMutex // held for reading while enqueuing, for writing by Close

	// Owned by the sequencer goroutine.
	inflight *job   // the batch whose commit is running, if any
	next     uint64 // the index the next leaf gets (past the batch in flight)
	engine   *authority.Engine
	builder  *merkle.Builder
	limiter  *limiter
	lastAt   time.Time
	// txnBudget is the most a batch's transaction may weigh (txnSize):
	// the constant txnBudget, smaller in tests of split.
	txnBudget int

	head     atomic.Pointer[Head] // the latest committed tree head
	watchers broadcaster
	stats    stats // commit counters, see Stats
}

// Head is a committed tree head: its size and signed checkpoint.
type Head struct {
	Size       uint64
	Root       merkle.Hash
	Checkpoint []byte // C2SP signed note
}

// ErrClosed is returned by calls on a closed ledger.
var ErrClosed = errors.New("ledger: closed")

// ErrLocked is returned when another process has the data folder open.
var ErrLocked = errors.New("ledger: the data folder is in use by another process")

// Open opens the ledger in dir, which Init created.
func Open(dir string, opts Options) (*Ledger, error) {
	opts.defaults()
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	kr, err := cfg.keyring(dir, opts.Passphrase)
	if err != nil {
		return nil, err
	}
	return open(dir, cfg.Origin, kr, opts)
}

// readConfig reads the data folder's config.
func readConfig(dir string) (*config, error) {
	raw, err := os.ReadFile(filepath.Join(dir, configName))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no ledger in %s (run `custody init --dir %s --origin ORIGIN` first)", dir, dir)
		}
		return nil, fmt.Errorf("reading ledger config: %w", err)
	}
	var cfg config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("ledger config %s: %w", filepath.Join(dir, configName), err)
	}
	return &cfg, nil
}

// keyring reads the key files the config names.
func (cfg *config) keyring(dir string, passphrase func() ([]byte, error)) (keyring, error) {
	read := func(what, path string) (ed25519.PrivateKey, error) {
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		k, err := sign.ReadPrivateKeyFile(path, passphrase)
		if err != nil {
			return nil, fmt.Errorf("reading the %s: %w", what, err)
		}
		return k, nil
	}
	var kr keyring
	var err error
	if kr.log, err = read("log key", cfg.LogKey); err != nil {
		return kr, err
	}
	for _, p := range cfg.CheckpointKeys {
		if p == cfg.LogKey {
			kr.checkpoint = append(kr.checkpoint, kr.log)
			continue
		}
		k, err := read("checkpoint key", p)
		if err != nil {
			return kr, err
		}
		kr.checkpoint = append(kr.checkpoint, k)
	}
	if len(kr.checkpoint) == 0 {
		kr.checkpoint = []ed25519.PrivateKey{kr.log}
	}
	kr.retired = cfg.RetiredKeys
	return kr, nil
}

func open(dir, origin string, kr keyring, opts Options) (*Ledger, error) {
	opts.defaults()
	db, err := badger.Open(badgerOptions(filepath.Join(dir, "db"), opts))
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (%v)", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("opening Badger in %s: %w", dir, err)
	}
	l := &Ledger{dir: dir, origin: origin, opts: opts, db: db, kr: kr,
		seqQ: make(chan *request, opts.QueueSize), verifyQ: make(chan *request, opts.QueueSize),
		closing: make(chan struct{}), limiter: newLimiter(opts.DenialsPerMinute, opts.DenialBurst), txnBudget: txnBudget}
	if err := l.load(); err != nil {
		db.Close()
		return nil, err
	}
	for i := 0; i < opts.Workers; i++ {
		l.wg.Add(1)
		go l.worker()
	}
	l.wg.Add(1)
	go l.sequencer()
	return l, nil
}

// load reads the tree head and prepares the builder, engine and prover.
// Its cost does not depend on the log's size.
func (l *Ledger) load() error {
	if err := l.loadKeys(); err != nil {
		return err
	}
	var err error
	var edgeBytes, cp, origin []byte
	err = l.db.View(func(txn *badger.Txn) error {
		var err error
		if edgeBytes, err = getValue(txn, kEdge); err != nil {
			return err
		}
		if cp, err = getValue(txn, kCheckpoint); err != nil {
			return err
		}
		origin, err = getValue(txn, kOrigin)
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the tree head: %w", err)
	}
	if origin != nil && string(origin) != l.origin {
		return fmt.Errorf("the database holds log %q, but the config names %q", origin, l.origin)
	}
	edge := merkle.NewEdge()
	if edgeBytes != nil {
		if edge, err = merkle.ParseEdge(edgeBytes); err != nil {
			return fmt.Errorf("stored tree edge: %w", err)
		}
	}
	tiles := l.tileReader()
	if l.builder, err = merkle.NewBuilder(edge, tiles); err != nil {
		return fmt.Errorf("stored tiles: %w", err)
	}
	l.prover = merkle.NewProver(tiles, l.opts.ProofCacheTiles)
	if err := l.pinRetired(); err != nil {
		return err
	}
	l.engine = authority.New(badgerStore{l.db})
	h := &Head{Size: edge.Size(), Root: edge.Root(), Checkpoint: cp}
	if cp != nil {
		c, err := l.keySet.Open(cp)
		if err != nil {
			return fmt.Errorf("stored checkpoint: %w", err)
		}
		if c.Size != h.Size || c.Root != h.Root {
			return fmt.Errorf("stored checkpoint (size %d) does not match the stored tree (size %d)", c.Size, h.Size)
		}
		// After a change of checkpoint keys, the head is signed again by
		// the keys now in use (the same size and root: nothing a reader
		// saw before is contradicted). Ed25519 is deterministic, so an
		// unchanged key list gives the same bytes and writes nothing.
		if h.Checkpoint, err = l.resign(h.Size, h.Root, cp); err != nil {
			return err
		}
	}
	l.head.Store(h)
	l.next = h.Size
	if m := l.engine.Meta(); m != nil && m.LastLoggedAt != "" {
		l.lastAt, _ = statement.ParseLoggedAt(m.LastLoggedAt)
	}
	return nil
}

// Close stops accepting submissions, finishes those already queued,
// and closes the database.
func (l *Ledger) Close() error {
	l.closeMu.Lock()
	if l.closed.Swap(true) {
		l.closeMu.Unlock()
		return nil
	}
	close(l.closing)
	l.closeMu.Unlock()
	l.wg.Wait()
	return l.db.Close()
}

// Origin is the log's origin (its checkpoint key name).
func (l *Ledger) Origin() string { return l.origin }

// Dir is the data folder.
func (l *Ledger) Dir() string { return l.dir }

// VerifierKey is the signed-note verifier key of the log's checkpoints.
func (l *Ledger) VerifierKey() string { return l.vkey }

// Head returns the latest committed tree head.
func (l *Ledger) Head() Head { return *l.head.Load() }

// memTableSize is Badger's memtable size.
const memTableSize = 12 << 20

// valueThreshold is the value size from which Badger keeps a value in the
// value log, with only a pointer in the LSM tree.
const valueThreshold = 1 << 10

// txnBudget is the most a batch's transaction may weigh by Badger's own
// reckoning (see txnSize): 90% of its limit, 15% of a memtable.
const txnBudget = memTableSize * 15 / 100 * 9 / 10

// txnSize is what writes weigh against Badger's transaction limits, in
// its own reckoning: per write, the key, the value (or a 12-byte pointer
// for a value in the value log), two bytes of metadata and ten of
// version; and, against the limit on entries, MaxNodeSize bytes each.
func txnSize(writes [][2][]byte) (bytes, entries int) {
	for _, w := range writes {
		v := len(w[1])
		if v >= valueThreshold {
			v = 12
		}
		bytes += len(w[0]) + v + 2 + 10
	}
	return bytes, len(writes) * skl.MaxNodeSize
}

func badgerOptions(path string, o Options) badger.Options {
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
		// most 15% of a memtable (1.8 MiB); see txnBudget.
		WithMemTableSize(memTableSize).
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
		WithValueLogFileSize(256 << 20)
	switch {
	case o.BadgerLog != nil:
		bo.Logger = o.BadgerLog
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

// badgerStore serves the authority engine's records from committed state.
type badgerStore struct{ db *badger.DB }

func (s badgerStore) Load(key string) ([]byte, error) {
	var v []byte
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		v, err = getValue(txn, stateKey(key))
		return err
	})
	return v, err
}

// tileReader reads committed hash tiles (badgerTiles, in read.go: whole
// tiles, or the part of one a proof needs).
func (l *Ledger) tileReader() merkle.TileReader {
	return badgerTiles{l.db}
}
