package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/custodylog/custody/ledger"
)

// Phases of a suite run, in the order they run.
const (
	PhaseCeiling = "ceiling"
	PhaseAuth    = "auth"
	PhaseHTTP    = "http"
	PhaseLogOnly = "logonly"
	PhaseBig     = "big"
	PhasePeer    = "peer"
)

// AllPhases lists every phase.
var AllPhases = []string{PhaseCeiling, PhaseAuth, PhaseHTTP, PhaseLogOnly, PhaseBig, PhasePeer}

// Config is one suite run. Zero fields take the defaults of DefaultConfig.
type Config struct {
	// Dir is where the run's temporary folder is made (default: the
	// system's temp dir). Put it on the disk you mean to measure.
	Dir string
	// Keep leaves the run's folder in place (it is printed).
	Keep bool
	// Phases to run (default all but the peer; PhasePeer runs when Peer is
	// set).
	Phases []string
	// Ceiling is how long the verify ceiling is measured.
	Ceiling time.Duration
	// AuthN authorised submissions, each of the 2×Chains agents keeping
	// AuthWindow in flight.
	AuthN      int
	AuthWindow int
	// LogOnlyN raw leaves from Inflight clients, for custody log-only and
	// for the peer alike.
	LogOnlyN int
	Inflight int
	// HTTPN authorised submissions over HTTP from HTTPClients clients.
	HTTPN       int
	HTTPClients int
	// Size is the big log's size; ReadFor how long each read figure runs.
	Size    int
	ReadFor time.Duration
	// BigDir, when set, is where the big log is kept between runs: a log
	// of Size entries that an earlier run built there is measured again
	// without rebuilding; anything else there is replaced by a new build,
	// which is kept. Default: $CUSTODY_BENCH_BIGLOG, else a fresh log in
	// the run's temporary folder, removed afterwards. A reused log has had
	// its background compaction finish, which a freshly built one has not.
	BigDir string
	// GrowthFrom, when above 0 and below Size, is the size of a second big
	// log, measured first in the same run, so that the report shows how
	// proofs and bundles grow from GrowthFrom to Size entries (Report.Growth).
	// Its log is kept beside BigDir (BigDir-GrowthFrom) when BigDir is set.
	// Default 1,000,000; below 0, none.
	GrowthFrom int
	// GrowthRounds is how many times the growth is measured on the same
	// two logs, each time both in turn (default 1; Report.GrowthAgain
	// holds the rounds after the first): building a 10M log takes
	// minutes, measuring it again seconds.
	GrowthRounds int
	// Peer is "" or "tessera"; PeerDir its module folder (default: found
	// from the working directory, see FindPeerDir).
	Peer    string
	PeerDir string
	// MeasureBig measures the big log in dir (default MeasureBigLog in this
	// process; custody bench runs it in a child process to isolate RSS).
	MeasureBig func(ctx context.Context, dir string, d time.Duration) (BigResult, error)
	// MeasurePair measures proofs and bundles on the two big logs in small
	// and large in turn, for the growth figures (default MeasurePair in
	// this process; custody bench runs it in a child process).
	MeasurePair func(ctx context.Context, small, large string, d time.Duration) ([2]BigResult, error)
	// ProofCacheTiles is ledger.Options.ProofCacheTiles for the big log's
	// measurement (0: the ledger's default).
	ProofCacheTiles int
	// Progress receives a line per step (nil: none).
	Progress io.Writer
	// Store, when set, is a PostgreSQL URL: the authorised, HTTP and proof
	// figures are measured on it too (each log in a schema of its own,
	// dropped afterwards), beside Badger's.
	Store string
}

// DefaultConfig finishes in a few minutes on 2 cores.
func DefaultConfig() Config {
	return Config{Ceiling: 2 * time.Second, AuthN: 40_000, AuthWindow: 256, LogOnlyN: 100_000, Inflight: 4096,
		HTTPN: 20_000, HTTPClients: 64, Size: 1_000_000, GrowthFrom: 1_000_000, ReadFor: 3 * time.Second}
}

func (c *Config) defaults() {
	d := DefaultConfig()
	if c.Ceiling <= 0 {
		c.Ceiling = d.Ceiling
	}
	if c.AuthN <= 0 {
		c.AuthN = d.AuthN
	}
	if c.AuthWindow <= 0 {
		c.AuthWindow = d.AuthWindow
	}
	if c.LogOnlyN <= 0 {
		c.LogOnlyN = d.LogOnlyN
	}
	if c.Inflight <= 0 {
		c.Inflight = d.Inflight
	}
	if c.HTTPN <= 0 {
		c.HTTPN = d.HTTPN
	}
	if c.HTTPClients <= 0 {
		c.HTTPClients = d.HTTPClients
	}
	if c.Size <= 0 {
		c.Size = d.Size
	}
	if c.ReadFor <= 0 {
		c.ReadFor = d.ReadFor
	}
	if c.GrowthFrom == 0 {
		c.GrowthFrom = d.GrowthFrom
	}
	if c.BigDir == "" {
		c.BigDir = os.Getenv("CUSTODY_BENCH_BIGLOG")
	}
	if len(c.Phases) == 0 {
		c.Phases = []string{PhaseCeiling, PhaseAuth, PhaseHTTP, PhaseLogOnly, PhaseBig}
		if c.Peer != "" {
			c.Phases = append(c.Phases, PhasePeer)
		}
	}
	if c.MeasureBig == nil {
		opts := ledger.Options{ProofCacheTiles: c.ProofCacheTiles}
		c.MeasureBig = func(ctx context.Context, dir string, d time.Duration) (BigResult, error) {
			return MeasureBigLog(ctx, dir, d, opts)
		}
	}
	if c.MeasurePair == nil {
		opts := ledger.Options{ProofCacheTiles: c.ProofCacheTiles}
		c.MeasurePair = func(ctx context.Context, small, large string, d time.Duration) ([2]BigResult, error) {
			return MeasurePair(ctx, small, large, [2]*BuildResult{}, d, opts)
		}
	}
}

// Report is a suite run's figures. A phase that was not run, or failed,
// leaves its field nil; failures are listed in Errors.
type Report struct {
	Machine Machine `json:"machine"`
	Params  Params  `json:"params"`
	// VerifyCeiling is parallel Ed25519 verifies/s of a receipt on all cores.
	VerifyCeiling float64 `json:"verify_ceiling_per_sec,omitempty"`
	// VerifyCPUUs is the CPU time of one verify in microseconds.
	VerifyCPUUs float64       `json:"verify_cpu_us,omitempty"`
	Auth        *AppendResult `json:"authorized_appends,omitempty"`
	// AuthRatio is Auth.PerSec / VerifyCeiling. AuthCPURatio is
	// VerifyCPUUs / Auth.CPUUs: the ratio a CPU-bound run would reach with
	// the machine to itself, steadier on a loaded machine.
	AuthRatio    float64       `json:"authorized_over_ceiling,omitempty"`
	AuthCPURatio float64       `json:"authorized_over_ceiling_by_cpu,omitempty"`
	HTTP         *AppendResult `json:"http_appends,omitempty"`
	LogOnly      *AppendResult `json:"log_only_appends,omitempty"`
	Build        *BuildResult  `json:"big_log_build,omitempty"`
	Big          *BigResult    `json:"big_log,omitempty"`
	// GrowthBuild and GrowthBase are the smaller big log's (Config.GrowthFrom),
	// and Growth compares Big with it.
	GrowthBuild *BuildResult `json:"growth_base_build,omitempty"`
	GrowthBase  *BigResult   `json:"growth_base,omitempty"`
	Growth      *Growth      `json:"growth,omitempty"`
	GrowthAgain []*Growth    `json:"growth_again,omitempty"` // Config.GrowthRounds after the first
	// PeakRSSMiB is the peak resident set of the whole run's process
	// (building the big log included; the child's measurement is apart),
	// and PeakAnonMiB and PeakFileMiB its anonymous and file-backed parts
	// (sampled every 50 ms).
	PeakRSSMiB  float64     `json:"peak_rss_mib"`
	PeakAnonMiB float64     `json:"peak_rss_anon_mib"`
	PeakFileMiB float64     `json:"peak_rss_file_mib"`
	Peer        *PeerResult `json:"peer,omitempty"`
	PeerError   string      `json:"peer_error,omitempty"`
	// Postgres is the figures on Config.Store.
	Postgres *StoreResult `json:"postgres,omitempty"`
	Errors   []string     `json:"errors,omitempty"`
	Seconds  float64      `json:"seconds"`
}

// Params are the sizes and durations a report was taken with.
type Params struct {
	Phases     []string `json:"phases"`
	Ceiling    string   `json:"ceiling"`
	AuthN      int      `json:"auth_submissions"`
	AuthWindow int      `json:"auth_window"`
	Chains     int      `json:"chains"`
	HTTPN      int      `json:"http_submissions"`
	HTTPClient int      `json:"http_clients"`
	LogOnlyN   int      `json:"log_only_entries"`
	Inflight   int      `json:"inflight"`
	LeafBytes  int      `json:"leaf_bytes"`
	Size       int      `json:"size"`
	ReadFor    string   `json:"read_for"`
	Peer       string   `json:"peer,omitempty"`
	Dir        string   `json:"dir"`
	BigDir     string   `json:"big_dir,omitempty"` // the kept big log, when reused or kept by Config.BigDir
}

// Run runs the suite. It returns an error only when it cannot run at all;
// a failed phase is recorded in Report.Errors and the others still run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	start := time.Now()
	base, err := os.MkdirTemp(cfg.Dir, "custody-bench-")
	if err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(base)
	}
	rss := sampleRSS()
	r := &Report{Machine: machine(), Params: Params{Phases: cfg.Phases, Ceiling: cfg.Ceiling.String(), AuthN: cfg.AuthN,
		AuthWindow: cfg.AuthWindow, Chains: Chains, HTTPN: cfg.HTTPN, HTTPClient: cfg.HTTPClients, LogOnlyN: cfg.LogOnlyN, Inflight: cfg.Inflight, LeafBytes: LeafBytes,
		Size: cfg.Size, ReadFor: cfg.ReadFor.String(), Peer: cfg.Peer, Dir: base, BigDir: cfg.BigDir}}
	say := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	fail := func(phase string, err error) {
		r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", phase, err))
		say("%s failed: %v", phase, err)
	}
	has := func(p string) bool { return slices.Contains(cfg.Phases, p) }

	if has(PhaseCeiling) && !has(PhaseAuth) {
		say("measuring the Ed25519 verify ceiling for %s", cfg.Ceiling)
		env, pub, err := SampleReceipt()
		if err == nil {
			r.VerifyCeiling, r.VerifyCPUUs, err = verifyCeiling(env, pub, cfg.Ceiling)
		}
		if err != nil {
			fail(PhaseCeiling, err)
		}
	}
	if has(PhaseAuth) {
		d := time.Duration(0)
		if has(PhaseCeiling) {
			d = cfg.Ceiling
			say("setting up %d depth-3 chains, signing %d submissions, then the verify ceiling for %s", Chains, cfg.AuthN, d)
		} else {
			say("setting up %d depth-3 chains and signing %d submissions", Chains, cfg.AuthN)
		}
		res, ceiling, err := AuthorizedAppends(ctx, filepath.Join(base, "auth"), cfg.AuthN, cfg.AuthWindow, d)
		if err != nil {
			fail(PhaseAuth, err)
		} else {
			r.Auth = &res
			if ceiling.PerSec > 0 {
				r.VerifyCeiling, r.VerifyCPUUs = ceiling.PerSec, ceiling.CPUUs
				r.AuthRatio = res.PerSec / ceiling.PerSec
				if res.CPUUs > 0 {
					r.AuthCPURatio = ceiling.CPUUs / res.CPUUs
				}
			}
			say("  authorised: %.0f/s (%d accepted, %d denied)", res.PerSec, res.Accepted, res.Denied)
		}
	}
	if has(PhaseHTTP) {
		say("over HTTP: %d depth-3 chains, %d submissions from %d clients", cfg.HTTPClients, cfg.HTTPN, cfg.HTTPClients)
		res, err := HTTPAppends(ctx, filepath.Join(base, "http"), cfg.HTTPN, cfg.HTTPClients)
		if err != nil {
			fail(PhaseHTTP, err)
		} else {
			r.HTTP = &res
			say("  over HTTP: %.0f/s", res.PerSec)
		}
	}
	if cfg.Store != "" {
		badgerAuth := ""
		if r.Auth != nil {
			badgerAuth = filepath.Join(base, "auth")
		}
		r.Postgres = runStore(ctx, cfg, badgerAuth, say)
	}
	if has(PhaseLogOnly) {
		say("log-only: %d leaves of %d bytes from %d clients", cfg.LogOnlyN, LeafBytes, cfg.Inflight)
		res, err := LogOnlyAppends(ctx, filepath.Join(base, "logonly"), cfg.LogOnlyN, cfg.Inflight)
		if err != nil {
			fail(PhaseLogOnly, err)
		} else {
			r.LogOnly = &res
			say("  log-only: %.0f/s", res.PerSec)
		}
	}
	if has(PhaseBig) {
		smallDir := ""
		if cfg.GrowthFrom > 0 && cfg.GrowthFrom < cfg.Size {
			dir := ""
			if cfg.BigDir != "" {
				dir = fmt.Sprintf("%s-%d", cfg.BigDir, cfg.GrowthFrom)
			}
			b, big, where, done, err := runBig(ctx, cfg, base, dir, cfg.GrowthFrom, say)
			defer done()
			if err != nil {
				fail(PhaseBig, err)
			} else {
				r.GrowthBuild, r.GrowthBase, smallDir = b, big, where
			}
		}
		b, big, where, done, err := runBig(ctx, cfg, base, cfg.BigDir, cfg.Size, say)
		defer done()
		if err != nil {
			fail(PhaseBig, err)
		}
		r.Build, r.Big = b, big
		if r.GrowthBase != nil && r.Big != nil {
			r.Growth = newGrowth(r.GrowthBase, r.Big)
			say("measuring proofs and bundles at %d and %d entries in turn (%d slices of %s each)", r.GrowthBase.Size, r.Big.Size, PairSlices, cfg.ReadFor/PairSlices)
			g, again, err := growthRounds(cfg.GrowthRounds, "", say, func() ([2]BigResult, error) {
				return cfg.MeasurePair(ctx, smallDir, where, cfg.ReadFor)
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
	if has(PhasePeer) {
		peer, err := runPeer(ctx, cfg, base)
		if err != nil {
			r.PeerError = err.Error()
			say("peer: %v", err)
		} else {
			r.Peer = peer
			say("  %s: %.0f/s", peer.Peer, peer.AppendsPerSec)
		}
	}
	r.Machine.LoadAfter = loadAvg()
	r.PeakRSSMiB = PeakRSSMiB()
	r.PeakAnonMiB, r.PeakFileMiB = rss.peaks()
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// runBig builds a big log of size entries (or reuses the one in keep, when
// set and an earlier run built it there) and measures it. The build is nil
// when building failed, the figures nil when measuring did. It returns
// the log's folder and a function that removes it unless it is kept (call
// it once done with the log).
func runBig(ctx context.Context, cfg Config, base, keep string, size int, say func(string, ...any)) (_ *BuildResult, _ *BigResult, dir string, done func(), _ error) {
	dir = filepath.Join(base, "big")
	done = func() {}
	if size != cfg.Size {
		dir = fmt.Sprintf("%s-%d", dir, size)
	}
	reuse := keep != ""
	if reuse {
		dir = keep
	}
	if !cfg.Keep && !reuse {
		done = func() { os.RemoveAll(dir) } // before the peer runs, to give the disk back
	}
	var b BuildResult
	var err error
	if meta, merr := readBigMeta(dir); reuse && merr == nil && meta.Size == uint64(size) && meta.Summaries {
		say("reusing the %d-entry log in %s (built by an earlier run)", meta.Size, dir)
		b = BuildResult{Size: meta.Size}
	} else {
		if reuse {
			if merr == nil && meta.Size == uint64(size) {
				say("not reusing the %d-entry log in %s: it was built before summary tiles", meta.Size, dir)
			}
			err = clearBigDir(dir)
		}
		if err == nil {
			say("building a %d-entry log (raw leaves through LogOnly AppendLeaves, a depth-3 workflow at both ends)", size)
			b, err = BuildBigLog(ctx, dir, size, cfg.Progress)
		}
	}
	if err != nil {
		return nil, nil, dir, done, err
	}
	say("measuring open, proofs, bundles and verification at %d entries (%s each)", b.Size, cfg.ReadFor)
	big, err := cfg.MeasureBig(ctx, dir, cfg.ReadFor)
	if err != nil {
		return &b, nil, dir, done, err
	}
	return &b, &big, dir, done, nil
}

// Growth compares the figures of two big logs of different sizes: each
// ratio is the larger log's figure over the smaller's. Proof and bundle
// cost should grow with a proof's length (about log2 of the size), not
// with the size. The CPU ratios are of the measuring goroutines' own CPU
// (BigResult.ProofOwnCPUUs), which a loaded machine and Badger's
// compactions after a bulk build move least; the rates are the machine's.
type Growth struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// ProofHashes is the length of an inclusion proof at each size.
	ProofHashesFrom int `json:"proof_hashes_from"`
	ProofHashesTo   int `json:"proof_hashes_to"`
	// ProofsRatio and BundlesRatio are rates (To over From: 1 is flat,
	// below 1 slower); ProofCPURatio and BundleCPURatio own CPU per
	// operation (above 1 dearer).
	ProofsRatio    float64 `json:"proofs_per_sec_ratio"`
	ProofCPURatio  float64 `json:"proof_cpu_ratio"`
	BundlesRatio   float64 `json:"bundles_per_sec_ratio"`
	BundleCPURatio float64 `json:"bundle_cpu_ratio"`
	// Paired, when set, holds the figures the ratios are of: the two logs'
	// proofs and bundles measured in turn (MeasurePair), so that both saw
	// the same machine load. Without it the ratios are of the two logs'
	// own measurements, taken a minute or more apart.
	Paired *[2]BigResult `json:"paired,omitempty"`
}

// growthRounds measures the growth rounds times on the same two logs
// (Config.GrowthRounds), each time both in turn: the first round's
// figures, then the others'. It stops at the first failure.
func growthRounds(rounds int, prefix string, say func(string, ...any), measure func() ([2]BigResult, error)) (first *Growth, again []*Growth, err error) {
	for round := range max(rounds, 1) {
		if round > 0 {
			say("%smeasuring the growth again (round %d of %d)", prefix, round+1, rounds)
		}
		pair, err := measure()
		if err != nil {
			return first, again, err
		}
		if round == 0 {
			first = pairedGrowth(pair)
		} else {
			again = append(again, pairedGrowth(pair))
		}
	}
	return first, again, nil
}

// pairedGrowth is the Growth of MeasurePair's figures.
func pairedGrowth(pair [2]BigResult) *Growth {
	g := newGrowth(&pair[0], &pair[1])
	g.Paired = &pair
	return g
}

// TargetGrowth is the least share of the smaller log's proof and bundle
// throughput the larger one keeps, by own CPU (1 / Growth.ProofCPURatio,
// 1 / Growth.BundleCPURatio).
const TargetGrowth = 0.7

func newGrowth(from, to *BigResult) *Growth {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	return &Growth{From: from.Size, To: to.Size,
		ProofHashesFrom: bits.Len64(from.Size - 1), ProofHashesTo: bits.Len64(to.Size - 1),
		ProofsRatio: div(to.ProofsPerSec, from.ProofsPerSec), ProofCPURatio: div(to.ProofOwnCPUUs, from.ProofOwnCPUUs),
		BundlesRatio: div(to.BundlesPerSec, from.BundlesPerSec), BundleCPURatio: div(to.BundleOwnCPUUs, from.BundleOwnCPUUs)}
}

func runPeer(ctx context.Context, cfg Config, base string) (*PeerResult, error) {
	if cfg.Peer != "tessera" {
		return nil, fmt.Errorf("unknown peer %q (the one peer is tessera)", cfg.Peer)
	}
	dir := cfg.PeerDir
	if dir == "" {
		var err error
		if dir, err = FindPeerDir(); err != nil {
			return nil, err
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "tessera: building %s, then %d entries of %d bytes from %d clients\n", dir, cfg.LogOnlyN, LeafBytes, cfg.Inflight)
	}
	pdir := filepath.Join(base, "peer")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return nil, err
	}
	return RunPeer(ctx, dir, pdir, cfg.LogOnlyN, cfg.Inflight)
}

// clearBigDir empties dir for a new big log, but only if it holds nothing
// or a big log of another size: a folder named by mistake is left alone.
func clearBigDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(ents) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := readBigMeta(dir); err != nil {
		return fmt.Errorf("%s is not empty and holds no benchmark log; not replacing it", dir)
	}
	return os.RemoveAll(dir)
}
