package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/verify"
)

// metaFile, in a big log's folder, names the bundle subject for
// MeasureBigLog (which may run in another process).
const metaFile = "bench-meta.json"

type bigMeta struct {
	Size    uint64 `json:"size"`
	Subject uint64 `json:"subject"`
	// Summaries is set on logs built by a ledger that stores summary tiles
	// (merkle.SummaryTileLevel) from the first entry: one built before
	// proves its older tiles at the old cost, so it is not reused.
	Summaries bool `json:"summaries,omitempty"`
}

// BuildResult is how a big log was built.
type BuildResult struct {
	Size    uint64  `json:"size"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"` // raw leaves appended per second while filling
	Writers int     `json:"writers"`
	Chunk   int     `json:"chunk"`
	// Subject is the bundle subject (the last pending receipt).
	Subject uint64 `json:"subject,omitempty"`
}

// BuildLeaseTTL is the sequencer lease BuildBigLog holds on a shared store.
const BuildLeaseTTL = 30 * time.Second

// buildChunk and buildWriters shape the filling of a big log: each writer
// appends chunks of buildChunk leaves, so the pipeline always has a full
// batch (MaxBatch is 2048) waiting while one commits.
const (
	buildChunk   = 2048
	buildWriters = 4
)

// BuildBigLog creates a log of size entries in dir for MeasureBigLog. It
// writes a real depth-3 workflow at the start (GENESIS, a PRINCIPAL, a
// CONFIRM, two DELEGATEs and a receipt with its outcome), fills the log
// with LeafBytes-byte raw leaves through Options.LogOnly and AppendLeaves,
// and ends with more receipts of the workflow, so that the bundle of the
// last pending receipt spans the whole log. Progress goes to progress.
//
// On a shared store the builder holds the sequencer lease for
// BuildLeaseTTL, not the ledger's default 3 s: nothing else competes for
// it, and on a loaded machine a renewal held up for a few seconds would
// otherwise end a build of many minutes.
func BuildBigLog(ctx context.Context, dir string, size int, progress io.Writer) (BuildResult, error) {
	w, err := newWorld(dir, ledger.Options{LogOnly: true, LeaseTTL: BuildLeaseTTL})
	if err != nil {
		return BuildResult{}, err
	}
	res, err := buildBigLog(ctx, w, dir, size, progress)
	return res, errors.Join(err, w.l.Close())
}

func buildBigLog(ctx context.Context, w *world, dir string, size int, progress io.Writer) (BuildResult, error) {
	alice, err := newActor("user:alice")
	if err != nil {
		return BuildResult{}, err
	}
	if err := w.enroll(ctx, alice); err != nil {
		return BuildResult{}, err
	}
	c, err := w.newChain(ctx, alice, 0)
	if err != nil {
		return BuildResult{}, err
	}
	pairs := func(n int) (last uint64, err error) {
		for range n {
			p, o, err := w.receipts(c)
			if err != nil {
				return 0, err
			}
			for i, raw := range [][]byte{p, o} {
				r, err := w.l.Append(ctx, raw)
				if err != nil {
					return 0, err
				}
				if r.Verdict != authority.Accepted {
					return 0, fmt.Errorf("receipt: %s %s: %s", r.Verdict, r.Code, r.Reason)
				}
				if i == 0 {
					last = r.Index
				}
			}
		}
		return last, nil
	}
	if _, err := pairs(1); err != nil {
		return BuildResult{}, err
	}
	const tail = 2 // receipt pairs after the filler
	fill := size - int(w.l.Head().Size) - 2*tail
	start := time.Now()
	var next atomic.Int64
	var done atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	chunks := (fill + buildChunk - 1) / buildChunk
	for g := range buildWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := newLeafMaker(uint64(g) + 100)
			batch := make([][]byte, 0, buildChunk)
			for {
				k := int(next.Add(1) - 1)
				if k >= chunks || ctx.Err() != nil {
					return
				}
				batch = batch[:0]
				for i := k * buildChunk; i < min(fill, (k+1)*buildChunk); i++ {
					batch = append(batch, m.leaf(i))
				}
				if _, _, err := w.l.AppendLeaves(ctx, batch); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if d := done.Add(int64(len(batch))); progress != nil && d/int64(max(fill/10, 1)) != (d-int64(len(batch)))/int64(max(fill/10, 1)) {
					fmt.Fprintf(progress, "  built %d of %d entries (%.0f/s)\n", d, fill, float64(d)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return BuildResult{}, fmt.Errorf("filling the log: %w", firstErr)
	}
	subject, err := pairs(tail)
	if err != nil {
		return BuildResult{}, err
	}
	if !ledger.IsStoreURL(dir) {
		meta, _ := json.Marshal(bigMeta{Size: w.l.Head().Size, Subject: subject, Summaries: true})
		if err := os.WriteFile(filepath.Join(dir, metaFile), meta, 0o644); err != nil {
			return BuildResult{}, err
		}
	}
	return BuildResult{Size: w.l.Head().Size, Seconds: elapsed.Seconds(), PerSec: float64(fill) / elapsed.Seconds(),
		Writers: buildWriters, Chunk: buildChunk, Subject: subject}, nil
}

func readBigMeta(dir string) (bigMeta, error) {
	var meta bigMeta
	raw, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return meta, fmt.Errorf("not a big benchmark log: %w", err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return meta, fmt.Errorf("%s: %w", metaFile, err)
	}
	return meta, nil
}

// BigResult holds the figures taken on a big log.
type BigResult struct {
	Size   uint64    `json:"size"`
	OpenMs []float64 `json:"open_ms"` // each of OpenRounds opens
	// OpenReadOnlyMs is each of OpenRounds read-only opens (a scratch copy
	// of the files Badger would cut, checked against the signed head: what
	// audit, checkpoint, get, prove, export and replay do, and what a
	// read-write open does first).
	OpenReadOnlyMs []float64 `json:"open_read_only_ms"`
	ProofsPerSec   float64   `json:"proofs_per_sec"`
	BundlesPerSec  float64   `json:"bundles_per_sec"`
	// ProofCPUUs, BundleCPUUs and VerifyCPUUs are the process's CPU time
	// per operation in microseconds (Badger's background work included).
	ProofCPUUs  float64 `json:"proof_cpu_us"`
	BundleCPUUs float64 `json:"bundle_cpu_us"`
	// ProofOwnCPUUs and BundleOwnCPUUs are the CPU time per operation of
	// the goroutines that ran them alone (their threads' CPU clocks):
	// without the background work that a log right after a bulk build
	// does for minutes (Badger compacting), so they compare across sizes.
	ProofOwnCPUUs  float64 `json:"proof_own_cpu_us"`
	BundleOwnCPUUs float64 `json:"bundle_own_cpu_us"`
	// ProofFaults and BundleFaults are the page faults per operation the
	// measuring threads took (getrusage RUSAGE_THREAD), minor and major:
	// a first touch of a page of Badger's memory-mapped files costs a
	// minor fault (a major one if the page is not in the page cache), and
	// the thread's CPU clock counts the kernel's time on it.
	ProofFaults      float64 `json:"proof_faults"`
	ProofMajFaults   float64 `json:"proof_major_faults"`
	BundleFaults     float64 `json:"bundle_faults"`
	BundleMajFaults  float64 `json:"bundle_major_faults"`
	VerifyCPUUs      float64 `json:"verify_cpu_us"`
	BundleEntries    int     `json:"bundle_entries"`
	BundleBytes      int     `json:"bundle_bytes"`
	VerifiesPerSec   float64 `json:"bundle_verifies_per_sec"`
	DiskBytes        int64   `json:"disk_bytes"`
	DiskBytesPerLeaf float64 `json:"disk_bytes_per_entry"`
	// PeakRSSMiB is the peak resident set of the process that measured:
	// when MeasureBigLog runs in a child process of its own (custody bench
	// does that), it is the open, proofs, bundles and verification alone.
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// PeakAnonMiB and PeakFileMiB split the resident set, sampled every
	// 50 ms: anonymous memory (Go heap, Badger's caches) and pages of
	// mapped files (Badger mmaps its tables and value log; the kernel can
	// drop those pages whenever it needs the memory).
	PeakAnonMiB float64 `json:"peak_rss_anon_mib"`
	PeakFileMiB float64 `json:"peak_rss_file_mib"`
	// GoHeapMiB is the Go heap in use at the end (runtime.MemStats.HeapInuse).
	GoHeapMiB float64 `json:"go_heap_mib"`
	// MemoryLimitMiB is the Go memory limit the measurement ran under
	// (GOMEMLIMIT, else MeasureMemoryLimit); 0: none.
	MemoryLimitMiB float64 `json:"memory_limit_mib,omitempty"`
	Goroutines     int     `json:"goroutines"` // used for each parallel figure
}

// MeasureMemoryLimit is the Go memory limit (runtime/debug.SetMemoryLimit)
// MeasureBigLog runs under when GOMEMLIMIT is not set: the one custody
// serve runs under by default. It is soft: the heap may pass it, at the
// cost of more frequent collections.
const MeasureMemoryLimit = server.DefaultMemoryLimit

// OpenRounds is how many times MeasureBigLog opens the log.
const OpenRounds = 3

// MeasureBigLog measures a log that BuildBigLog made in dir: open time
// (OpenRounds times), then for d each, on 2×GOMAXPROCS goroutines,
// inclusion proofs at random indexes, bundles of the last pending receipt
// (ledger.Prove), and offline verification of that bundle
// (verify.VerifyBundle); then disk bytes per entry, after closing.
//
// opts are the ledger's options (the zero value: the defaults), so that a
// tuning such as ProofCacheTiles can be measured without a rebuild.
func MeasureBigLog(ctx context.Context, dir string, d time.Duration, opts ledger.Options) (BigResult, error) {
	meta, err := readBigMeta(dir)
	if err != nil {
		return BigResult{}, err
	}
	r := BigResult{Size: meta.Size, Goroutines: 2 * runtime.GOMAXPROCS(0)}
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(MeasureMemoryLimit))
	}
	if lim := debug.SetMemoryLimit(-1); lim < 1<<62 {
		r.MemoryLimitMiB = float64(lim) / (1 << 20)
	}
	rss := sampleRSS()
	ro := opts
	ro.ReadOnly = true
	for range OpenRounds {
		start := time.Now()
		l, err := ledger.Open(dir, ro)
		if err != nil {
			rss.peaks()
			return r, err
		}
		r.OpenReadOnlyMs = append(r.OpenReadOnlyMs, float64(time.Since(start).Microseconds())/1000)
		if err := l.Close(); err != nil {
			rss.peaks()
			return r, err
		}
	}
	var l *ledger.Ledger
	for i := range OpenRounds {
		start := time.Now()
		if l, err = ledger.Open(dir, opts); err != nil {
			rss.peaks()
			return r, err
		}
		r.OpenMs = append(r.OpenMs, float64(time.Since(start).Microseconds())/1000)
		if i < OpenRounds-1 {
			if err := l.Close(); err != nil {
				rss.peaks()
				return r, err
			}
		}
	}
	err = measureOpen(ctx, l, meta, d, &r)
	r.PeakAnonMiB, r.PeakFileMiB = rss.peaks()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.GoHeapMiB = float64(ms.HeapInuse) / (1 << 20)
	if err = errors.Join(err, l.Close()); err != nil {
		return r, err
	}
	r.DiskBytes = diskUsage(dir)
	r.DiskBytesPerLeaf = float64(r.DiskBytes) / float64(r.Size)
	r.PeakRSSMiB = PeakRSSMiB()
	return r, nil
}

// MeasureBigStore measures, in this process, a log BuildBigLog made on a
// database (loc a store URL; b what BuildBigLog returned): open time,
// proofs, bundles and verification as MeasureBigLog does. Disk and RSS are
// the database server's, not taken.
func MeasureBigStore(ctx context.Context, loc string, b BuildResult, d time.Duration, opts ledger.Options) (BigResult, error) {
	r := BigResult{Size: b.Size, Goroutines: 2 * runtime.GOMAXPROCS(0)}
	var l *ledger.Ledger
	var err error
	for i := range OpenRounds {
		start := time.Now()
		if l, err = ledger.Open(loc, opts); err != nil {
			return r, err
		}
		r.OpenMs = append(r.OpenMs, float64(time.Since(start).Microseconds())/1000)
		if i < OpenRounds-1 {
			if err := l.Close(); err != nil {
				return r, err
			}
		}
	}
	err = measureOpen(ctx, l, bigMeta{Size: b.Size, Subject: b.Subject}, d, &r)
	return r, errors.Join(err, l.Close())
}

func measureOpen(ctx context.Context, l *ledger.Ledger, meta bigMeta, d time.Duration, r *BigResult) error {
	size := l.Head().Size
	if size != meta.Size {
		return fmt.Errorf("the log has %d entries, its meta file says %d", size, meta.Size)
	}
	var err error
	p, err := parallel(ctx, r.Goroutines, d, func(g int, x *uint64) error {
		*x ^= *x << 13
		*x ^= *x >> 7
		*x ^= *x << 17
		_, err := l.InclusionProof(*x%size, size)
		return err
	})
	r.ProofsPerSec, r.ProofCPUUs, r.ProofOwnCPUUs, r.ProofFaults, r.ProofMajFaults = p.rate, p.cpuUs, p.ownUs, p.faults, p.majFaults
	if err != nil {
		return fmt.Errorf("inclusion proofs: %w", err)
	}
	b, err := l.Prove(meta.Subject, false)
	if err != nil {
		return fmt.Errorf("bundle of %d: %w", meta.Subject, err)
	}
	data, err := b.Marshal()
	if err != nil {
		return err
	}
	r.BundleEntries, r.BundleBytes = len(b.Entries), len(data)
	p, err = parallel(ctx, r.Goroutines, d, func(int, *uint64) error {
		_, err := l.Prove(meta.Subject, false)
		return err
	})
	r.BundlesPerSec, r.BundleCPUUs, r.BundleOwnCPUUs, r.BundleFaults, r.BundleMajFaults = p.rate, p.cpuUs, p.ownUs, p.faults, p.majFaults
	if err != nil {
		return fmt.Errorf("bundles: %w", err)
	}
	vkey := l.VerifierKey()
	check := func(int, *uint64) error {
		b, err := verify.ParseBundle(data)
		if err != nil {
			return err
		}
		v, err := verify.VerifyBundle(b, vkey)
		if err != nil {
			return err
		}
		if !v.Valid {
			return fmt.Errorf("the bundle of %d does not verify: %+v", meta.Subject, v.Failure())
		}
		return nil
	}
	if err := check(0, nil); err != nil {
		return err
	}
	p, err = parallel(ctx, r.Goroutines, d, check)
	r.VerifiesPerSec, r.VerifyCPUUs = p.rate, p.cpuUs
	return err
}

// parallelStats is what parallel measured: calls per second, the
// process's CPU microseconds per call, the calling threads' own CPU
// microseconds per call, and their page faults per call (minor, major).
type parallelStats struct {
	rate, cpuUs, ownUs float64
	faults, majFaults  float64
	// The totals behind them: calls, seconds, own CPU nanoseconds, faults.
	n, ownNs, minor, major int64
	secs                   float64
}

// parallel runs f on g goroutines for d and returns calls per second, the
// process's CPU microseconds per call, and the CPU microseconds and page
// faults per call of the calling goroutines alone (each locked to its
// thread, whose CPU clock and getrusage it reads: background work such as
// Badger's compactions and the collector's own workers is left out, the
// collector's assists are not). Each goroutine has its own state word,
// seeded differently.
func parallel(ctx context.Context, g int, d time.Duration, f func(g int, state *uint64) error) (parallelStats, error) {
	var n atomic.Int64
	var own, minor, major atomic.Int64 // nanoseconds, faults
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	deadline := start.Add(d)
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := threadCPU()
			mi0, ma0 := threadFaults()
			defer func() {
				own.Add(int64(threadCPU() - t0))
				mi, ma := threadFaults()
				minor.Add(mi - mi0)
				major.Add(ma - ma0)
			}()
			x := uint64(88172645463325252) + uint64(i)*0x9e3779b97f4a7c15
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for range 8 {
					if err := f(i, &x); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
				}
				n.Add(8)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	s := parallelStats{rate: float64(n.Load()) / time.Since(start).Seconds(), cpuUs: cpuPerOp(cpu0, int(n.Load())),
		n: n.Load(), ownNs: own.Load(), minor: minor.Load(), major: major.Load(), secs: time.Since(start).Seconds()}
	if c := float64(n.Load()); c > 0 {
		s.ownUs = float64(own.Load()) / 1000 / c
		s.faults, s.majFaults = float64(minor.Load())/c, float64(major.Load())/c
	}
	return s, firstErr
}

// PairSlices is how many turns MeasurePair gives each of its two logs, for
// proofs and again for bundles.
const PairSlices = 8

// MeasurePair measures inclusion proofs and bundle builds on two big logs
// that BuildBigLog made (small and large: folders, or store URLs with
// their BuildResults in builds), in turn: PairSlices slices of
// d/PairSlices on each, alternating, on the same goroutines as
// MeasureBigLog. The logs are measured alike, but a shared machine's load
// changes by the second; measured in turn, both sizes see the same load,
// so their ratio (Growth) is the logs', not the minute's. Only the proof
// and bundle fields of the two results are set (rates, own CPU and page
// faults per operation; the process's CPU per operation counts both
// logs' background work, so it is left out).
func MeasurePair(ctx context.Context, small, large string, builds [2]*BuildResult, d time.Duration, opts ledger.Options) ([2]BigResult, error) {
	var out [2]BigResult
	var metas [2]bigMeta
	var ls [2]*ledger.Ledger
	defer func() {
		for _, l := range ls {
			if l != nil {
				l.Close()
			}
		}
	}()
	for i, loc := range []string{small, large} {
		if b := builds[i]; b != nil && ledger.IsStoreURL(loc) {
			metas[i] = bigMeta{Size: b.Size, Subject: b.Subject}
		} else {
			m, err := readBigMeta(loc)
			if err != nil {
				return out, err
			}
			metas[i] = m
		}
		l, err := ledger.Open(loc, opts)
		if err != nil {
			return out, err
		}
		if l.Head().Size != metas[i].Size {
			return out, fmt.Errorf("%s has %d entries, its meta says %d", loc, l.Head().Size, metas[i].Size)
		}
		ls[i] = l
		out[i] = BigResult{Size: metas[i].Size, Goroutines: 2 * runtime.GOMAXPROCS(0)}
	}
	slice := max(d/PairSlices, 10*time.Millisecond)
	var proofs, bundles [2]parallelStats
	for range PairSlices {
		for i, l := range ls {
			size := metas[i].Size
			p, err := parallel(ctx, out[i].Goroutines, slice, func(g int, x *uint64) error {
				*x ^= *x << 13
				*x ^= *x >> 7
				*x ^= *x << 17
				_, err := l.InclusionProof(*x%size, size)
				return err
			})
			if err != nil {
				return out, fmt.Errorf("inclusion proofs at %d: %w", size, err)
			}
			proofs[i].add(p)
		}
	}
	for range PairSlices {
		for i, l := range ls {
			subject := metas[i].Subject
			p, err := parallel(ctx, out[i].Goroutines, slice, func(int, *uint64) error {
				_, err := l.Prove(subject, false)
				return err
			})
			if err != nil {
				return out, fmt.Errorf("bundles at %d: %w", metas[i].Size, err)
			}
			bundles[i].add(p)
		}
	}
	for i := range out {
		p, b := proofs[i].totals(), bundles[i].totals()
		out[i].ProofsPerSec, out[i].ProofOwnCPUUs, out[i].ProofFaults, out[i].ProofMajFaults = p.rate, p.ownUs, p.faults, p.majFaults
		out[i].BundlesPerSec, out[i].BundleOwnCPUUs, out[i].BundleFaults, out[i].BundleMajFaults = b.rate, b.ownUs, b.faults, b.majFaults
	}
	var err error
	for i, l := range ls {
		err = errors.Join(err, l.Close())
		ls[i] = nil
	}
	return out, err
}

// add sums another measurement's totals into s.
func (s *parallelStats) add(o parallelStats) {
	s.n += o.n
	s.ownNs += o.ownNs
	s.minor += o.minor
	s.major += o.major
	s.secs += o.secs
}

// totals sets the per-call figures from the totals.
func (s parallelStats) totals() parallelStats {
	if s.n > 0 {
		c := float64(s.n)
		s.ownUs, s.faults, s.majFaults = float64(s.ownNs)/1000/c, float64(s.minor)/c, float64(s.major)/c
	}
	if s.secs > 0 {
		s.rate = float64(s.n) / s.secs
	}
	return s
}
