package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/ledger"
)

// LeafBytes is the size of the raw leaves of the log-only measurements:
// about a small receipt's.
const LeafBytes = 400

// leafMaker makes LeafBytes-byte leaves of random bytes (so nothing
// compresses) after a short text prefix, as the ledger's own benchmarks
// and the Tessera peer do.
type leafMaker struct{ r *rand.ChaCha8 }

func newLeafMaker(seed uint64) *leafMaker {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return &leafMaker{r: rand.NewChaCha8(s)}
}

func (m *leafMaker) leaf(i int) []byte {
	b := make([]byte, LeafBytes)
	m.r.Read(b)
	copy(b, fmt.Sprintf("leaf %d ", i))
	return b
}

// LogOnlyAppends measures n durable appends of LeafBytes-byte raw leaves
// (Options.LogOnly, AppendLeaves) in a new ledger in dir, from inflight
// concurrent clients that each append one leaf and wait for it: the same
// load the Tessera peer puts on Tessera. An append is acknowledged when
// its batch's Badger transaction has committed with SyncWrites and the
// signed checkpoint that covers it is published, as for every append.
func LogOnlyAppends(ctx context.Context, dir string, n, inflight int) (AppendResult, error) {
	l, err := ledger.Init(dir, origin, ledger.InitOptions{Options: ledger.Options{LogOnly: true}})
	if err != nil {
		return AppendResult{}, err
	}
	m := newLeafMaker(1)
	leaves := make([][]byte, n)
	for i := range leaves {
		leaves[i] = m.leaf(i)
	}
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	for c := 0; c < inflight; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				if _, _, err := l.AppendLeaves(ctx, leaves[i:i+1]); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuPerOp(cpu0, n)
	if err := errors.Join(firstErr, l.Close()); err != nil {
		return AppendResult{}, err
	}
	p50, p99 := percentiles(lat)
	return AppendResult{Submissions: n, Accepted: n, Inflight: inflight, Seconds: elapsed.Seconds(),
		PerSec: float64(n) / elapsed.Seconds(), P50Ms: p50, P99Ms: p99, CPUUs: cpu}, nil
}
