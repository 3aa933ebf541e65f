package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
)

// Options tune an open ledger. The zero value is sensible.
type Options struct {
	// Logger receives the lease events (took, renewed late, lost,
	// stepped down, fenced commit), one line each (default slog.Default()).
	Logger *slog.Logger
	// MaxBatch is the most submissions committed in one transaction
	// (default 1024). MaxBatchBytes bounds their total size (default 4 MiB).
	// A batch whose transaction would still pass the store's size limit
	// is split in two and decided again (see txnBudget).
	MaxBatch      int
	MaxBatchBytes int
	// MaxDelay is how long the sequencer waits for more submissions once a
	// batch has started (default 0: a batch is whatever arrived while the
	// previous one was committing, and whatever arrives while it waits for
	// that one to be stored, which already groups commits under load and
	// adds no latency when idle).
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
	// ProofCacheTiles is how many tiles proofs keep in memory besides the
	// level-0 summaries (ProofSummaryTiles), evicting the least recently
	// used (default 65536; a tile of a higher level takes 16 KiB, and there
	// is one per 65,536 entries; a level-0 tile past ProofSummaryTiles
	// about 350 B).
	ProofCacheTiles int
	// ProofSummaryTiles is how many level-0 tiles' summaries (128 B
	// each: the tile's nodes at tree level 6) proofs keep in flat arrays,
	// never evicted, from tile 0 on (default 131072: the first 33.5M
	// entries, at most 16.5 MiB; 5 MiB at 10M entries). A proof of a leaf in
	// one of them costs the same whatever the log's size; the level-0
	// tiles after them go to the tile cache (ProofCacheTiles).
	ProofSummaryTiles int
	// StoreOptions are the store driver's own options
	// (badgerstore.Options: the free-space reserve, the ballast, Badger's
	// log; pgstore.Options: the pool), given to the driver as they are;
	// nil for its defaults (storage.OpenOptions.Driver).
	StoreOptions any
	// LogOnly enables AppendLeaves, which writes raw leaves with no
	// authority checks. It exists to measure the log alone (benchmarks and
	// the side-by-side comparison with other logs); a ledger written this
	// way does not replay and must never be used for real statements.
	LogOnly bool
	// Advertise is the URL other servers send appends to while this one
	// sequences a shared store (PostgreSQL); LeaseTTL is how long the
	// sequencer lease lasts without renewal (default 3 s), which bounds
	// how long a dead leader's log takes appends nowhere.
	Advertise string
	LeaseTTL  time.Duration
	// LeaseWait, when set, is how long the sequencer lease must have been
	// seen free (expired or released) before this server takes it; it is
	// asked again at each try, so the answer may change (a server serving
	// several logs waits longer the more of them it already sequences,
	// which spreads their leaderships over the servers). Nil: at once.
	LeaseWait func() time.Duration
	// Prefer says this server prefers to sequence the log (custody serve
	// --prefer), on a store that can tell the others (storage.Preferrer).
	// Among servers given LeaseWait, a leader that does not prefer the log
	// hands its lease over to a live server that does (once in
	// handOffQuiet), and a follower that does not prefer it leaves a free
	// lease to such a server for two lease times.
	Prefer bool
	// HeadPoll is how often a server that does not sequence reads the
	// head from the store (default 200 ms). On PostgreSQL it also learns
	// of each commit at once (LISTEN/NOTIFY); the poll is the fallback
	// while that connection is down.
	HeadPoll time.Duration
	// ReadOnly opens the ledger for reading only and never writes to its
	// store: a data folder is read through a scratch copy (see
	// storage/badgerstore/scratch.go), so nothing in it changes. Appends
	// fail with ErrReadOnly. A store that fails the open checks still
	// opens, so that it can be inspected; Damage says what is wrong.
	ReadOnly bool
	// HeadFile is where the last checkpoint the log signed is kept,
	// outside the store (signedhead.go): default D/signed-head for a data
	// folder, and for a database a file under the user's configuration
	// folder named for the database (custody/signed-heads/<hash>).
	HeadFile string
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
	if o.ProofCacheTiles <= 0 {
		o.ProofCacheTiles = 65536
	}
	if o.ProofSummaryTiles <= 0 {
		o.ProofSummaryTiles = 1 << 17
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.HeadPoll <= 0 {
		o.HeadPoll = 200 * time.Millisecond
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
	// DenialKeys are the key files that sign DENIALs after the log key,
	// in the order they were added (denialkey.go): the one the trust chain
	// names signs; the others stay listed for good.
	DenialKeys []string `json:"denial_keys,omitempty"`
	Created    string   `json:"created,omitempty"`
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

const configName = "custody.json"

// Ledger is an open log. Its methods are safe for concurrent use.
//
// A Ledger is a facade: it opens and closes the log, and its methods
// delegate to its parts (the package documentation's # Parts), each a
// type in its own file that owns its fields and states its locking rule.
type Ledger struct {
	loc    string // the data folder, or the store's URL without password
	origin string
	opts   Options
	store  storage.Store
	caps   storage.Capabilities // what the store declares (store.Capabilities)
	// damage is what the open checks of a ReadOnly ledger found wrong.
	damage error
	// closing is closed by Close (at once, for a ReadOnly ledger); wg
	// counts the goroutines that stop then: the lease loop, the workers
	// and the sequencer.
	closing chan struct{}
	wg      sync.WaitGroup

	// The parts, each in its own file, with its own locking rule.
	seq   sequencer   // the append pipeline (pipeline.go)
	read  reader      // every read of the committed log (readers.go)
	keys  signingKeys // what the log signs with (keys.go)
	lead  leadership  // the sequencer lease of a shared store (lease.go)
	heads heads       // the published head and its watchers (watch.go)
	stats stats       // commit counters, see Stats (stats.go)
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
var ErrLocked = storage.ErrLocked

// ErrReadOnly is returned by appends to a ledger opened with
// Options.ReadOnly.
var ErrReadOnly = errors.New("ledger: opened read-only")

// ErrDiskFull is returned (wrapped) when a batch is not committed because
// the data folder's filesystem is nearly full; see storage.ErrDiskFull.
var ErrDiskFull = storage.ErrDiskFull

// IsStoreURL reports whether loc names a database (a URL: postgres://…) rather
// than a data folder.
func IsStoreURL(loc string) bool { return storage.IsURL(loc) }

// openStore opens the store at loc with the driver registered for it
// (storage.Register: a data folder, a PostgreSQL URL, ...).
func openStore(loc string, opts Options, create bool, origin string) (storage.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return storage.Open(ctx, loc, storage.OpenOptions{Create: create, Origin: origin, ReadOnly: opts.ReadOnly, Driver: opts.StoreOptions})
}

// Open opens the ledger at loc, which Init created: a data folder, or a
// URL of a store driver linked into the program (postgres://).
func Open(loc string, opts Options) (*Ledger, error) {
	opts.defaults()
	drv, err := storage.Lookup(loc)
	if err != nil {
		return nil, err
	}
	exists := drv.Exists == nil || drv.Exists(loc)
	if drv.Local && !exists {
		if _, err := os.Stat(filepath.Join(loc, SignedHeadName)); err != nil {
			return nil, fmt.Errorf("no ledger in %s (run `custody init --dir %s --origin ORIGIN` first)", loc, loc)
		}
		return nil, &DamageError{Dir: loc, Err: ErrRolledBack,
			What: fmt.Sprintf("%s holds the log's signed head but no database (%s is missing)", loc, filepath.Join(loc, "db"))}
	}
	if !opts.ReadOnly && drv.CheckCopyFirst && exists {
		// Check a read-only copy first: a store whose open may "repair"
		// what it holds (Badger) must not open a folder that does not
		// hold what the log last signed.
		ro := opts
		ro.ReadOnly = true
		l, err := Open(loc, ro)
		switch {
		case err != nil && !isNoSpace(err):
			return nil, err
		case err == nil:
			damage := l.damage
			l.Close()
			if damage != nil {
				return nil, damage
			}
		}
		// No room for a scratch copy: the same checks run on the folder
		// itself below; only the evidence of what Badger cuts at open may
		// then be lost.
	}
	st, err := openStore(loc, opts, false, "")
	if err != nil {
		var oe *storage.OpenError
		if errors.As(err, &oe) && !isNoSpace(err) && fileExists(filepath.Join(loc, SignedHeadName)) {
			return nil, &DamageError{Dir: loc, Err: ErrDamaged, What: fmt.Sprintf("the store cannot be opened: %v", oe.Err), Files: oe.Files}
		}
		return nil, err
	}
	l, err := OpenStore(st, opts)
	if err != nil {
		st.Close()
		return nil, err
	}
	return l, nil
}

// OpenStore opens the ledger a store holds; the ledger owns the store
// from then on, and closes it with itself (not on an error).
func OpenStore(st storage.Store, opts Options) (*Ledger, error) {
	opts.defaults()
	cfg, err := readConfig(st)
	if err != nil {
		return nil, err
	}
	kr, err := cfg.keyring(st, opts.Passphrase)
	if err != nil {
		return nil, err
	}
	return open(st, cfg.Origin, kr, opts)
}

// readConfig reads the log's config.
func readConfig(st configFiles) (*config, error) {
	raw, err := st.ReadFile(configName)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			loc := st.Location()
			if storage.IsURL(loc) {
				return nil, fmt.Errorf("no ledger in %s (run `custody init --store %s --origin ORIGIN` first)", loc, loc)
			}
			return nil, fmt.Errorf("no ledger in %s (run `custody init --dir %s --origin ORIGIN` first)", loc, loc)
		}
		return nil, fmt.Errorf("reading ledger config: %w", err)
	}
	var cfg config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("ledger config %s in %s: %w", configName, st.Location(), err)
	}
	return &cfg, nil
}

func open(st storage.Store, origin string, kr keyring, opts Options) (*Ledger, error) {
	opts.defaults()
	l := &Ledger{loc: st.Location(), origin: origin, opts: opts, store: st, caps: st.Capabilities(),
		keys: signingKeys{origin: origin, kr: kr}, closing: make(chan struct{})}
	l.read = reader{origin: origin, store: st, heads: &l.heads}
	l.seq = sequencer{loc: l.loc, origin: origin, opts: &l.opts, store: st, caps: l.caps,
		keys: &l.keys, read: &l.read, heads: &l.heads, lead: &l.lead, stats: &l.stats, closing: l.closing, wg: &l.wg,
		seqQ: make(chan *request, opts.QueueSize), verifyQ: make(chan *request, opts.QueueSize),
		limiter: newLimiter(opts.DenialsPerMinute, opts.DenialBurst), txnBudget: st.Budget()}
	if ls := l.caps.Lease; ls != nil && !opts.ReadOnly {
		l.lead = newLeadership(ls, origin, &l.opts, l.caps)
		if p := l.caps.Prefer; p != nil && opts.Prefer {
			p.Prefer(context.Background()) // until the store closes
		}
		ctx, cancel := context.WithTimeout(context.Background(), opts.LeaseTTL)
		err := l.lead.tryLead(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		l.lead.seqEpoch = l.lead.epoch.Load()
	}
	err := l.load()
	if d := l.caps.Damaged; d != nil && err == nil && len(d()) > 0 {
		err = &DamageError{Dir: l.loc, Err: ErrDamaged, What: "files of the store are damaged (a read-write open would drop committed transactions or read damaged table blocks as missing)"}
	}
	var de *DamageError
	if errors.As(err, &de) {
		if d := l.caps.Diagnose; d != nil {
			de.Files = append(de.Files, d()...)
		}
	}
	if opts.ReadOnly && de != nil && l.heads.load() != nil {
		// Damage found after the head was read: the ledger opens for
		// inspection, with the damage reported. Damage that kept the
		// head from being read leaves nothing to inspect: an error.
		l.damage, err = err, nil
	}
	if err != nil {
		if l.lead.leaser != nil {
			l.lead.leaser.Release(context.Background())
		}
		l.seq.hf.close()
		return nil, err
	}
	if opts.ReadOnly {
		close(l.closing)
		return l, nil
	}
	if l.lead.leaser != nil {
		l.wg.Add(1)
		go l.leaseLoop()
	}
	for i := 0; i < opts.Workers; i++ {
		l.wg.Add(1)
		go l.seq.worker()
	}
	l.wg.Add(1)
	go l.seq.run()
	return l, nil
}

// load reads the tree head and prepares the builder, engine and prover.
// Its cost does not depend on the log's size.
func (l *Ledger) load() error {
	if err := l.keys.load(); err != nil {
		return err
	}
	l.read.prover = merkle.NewSummaryProver(storeTiles{l.store}, l.opts.ProofCacheTiles, l.opts.ProofSummaryTiles)
	if err := authority.CheckStateVersion(recordStore{l.store}); err != nil {
		return fmt.Errorf("the ledger's store: %w", err)
	}
	l.seq.engine = l.seq.newEngine()
	if err := l.seq.loadHead(l.lead.leaser == nil || l.lead.epoch.Load() != 0); err != nil {
		return err
	}
	return l.seq.checkDenialKey()
}

// loadHead reads the committed head and prepares the builder (and, if
// resign, signs the head again with the current checkpoint keys).
func (l *sequencer) loadHead(resign bool) error {
	damaged := func(what string, cause error) error {
		return &DamageError{Dir: l.loc, What: what, Err: cause}
	}
	l.wfx.discard() // the workflow index of batches decided on older state
	sh, err := l.store.Head(context.Background())
	if err != nil {
		if errors.Is(err, storage.ErrUnavailable) {
			return fmt.Errorf("reading the tree head: %w", err)
		}
		return damaged(fmt.Sprintf("reading the tree head: %v", err), ErrDamaged)
	}
	var cp []byte
	edge := merkle.NewEdge()
	if sh != nil {
		if sh.Origin != "" && sh.Origin != l.origin {
			return fmt.Errorf("the database holds log %q, but the config names %q", sh.Origin, l.origin)
		}
		if edge, err = merkle.ParseEdge(sh.Edge); err != nil {
			return damaged(fmt.Sprintf("the stored tree edge: %v", err), ErrDamaged)
		}
		cp = sh.Checkpoint
	}
	tiles := storeTiles{l.store}
	if l.builder, err = merkle.NewBuilderSummaries(edge, tiles); err != nil {
		return damaged(fmt.Sprintf("the stored tiles of the tree's right edge: %v", err), ErrDamaged)
	}
	if err := l.keys.pinRetired(l.builder.Size(), l.read.prover.RootAt); err != nil {
		return err
	}
	h := &Head{Size: edge.Size(), Root: edge.Root(), Checkpoint: cp}
	// The store against the last checkpoint the log signed, and its right
	// edge against its own head: refuse before anything is signed or
	// written (a read-only open records the damage and goes on).
	slot, err := l.checkSignedHead(h)
	if err != nil {
		return err
	}
	if err := l.verifyTail(h); err != nil {
		return damaged(err.Error(), ErrDamaged)
	}
	if cp == nil && h.Size > 0 {
		return damaged(fmt.Sprintf("the store holds %d entries but no checkpoint", h.Size), ErrDamaged)
	}
	if !l.opts.ReadOnly && l.hf == nil {
		if l.hf, err = openHeadFile(l.headPath(), slot); err != nil {
			return err
		}
	}
	if cp != nil {
		c, err := l.keys.set.Open(cp)
		if err != nil {
			return fmt.Errorf("stored checkpoint: %w", err)
		}
		if c.Size != h.Size || c.Root != h.Root {
			return damaged(fmt.Sprintf("the stored checkpoint (size %d) does not match the stored tree (size %d)", c.Size, h.Size), ErrDamaged)
		}
		// After a change of checkpoint keys, the head is signed again by
		// the keys now in use (the same size and root: nothing a reader
		// saw before is contradicted). Ed25519 is deterministic, so an
		// unchanged key list gives the same bytes and writes nothing.
		if resign && !l.opts.ReadOnly {
			if h.Checkpoint, err = l.keys.resign(l.store, h.Size, h.Root, cp); err != nil {
				return err
			}
		}
		// Only a server that signs writes the file: a follower of a
		// shared store has signed nothing.
		if l.hf != nil && resign {
			if err := l.hf.write(h.Checkpoint); err != nil {
				return err
			}
		}
	}
	l.heads.set(h)
	l.next = h.Size
	if m := l.engine.Meta(); m != nil && m.LastLoggedAt != "" {
		l.lastAt, _ = statement.ParseLoggedAt(m.LastLoggedAt)
	}
	return nil
}

// Close stops accepting submissions, finishes those already queued,
// and closes the database.
func (l *Ledger) Close() error {
	if !l.seq.stop() {
		return nil
	}
	l.wg.Wait()
	err := l.store.Close()
	if e := l.seq.hf.close(); err == nil {
		err = e
	}
	return err
}

// Damage is what the open checks found wrong with the store of a ledger
// opened with Options.ReadOnly (a *DamageError), or nil.
func (l *Ledger) Damage() error { return l.damage }

// Origin is the log's origin (its checkpoint key name).
func (l *Ledger) Origin() string { return l.origin }

// Dir is the data folder, or the store's URL without its password.
func (l *Ledger) Dir() string { return l.loc }

// Store is the ledger's store.
func (l *Ledger) Store() storage.Store { return l.store }

// VerifierKey is the signed-note verifier key of the log's checkpoints.
func (l *Ledger) VerifierKey() string { return l.keys.vkey }

// Head returns the latest committed tree head.
func (l *Ledger) Head() Head { return *l.heads.load() }

// newEngine returns the decision engine over the store's state records,
// told which keys the log signs with but does not bind (the checkpoint
// keys): what they sign is never a submission (DESIGN §1).
func (l *sequencer) newEngine() *authority.Engine {
	e := authority.New(recordStore{l.store})
	for id := range l.keys.own {
		e.RefuseKeys(id)
	}
	return e
}

// recordStore serves the authority engine's records from committed state.
type recordStore struct{ st storage.Store }

func (s recordStore) Load(key string) ([]byte, error) {
	return s.st.Record(context.Background(), key)
}

// openAt opens the store at loc and a ledger on it with the given keys,
// for Init-less ledgers (benchmarks of the log alone).
func openAt(loc, origin string, kr keyring, opts Options) (*Ledger, error) {
	opts.defaults()
	st, err := openStore(loc, opts, false, "")
	if err != nil {
		return nil, err
	}
	l, err := open(st, origin, kr, opts)
	if err != nil {
		st.Close()
		return nil, err
	}
	return l, nil
}
