package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// TestWorkflowIndex checks the workflow index against the back-link walk
// it replaces, for two interleaved workflows of several pages written in
// batches of many leaves (pages fill inside a batch), across a reopen, and
// that paged reads return every leaf once.
func TestWorkflowIndex(t *testing.T) { testWorkflowIndex(t) }

// TestWorkflowIndexEvicted is TestWorkflowIndex with room for one
// workflow's index state in the sequencer: each batch of two workflows
// evicts one, which is then read back from the store.
func TestWorkflowIndexEvicted(t *testing.T) {
	defer func(n int) { wfCached = n }(wfCached)
	wfCached = 1
	testWorkflowIndex(t)
}

func testWorkflowIndex(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	agents := map[string]*actor{}
	confirms := map[string]*statement.ConfirmDoc{}
	for _, wf := range []string{"wf_a", "wf_b"} {
		a := newActor(t, "agent:"+wf)
		c := w.confirm(alice, "c_"+wf, grant(a, wf, []string{"t/*"}, []string{"act"}, nil, nil, 86400))
		w.must(alice, c, authority.Accepted, "")
		agents[wf], confirms[wf] = a, c
	}
	// 700 receipts per workflow, submitted concurrently so that batches
	// hold many leaves of each.
	var wg sync.WaitGroup
	for _, wf := range []string{"wf_a", "wf_b"} {
		a, c := agents[wf], confirms[wf]
		var raws [][]byte
		for i := 0; i < 700; i++ {
			r := w.pending(a, fmt.Sprintf("%s_%d", wf, i), wf, c.ConfirmID, c.ScopeHash, "s", "act", "t/x", nil)
			if err := statement.Seal(r); err != nil {
				t.Fatal(err)
			}
			_, raw, err := statement.Sign(a.priv, r)
			if err != nil {
				t.Fatal(err)
			}
			raws = append(raws, raw)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ps []*Pending
			for _, raw := range raws {
				p, err := w.l.Submit(context.Background(), raw)
				if err != nil {
					t.Error(err)
					return
				}
				ps = append(ps, p)
			}
			for _, p := range ps {
				if r, err := p.Wait(context.Background()); err != nil || r.Verdict != authority.Accepted {
					t.Errorf("%v %v", r, err)
				}
			}
		}()
	}
	wg.Wait()
	check := func(l *Ledger) {
		t.Helper()
		for _, wf := range []string{"wf_a", "wf_b"} {
			want, err := l.read.walkAfter(context.Background(), wf, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != 701 {
				t.Fatalf("%s: the back-links give %d leaves, want 701", wf, len(want))
			}
			got, err := l.WorkflowIndexes(wf)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%s: the index gives %d leaves (%v), the back-links %d", wf, len(got), err, len(want))
			}
			// Paged, from every kind of starting point.
			for _, after := range []uint64{0, want[0], want[255], want[256], want[400], want[700]} {
				var paged []uint64
				cur := after
				for {
					idx, more, err := l.WorkflowRange(context.Background(), wf, cur, 100)
					if err != nil {
						t.Fatal(err)
					}
					paged = append(paged, idx...)
					if !more {
						break
					}
					cur = idx[len(idx)-1]
				}
				i, _ := slices.BinarySearch(want, after+1)
				if !slices.Equal(paged, want[i:]) {
					t.Fatalf("%s after %d: paged %d leaves, want %d", wf, after, len(paged), len(want[i:]))
				}
			}
		}
	}
	check(w.l)
	compareState(t, w.l, w.replay())
	w.l.Close()
	l, err := Open(w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l
	check(l)
	if _, _, err := l.WorkflowRange(context.Background(), "wf_none", 0, 10); err == nil {
		t.Fatal("a workflow that does not exist has a range")
	}
}

// TestBundleTooLarge: a bundle of more workflow entries than the cap is
// refused with ErrTooLarge and a sentence that says how to read the
// workflow in parts; a bundle of an earlier entry still fits.
func TestBundleTooLarge(t *testing.T) {
	defer func(n int) { bundleCap = n }(bundleCap)
	bundleCap = 10
	w := newWorld(t, Options{})
	alice, a := newActor(t, "user:alice"), newActor(t, "agent:a")
	w.enroll(alice)
	c := w.confirm(alice, "c1", grant(a, "wf1", []string{"t/*"}, []string{"act"}, nil, nil, 900))
	w.must(alice, c, authority.Accepted, "")
	var rs []*Result
	for i := 0; i < 12; i++ {
		rs = append(rs, w.must(a, w.pending(a, fmt.Sprintf("r%d", i), "wf1", "c1", c.ScopeHash, "s", "act", "t/x", nil), authority.Accepted, ""))
	}
	_, err := w.l.Prove(rs[11].Index, true)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "GET /v1/workflows/{id}?after=N") {
		t.Fatalf("a 13-entry workflow bundle with a cap of 10: %v", err)
	}
	if _, err := w.l.Prove(rs[11].Index, false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("the bundle of the workflow's 13th entry with a cap of 10: %v", err)
	}
	b, err := w.l.Prove(rs[5].Index, false)
	if err != nil {
		t.Fatalf("the bundle of the workflow's 7th entry: %v", err)
	}
	if n := len(b.Entries); n < 7 {
		t.Fatalf("the bundle of the 7th entry holds %d entries", n)
	}
}

// TestWorkflowIndexTail checks where the index keeps a workflow's partial
// last page and its summary: the leaves past the last whole chunk of 32
// with the count, in one record rewritten per batch, each chunk written
// once, and no page record until the page fills. An index written before
// (the count alone, the partial page and the summary in records of their
// own) is read as it is, across a reopen, and extended in the present
// layout, through a page filling.
func TestWorkflowIndexTail(t *testing.T) {
	defer func() { testWfLegacy = false }()
	w := newWorld(t, Options{})
	alice, a := newActor(t, "user:alice"), newActor(t, "agent:a")
	w.enroll(alice)
	const wf = "wf_t"
	c := w.confirm(alice, "c_t", grant(a, wf, []string{"t/*"}, []string{"act"}, nil, nil, 86400))
	w.must(alice, c, authority.Accepted, "")
	n := 0
	submit := func(l *Ledger, k int) {
		t.Helper()
		var ps []*Pending
		for i := 0; i < k; i++ {
			r := w.pending(a, fmt.Sprintf("r_%d", n), wf, c.ConfirmID, c.ScopeHash, "s", "act", "t/x", nil)
			n++
			if err := statement.Seal(r); err != nil {
				t.Fatal(err)
			}
			_, raw, err := statement.Sign(a.priv, r)
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.Submit(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		for _, p := range ps {
			if r, err := p.Wait(context.Background()); err != nil || r.Verdict != authority.Accepted {
				t.Fatalf("%v %v", r, err)
			}
		}
	}
	check := func(l *Ledger, legacy bool) {
		t.Helper()
		ctx := context.Background()
		want, err := l.read.walkAfter(ctx, wf, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.WorkflowIndexes(wf)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("the index gives %d leaves (%v), the back-links %d", len(got), err, len(want))
		}
		for _, after := range []uint64{0, want[255], want[len(want)-2]} {
			idx, _, err := l.WorkflowRange(ctx, wf, after, 1000)
			i, _ := slices.BinarySearch(want, after+1)
			if err != nil || !slices.Equal(idx, want[i:]) {
				t.Fatalf("after %d: %d leaves (%v), want %d", after, len(idx), err, len(want[i:]))
			}
		}
		count := uint64(len(want))
		raw, err := l.read.store.Record(ctx, wfCountKey(wf))
		if err != nil {
			t.Fatal(err)
		}
		page, err := l.read.store.Record(ctx, wfPageKey(wf, count/wfPageSize))
		if err != nil {
			t.Fatal(err)
		}
		tail := 8 * int(count%wfPageSize)
		if legacy {
			if len(raw) != 8 || len(page) != tail {
				t.Fatalf("legacy layout: a count record of %d bytes and a partial page of %d, want 8 and %d", len(raw), len(page), tail)
			}
			return
		}
		if count/wfPageSize > 1 && page != nil {
			t.Fatalf("page %d, not full, has a page record of %d bytes", count/wfPageSize, len(page))
		}
		tail = 8 * int(count%wfChunk)
		var sum wfSummary
		if len(raw) <= 8+tail || json.Unmarshal(raw[8+tail:], &sum) != nil || sum.First != want[0] || sum.LastAt == "" {
			t.Fatalf("a count record of %d bytes for %d leaves, want 8, the tail's %d and the summary (first %d)", len(raw), count, tail, want[0])
		}
	}
	testWfLegacy = true
	submit(w.l, 300)
	check(w.l, true)
	w.l.Close()
	testWfLegacy = false
	l, err := Open(w.dir, Options{Clock: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l
	check(l, true)
	submit(l, 50) // still in the page the legacy layout left partial
	check(l, false)
	submit(l, 250) // past its end: the page is written whole, a new tail begins
	check(l, false)
	compareState(t, l, w.replay())
}
