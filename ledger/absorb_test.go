package ledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/storage"
)

// gatedStore holds every commit, once armed, until the test releases it.
type gatedStore struct {
	storage.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // a held commit has started
	release chan struct{} // closed to let held commits go
}

func (g *gatedStore) Commit(ctx context.Context, b *storage.Batch) error {
	g.mu.Lock()
	armed := g.armed
	g.mu.Unlock()
	if armed {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Store.Commit(ctx, b)
}

// TestBatchTakesWhatArrivesDuringCommit: submissions that arrive while a
// batch waits for the one before it to be stored join that batch (up to
// MaxBatch), instead of waiting in the queue for the batch after it.
func TestBatchTakesWhatArrivesDuringCommit(t *testing.T) {
	for _, tc := range []struct {
		maxBatch int
		want     []int // leaves of each batch after the held one
	}{
		{0, []int{5}},
		{3, []int{3, 2}},
	} {
		t.Run(fmt.Sprintf("MaxBatch=%d", tc.maxBatch), func(t *testing.T) {
			dir := t.TempDir()
			l, err := openAt(dir, "absorb.example/log", oneKey(benchKey), Options{LogOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.AppendLeaves(t.Context(), [][]byte{benchLeaf(-1)}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			opts := Options{LogOnly: true, MaxBatch: tc.maxBatch}
			opts.defaults()
			st, err := openStore(dir, opts, false, "")
			if err != nil {
				t.Fatal(err)
			}
			g := &gatedStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
			l, err = open(g, "absorb.example/log", oneKey(benchKey), opts)
			if err != nil {
				st.Close()
				t.Fatal(err)
			}
			defer l.Close()
			var once sync.Once
			let := func() {
				once.Do(func() {
					g.mu.Lock()
					g.armed = false
					g.mu.Unlock()
					close(g.release)
				})
			}
			defer let() // before Close, which waits for the held commit
			g.mu.Lock()
			g.armed = true
			g.mu.Unlock()

			// submit queues leaf i as AppendLeaves does, but returns once
			// it is queued, so the queue's depth is known when it returns.
			var reqs []*request
			submit := func(i int) {
				req := &request{data: benchLeaf(i), raw: true, ready: make(chan struct{}), done: make(chan answer, 1)}
				close(req.ready)
				l.seq.seqQ <- req
				reqs = append(reqs, req)
			}
			// queued waits until the sequencer has taken every queued
			// submission, or fails after d with what is left.
			queued := func(left int, d time.Duration) {
				t.Helper()
				deadline := time.Now().Add(d)
				for l.QueueDepth() != left {
					if time.Now().After(deadline) {
						t.Fatalf("%d submissions wait in the queue, want %d: those that arrived while the batch before was being stored did not join the batch waiting for it", l.QueueDepth(), left)
					}
					time.Sleep(time.Millisecond)
				}
			}
			submit(0)
			<-g.entered // batch 1 (leaf 0) is being stored, and held
			submit(1)
			queued(0, 5*time.Second) // batch 2 starts with leaf 1
			// Let the sequencer get past collecting batch 2 (it takes what
			// is queued at once) to where it waits for batch 1: whatever
			// comes now joins batch 2 only if it is taken while waiting.
			time.Sleep(50 * time.Millisecond)
			for i := 2; i < 6; i++ {
				submit(i)
			}
			left := 0
			if tc.maxBatch > 0 {
				left = 6 - 1 - tc.maxBatch
			}
			queued(left, 5*time.Second)
			let()

			sizes := map[uint64]int{}
			for i, req := range reqs {
				a := <-req.done
				if a.err != nil {
					t.Fatalf("leaf %d: %v", i, a.err)
				}
				if i > 0 { // leaf 0 is alone in the held batch
					sizes[a.res.Head.Size]++
				}
			}
			// Each batch's answers carry its head: count leaves by head.
			var got []int
			for size := uint64(3); size <= 7; size++ {
				if n := sizes[size]; n > 0 {
					got = append(got, n)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("leaves 1-5 were committed in batches of %v, want %v", got, tc.want)
			}
		})
	}
}
