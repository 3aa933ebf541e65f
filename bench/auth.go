package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
)

// AppendResult is a durable-append measurement.
type AppendResult struct {
	Submissions int     `json:"submissions"`
	Accepted    int     `json:"accepted"`
	Denied      int     `json:"denied"`
	Inflight    int     `json:"inflight"` // submissions in flight at once
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"per_sec"`
	P50Ms       float64 `json:"p50_ms"` // submit to answer, per submission
	P99Ms       float64 `json:"p99_ms"`
	// CPUUs is the process's CPU time per submission in microseconds (all
	// goroutines: clients, server, ledger, Badger).
	CPUUs float64 `json:"cpu_us_per_op"`
	// Allocs is the heap allocations per submission, of every goroutine
	// in the process: unlike a rate or CPU time, the load does not move
	// it, so it is the figure to compare between builds.
	Allocs float64 `json:"allocs_per_op,omitempty"`
	// MeanBatch is the mean number of entries in the ledger's commits
	// during the run, and CommitMs the mean time of one (the Badger commit
	// and its fsyncs): what the pipeline's batching made of the load.
	MeanBatch float64 `json:"mean_batch"`
	CommitMs  float64 `json:"commit_ms"`
	// PendingP50Ms and PendingP99Ms are the latency of the accepted
	// pending receipts alone (HTTP runs): the answer a runtime waits for
	// before it acts.
	PendingP50Ms float64 `json:"pending_p50_ms,omitempty"`
	PendingP99Ms float64 `json:"pending_p99_ms,omitempty"`
}

// withCommits fills in r's batching figures from the ledger's counters
// before (s0) and after the run.
func (r *AppendResult) withCommits(s0, s1 ledger.Stats) {
	if n := s1.Batches - s0.Batches; n > 0 {
		r.MeanBatch = float64(s1.Entries-s0.Entries) / float64(n)
		r.CommitMs = 1000 * (s1.CommitSeconds - s0.CommitSeconds) / float64(n)
	}
}

// VerifyCeiling returns parallel Ed25519 verifies/s of envelope (as the
// ledger's workers check it: key id, small-order key, signature over PAE)
// on GOMAXPROCS goroutines for d.
func VerifyCeiling(envelope []byte, pub []byte, d time.Duration) (float64, error) {
	rate, _, err := verifyCeiling(envelope, pub, d)
	return rate, err
}

// verifyCeiling is VerifyCeiling, with the CPU microseconds per verify.
func verifyCeiling(envelope []byte, pub []byte, d time.Duration) (float64, float64, error) {
	p, err := sign.ParseEnvelope(envelope)
	if err != nil {
		return 0, 0, err
	}
	if err := p.Verify(pub); err != nil {
		return 0, 0, err
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	deadline := start.Add(d)
	for g := 0; g < runtime.GOMAXPROCS(0); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				for i := 0; i < 64; i++ {
					p.Verify(pub)
				}
				n.Add(64)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), cpuPerOp(cpu0, int(n.Load())), nil
}

// authBench is a ledger with depth-3 chains and pre-signed submissions.
type authBench struct {
	w      *world
	chains []chainLoad
	denied int
	sample []byte // a pending receipt, for the verify ceiling
	pub    []byte // its signer's key
}

// chainLoad is one chain's pre-signed submissions: its leaf agent's, in seq
// order, and its rogue agent's (denied, so in any order).
type chainLoad struct{ envs, rogue [][]byte }

// Chains is how many depth-3 chains (and so concurrent leaf agents, plus as
// many rogue agents) the in-process authorised-append measurement uses.
const Chains = 16

// newAuthBench builds chains depth-3 chains in a new ledger in dir and
// pre-signs about n submissions: each leaf agent alternates pending
// receipts (reserving budget) and their outcomes; 1 in 20 submissions
// comes from a rogue agent outside its scope and is denied.
//
// The ledger's clock is pinned to the moment the submissions are signed,
// so a slow run cannot turn them into clock_skew denials; a decision costs
// the same at any time.
func newAuthBench(ctx context.Context, dir string, n, nchains int) (*authBench, error) {
	t0 := time.Now().UTC().Truncate(time.Second)
	w, err := newWorld(dir, ledger.Options{Clock: func() time.Time { return t0 },
		DenialsPerMinute: 1 << 30, DenialBurst: 1 << 30})
	if err != nil {
		return nil, err
	}
	ab := &authBench{w: w}
	alice, err := newActor("user:alice")
	if err == nil {
		err = w.enroll(ctx, alice)
	}
	var chains []*chain
	for k := 0; k < nchains && err == nil; k++ {
		var c *chain
		c, err = w.newChain(ctx, alice, k)
		chains = append(chains, c)
	}
	if err != nil {
		w.l.Close()
		return nil, err
	}
	per := max(n/nchains, 2)
	pairs := max(per*19/20/2, 1) // 1 in 20 submissions is a rogue's
	for _, c := range chains {
		var envs, rogue [][]byte
		for i := 0; i < pairs; i++ {
			p, o, err := w.receipts(c)
			if err != nil {
				w.l.Close()
				return nil, err
			}
			envs = append(envs, p, o)
		}
		for i := 0; i < per-2*pairs; i++ {
			raw, err := w.rogueReceipt(c, i)
			if err != nil {
				w.l.Close()
				return nil, err
			}
			rogue = append(rogue, raw)
		}
		ab.chains = append(ab.chains, chainLoad{envs, rogue})
		ab.denied += len(rogue)
	}
	ab.sample, ab.pub = ab.chains[0].envs[0], chains[0].leaf.pub
	return ab, nil
}

// total is the number of submissions.
func (ab *authBench) total() int {
	n := 0
	for _, c := range ab.chains {
		n += len(c.envs) + len(c.rogue)
	}
	return n
}

// run submits every agent's envelopes, each agent keeping up to window of
// its own in flight in seq order.
func (ab *authBench) run(ctx context.Context, window int) (AppendResult, error) {
	var streams [][][]byte
	for _, c := range ab.chains {
		streams = append(streams, c.envs, c.rogue)
	}
	var wg sync.WaitGroup
	var acc, den atomic.Int64
	var errOnce sync.Once
	var firstErr error
	lat := make([][]time.Duration, len(streams))
	total := ab.total()
	s0 := ab.w.l.Stats()
	allocs0 := mallocs()
	cpu0 := cpuTime()
	start := time.Now()
	for si, envs := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			type inflight struct {
				p  *ledger.Pending
				at time.Time
			}
			var q []inflight
			drain := func() bool {
				res, err := q[0].p.Wait(ctx)
				lat[si] = append(lat[si], time.Since(q[0].at))
				q = q[1:]
				switch {
				case err != nil:
					errOnce.Do(func() { firstErr = err })
					return false
				case res.Verdict == authority.Accepted:
					acc.Add(1)
				default:
					den.Add(1)
				}
				return true
			}
			for _, e := range envs {
				if len(q) == window && !drain() {
					return
				}
				at := time.Now()
				p, err := ab.w.l.Submit(ctx, e)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				q = append(q, inflight{p, at})
			}
			for len(q) > 0 && drain() {
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return AppendResult{}, firstErr
	}
	if int(den.Load()) != ab.denied || int(acc.Load()+den.Load()) != total {
		return AppendResult{}, fmt.Errorf("accepted %d and denied %d of %d submissions; want %d denied", acc.Load(), den.Load(), total, ab.denied)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	p50, p99 := percentiles(all)
	r := AppendResult{Submissions: total, Accepted: int(acc.Load()), Denied: int(den.Load()), Inflight: window * len(streams),
		Seconds: elapsed.Seconds(), PerSec: float64(total) / elapsed.Seconds(), P50Ms: p50, P99Ms: p99, CPUUs: cpuPerOp(cpu0, total),
		Allocs: allocsPerOp(allocs0, total)}
	r.withCommits(s0, ab.w.l.Stats())
	return r, nil
}

// Ceiling is the verify ceiling: verifies/s on all cores, and the CPU
// time of one verify.
type Ceiling struct {
	PerSec float64 `json:"per_sec"`
	CPUUs  float64 `json:"cpu_us_per_op"`
}

// AuthorizedAppends measures about n authorised durable appends in a new
// ledger in dir (see newAuthBench), each of the 2×Chains agents keeping
// window submissions in flight. It also returns the verify ceiling,
// measured for ceiling on a receipt of the same run (zero: not measured).
func AuthorizedAppends(ctx context.Context, dir string, n, window int, ceiling time.Duration) (AppendResult, Ceiling, error) {
	ab, err := newAuthBench(ctx, dir, n, Chains)
	if err != nil {
		return AppendResult{}, Ceiling{}, fmt.Errorf("setting up chains: %w", err)
	}
	var c Ceiling
	if ceiling > 0 {
		if c.PerSec, c.CPUUs, err = verifyCeiling(ab.sample, ab.pub, ceiling); err != nil {
			ab.w.l.Close()
			return AppendResult{}, c, err
		}
	}
	res, err := ab.run(ctx, window)
	err = errors.Join(err, ab.w.l.Close())
	return res, c, err
}

// SampleReceipt returns a signed pending receipt under a depth-3 chain and
// its signer's public key, for measuring the verify ceiling alone.
func SampleReceipt() ([]byte, []byte, error) {
	lf, err := newActor("agent:p0/c/l")
	if err != nil {
		return nil, nil, err
	}
	w := &world{now: time.Now}
	c := &chain{wf: "wf_bench_0", leaf: lf, auth: "bd2_wf_bench_0", n: new(uint64),
		hash: "621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358"}
	p, _, err := w.receipts(c)
	return p, lf.pub, err
}
