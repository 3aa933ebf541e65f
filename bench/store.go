package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/storage/pgstore"
)

// StoreResult is the figures of a run on another store (PostgreSQL)
// beside the embedded Badger figures of the same run.
type StoreResult struct {
	Location string        `json:"location"` // without password
	Auth     *AppendResult `json:"authorized_appends,omitempty"`
	HTTP     *AppendResult `json:"http_appends,omitempty"`
	// LogOnly is the log-only phase (raw leaves, no authority) on this
	// store: the figure to set beside Tessera's drivers.
	LogOnly *AppendResult `json:"log_only_appends,omitempty"`
	// Server is what the PostgreSQL server did in each phase, per append
	// (keys: auth, http, logonly).
	Server map[string]*PGServer `json:"server,omitempty"`
	// ProofsPerSec is inclusion proofs/s on the authorised-append log
	// (ProofSize entries), on this store and on Badger's log of the same
	// run (BadgerProofsPerSec), from ProofGoroutines goroutines.
	ProofSize          uint64  `json:"proof_log_size,omitempty"`
	ProofsPerSec       float64 `json:"proofs_per_sec,omitempty"`
	ProofCPUUs         float64 `json:"proof_cpu_us,omitempty"`
	BadgerProofsPerSec float64 `json:"badger_proofs_per_sec,omitempty"`
	BadgerProofCPUUs   float64 `json:"badger_proof_cpu_us,omitempty"`
	ProofGoroutines    int     `json:"proof_goroutines,omitempty"`
	// Big, GrowthBase and Growth are the big phase's figures on this
	// store (see Report.Big, Report.Growth): logs of Config.Size and
	// Config.GrowthFrom entries, each built in a schema of its own and
	// measured in this process.
	BigBuild    *BuildResult `json:"big_log_build,omitempty"`
	Big         *BigResult   `json:"big_log,omitempty"`
	GrowthBuild *BuildResult `json:"growth_base_build,omitempty"`
	GrowthBase  *BigResult   `json:"growth_base,omitempty"`
	Growth      *Growth      `json:"growth,omitempty"`
	GrowthAgain []*Growth    `json:"growth_again,omitempty"` // Config.GrowthRounds after the first
	Errors      []string     `json:"errors,omitempty"`
}

// pgSchema makes a new schema in the database at base for one log and
// returns its URL and a function that drops it.
func pgSchema(ctx context.Context, base string) (string, func(), error) {
	var r [6]byte
	rand.Read(r[:])
	schema := "custody_bench_" + hex.EncodeToString(r[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connecting to %s: %w", pgstore.Redact(base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop := func() {
		ctx := context.Background()
		if c, err := pgx.Connect(ctx, base); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

// proofsAt measures inclusion proofs/s at the head of the log at loc,
// from random leaves, for d.
func proofsAt(ctx context.Context, loc string, d time.Duration) (uint64, float64, float64, error) {
	l, err := ledger.Open(loc, ledger.Options{})
	if err != nil {
		return 0, 0, 0, err
	}
	defer l.Close()
	size := l.Head().Size
	if size == 0 {
		return 0, 0, 0, fmt.Errorf("%s is empty", loc)
	}
	p, err := parallel(ctx, proofGoroutines(), d, func(g int, x *uint64) error {
		*x ^= *x << 13
		*x ^= *x >> 7
		*x ^= *x << 17
		_, err := l.InclusionProof(*x%size, size)
		return err
	})
	return size, p.rate, p.cpuUs, err
}

// proofGoroutines is how many goroutines ask for proofs: enough to keep a
// database's round trips overlapped.
func proofGoroutines() int { return 8 * runtime.GOMAXPROCS(0) }

// runStore runs, of the authorised, HTTP and log-only phases among
// cfg.Phases, each on the store at cfg.Store (a new schema each), with
// the server's counters around each; badgerAuth is the Badger log of the
// same run's authorised phase ("" if none), measured for proofs beside
// it.
func runStore(ctx context.Context, cfg Config, badgerAuth string, say func(string, ...any)) *StoreResult {
	r := &StoreResult{Location: pgstore.Redact(cfg.Store), ProofGoroutines: proofGoroutines(), Server: map[string]*PGServer{}}
	fail := func(what string, err error) {
		r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", what, err))
		say("postgres %s failed: %v", what, err)
	}
	has := func(p string) bool { return slices.Contains(cfg.Phases, p) }
	// phase runs f on a new schema, with the server's counters read
	// before and after.
	phase := func(name string, f func(loc string) (*AppendResult, error), then func(loc string)) {
		loc, drop, err := pgSchema(ctx, cfg.Store)
		if err != nil {
			fail("setup", err)
			return
		}
		defer drop()
		before, err := readPG(ctx, cfg.Store)
		if err != nil {
			say("postgres: no server counters: %v", err)
		}
		res, err := f(loc)
		if err != nil {
			fail(name, err)
			return
		}
		// The phase's backends flush their statistics as they exit.
		time.Sleep(500 * time.Millisecond)
		if after, err2 := readPG(ctx, cfg.Store); err == nil && err2 == nil {
			r.Server[name] = pgDelta(before, after, res.Submissions, res.Seconds)
		}
		if then != nil {
			then(loc)
		}
	}
	if has(PhaseAuth) {
		phase(PhaseAuth, func(loc string) (*AppendResult, error) {
			say("PostgreSQL: %d authorised submissions in process (%s)", cfg.AuthN, r.Location)
			res, _, err := AuthorizedAppends(ctx, loc, cfg.AuthN, cfg.AuthWindow, 0)
			if err != nil {
				return nil, err
			}
			r.Auth = &res
			say("  PostgreSQL authorised: %.0f/s", res.PerSec)
			return &res, nil
		}, func(loc string) {
			say("PostgreSQL: inclusion proofs for %s", cfg.ReadFor)
			var err error
			if r.ProofSize, r.ProofsPerSec, r.ProofCPUUs, err = proofsAt(ctx, loc, cfg.ReadFor); err != nil {
				fail("proofs", err)
			}
			if badgerAuth != "" {
				if _, r.BadgerProofsPerSec, r.BadgerProofCPUUs, err = proofsAt(ctx, badgerAuth, cfg.ReadFor); err != nil {
					fail("Badger proofs", err)
				}
			}
		})
	}
	if has(PhaseHTTP) {
		phase(PhaseHTTP, func(loc string) (*AppendResult, error) {
			say("PostgreSQL over HTTP: %d submissions from %d clients", cfg.HTTPN, cfg.HTTPClients)
			h, err := HTTPAppends(ctx, loc, cfg.HTTPN, cfg.HTTPClients)
			if err != nil {
				return nil, err
			}
			r.HTTP = &h
			say("  PostgreSQL over HTTP: %.0f/s", h.PerSec)
			return &h, nil
		}, nil)
	}
	if has(PhaseLogOnly) {
		phase(PhaseLogOnly, func(loc string) (*AppendResult, error) {
			say("PostgreSQL log-only: %d leaves of %d bytes from %d clients", cfg.LogOnlyN, LeafBytes, cfg.Inflight)
			l, err := LogOnlyAppends(ctx, loc, cfg.LogOnlyN, cfg.Inflight)
			if err != nil {
				return nil, err
			}
			r.LogOnly = &l
			say("  PostgreSQL log-only: %.0f/s", l.PerSec)
			return &l, nil
		}, nil)
	}
	if has(PhaseBig) {
		// big builds and measures a log; its schema is dropped when the
		// phase ends (the smaller one is measured again beside the larger).
		var drops []func()
		defer func() {
			for _, d := range drops {
				d()
			}
		}()
		big := func(size int) (string, *BuildResult, *BigResult, error) {
			loc, drop, err := pgSchema(ctx, cfg.Store)
			if err != nil {
				return "", nil, nil, err
			}
			drops = append(drops, drop)
			say("PostgreSQL: building a %d-entry log", size)
			b, err := BuildBigLog(ctx, loc, size, cfg.Progress)
			if err != nil {
				return loc, nil, nil, err
			}
			say("PostgreSQL: measuring open, proofs, bundles and verification at %d entries (%s each)", size, cfg.ReadFor)
			m, err := MeasureBigStore(ctx, loc, b, cfg.ReadFor, ledger.Options{ProofCacheTiles: cfg.ProofCacheTiles})
			if err != nil {
				return loc, &b, nil, err
			}
			return loc, &b, &m, nil
		}
		var small string
		if cfg.GrowthFrom > 0 && cfg.GrowthFrom < cfg.Size {
			loc, b, m, err := big(cfg.GrowthFrom)
			if err != nil {
				fail("big log", err)
			}
			small, r.GrowthBuild, r.GrowthBase = loc, b, m
		}
		large, b, m, err := big(cfg.Size)
		if err != nil {
			fail("big log", err)
		}
		r.BigBuild, r.Big = b, m
		if r.GrowthBase != nil && r.Big != nil {
			r.Growth = newGrowth(r.GrowthBase, r.Big)
			say("PostgreSQL: measuring proofs and bundles at %d and %d entries in turn (%d slices of %s each)", r.GrowthBase.Size, r.Big.Size, PairSlices, cfg.ReadFor/PairSlices)
			g, again, err := growthRounds(cfg.GrowthRounds, "PostgreSQL: ", say, func() ([2]BigResult, error) {
				return MeasurePair(ctx, small, large, [2]*BuildResult{r.GrowthBuild, r.BigBuild}, cfg.ReadFor, ledger.Options{ProofCacheTiles: cfg.ProofCacheTiles})
			})
			if g != nil {
				r.Growth = g
			}
			r.GrowthAgain = again
			if err != nil {
				fail("growth", err)
			}
		}
	}
	return r
}
