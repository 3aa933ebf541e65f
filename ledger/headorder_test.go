package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
)

// TestSignedHeadPipelined: the next batch's store commit runs while a
// batch's checkpoint is written to the signed-head file, yet the file is
// never ahead of the store (it is written only once the store holds its
// tree), heads are written in order, and no answer is sent before the
// signed-head file holds a checkpoint at least as large as the answer's.
// Each head write is slowed so that commits overlap it.
func TestSignedHeadPipelined(t *testing.T) {
	w := newWorld(t, Options{MaxBatch: 8})
	alice, agent := newActor(t, "user:alice"), newActor(t, "agent:a")
	w.enroll(alice)
	c := w.confirm(alice, "c1", grant(agent, "wf1", []string{"t/*"}, []string{"act"}, nil, nil, 86400))
	w.must(alice, c, authority.Accepted, "")

	var (
		mu       sync.Mutex
		last     uint64 // the size of the last head written
		writing  atomic.Bool
		overlaps atomic.Int64 // commits that returned while a head was being written
		problems []string
	)
	defer func() { testHeadWrite = nil }()
	testHeadWrite = func(h *Head) {
		writing.Store(true)
		defer writing.Store(false)
		sh, err := w.l.store.Head(context.Background())
		mu.Lock()
		defer mu.Unlock()
		if err != nil || sh == nil {
			problems = append(problems, fmt.Sprintf("reading the store's head: %v", err))
		} else if e, err := merkle.ParseEdge(sh.Edge); err != nil || e.Size() < h.Size {
			problems = append(problems, fmt.Sprintf("the signed head of %d is written while the store holds less (%v)", h.Size, err))
		}
		if h.Size <= last {
			problems = append(problems, fmt.Sprintf("the signed head of %d is written after one of %d", h.Size, last))
		}
		last = h.Size
		time.Sleep(3 * time.Millisecond)
	}
	b0 := w.l.Stats().Batches
	stop := make(chan struct{})
	go func() { // counts commits that finish while a head is being written
		for prev := w.l.Stats().Batches; ; {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
			if n := w.l.Stats().Batches; n != prev {
				if writing.Load() {
					overlaps.Add(1)
				}
				prev = n
			}
		}
	}()

	var raws [][]byte
	for i := 0; i < 400; i++ {
		r := w.pending(agent, fmt.Sprintf("r%d", i), "wf1", "c1", c.ScopeHash, "s", "act", "t/x", nil)
		if err := statement.Seal(r); err != nil {
			t.Fatal(err)
		}
		_, raw, err := statement.Sign(agent.priv, r)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	var ps []*Pending
	for _, raw := range raws {
		p, err := w.l.Submit(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Wait(context.Background())
			if err != nil || res.Verdict != authority.Accepted {
				t.Errorf("%v %v", res, err)
				return
			}
			sh, _, err := readSignedHead(w.l.seq.headPath(), w.l.keys.set)
			switch {
			case err != nil || sh == nil:
				t.Errorf("reading the signed-head file: %v", err)
			case sh.cp.Size < res.Head.Size:
				t.Errorf("an answer under a head of %d was sent while the signed-head file holds %d", res.Head.Size, sh.cp.Size)
			}
		}()
	}
	wg.Wait()
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	batches := w.l.Stats().Batches - b0
	t.Logf("%d batches, %d commits returned during a signed-head write", batches, overlaps.Load())
	if batches < 3 || overlaps.Load() == 0 {
		t.Errorf("%d batches, %d commits during a signed-head write: the test did not overlap them", batches, overlaps.Load())
	}
}
