package ledger

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/storage"
)

// TestWorkflowList: 70 workflows (three pages of the list), begun in
// batches of one and of many, are listed newest first, a page at a time
// from every kind of starting point, each with its owner, agents, leaves,
// latest index and DENIALs; the list reads the same after a reopen, and a
// new workflow then joins it on the partial page the store holds.
func TestWorkflowList(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	var wfs []string
	for i := 0; i < 70; i++ {
		wf := fmt.Sprintf("wf_%02d", i)
		a := newActor(t, "agent:"+wf)
		c := w.confirm(alice, "c_"+wf, grant(a, wf, []string{"t/*"}, []string{"act"}, nil, nil, 86400))
		w.must(alice, c, authority.Accepted, "")
		w.must(a, w.pending(a, "r_"+wf, wf, c.ConfirmID, c.ScopeHash, "s", "act", "t/x", nil), authority.Accepted, "")
		if i%10 == 3 {
			w.must(a, w.pending(a, "bad_"+wf, wf, c.ConfirmID, c.ScopeHash, "s", "act", "u/x", nil), authority.Denied, authority.OutOfScope)
		}
		if i == 5 {
			b := newActor(t, "agent:sub")
			d := w.delegate(a, "d_"+wf, c.ConfirmID, c.ScopeHash, grant(b, wf, []string{"t/x"}, []string{"act"}, nil, nil, 3600))
			w.must(a, d, authority.Accepted, "")
		}
		wfs = append(wfs, wf)
	}
	check := func(l *Ledger, wfs []string) {
		t.Helper()
		ctx := context.Background()
		all, total, err := l.WorkflowList(ctx, 0, MaxListAnswer, time.Now())
		if err != nil || total != uint64(len(wfs)) || len(all) != len(wfs) {
			t.Fatalf("the whole list: %d of %d (%v), want %d", len(all), total, err, len(wfs))
		}
		for i, got := range all {
			wf := wfs[len(wfs)-1-i]
			if got.Workflow != wf || got.Position != uint64(len(wfs)-1-i) {
				t.Fatalf("list[%d] = %s at %d, want %s", i, got.Workflow, got.Position, wf)
			}
			n := 0
			if _, err := fmt.Sscanf(wf, "wf_%d", &n); err != nil {
				continue // wf_late
			}
			wantEntries, wantDenials, wantAgents := uint64(2), uint64(0), []string{"agent:" + wf}
			if n%10 == 3 {
				wantEntries, wantDenials = 3, 1
			}
			if n == 5 {
				wantEntries, wantAgents = 3, append(wantAgents, "agent:sub")
			}
			if got.Entries != wantEntries || got.Denials != wantDenials || !slices.Equal(got.Agents, wantAgents) ||
				got.Owner != "user:alice" || got.Last <= got.First || got.LastAt == "" || got.Stop != nil {
				t.Fatalf("%s: %+v; want %d entries, %d denials, agents %v, owner user:alice", wf, got, wantEntries, wantDenials, wantAgents)
			}
			if idx, err := l.WorkflowIndexes(wf); err != nil || idx[0] != got.First || idx[len(idx)-1] != got.Last {
				t.Fatalf("%s: first %d, last %d; the index says %v (%v)", wf, got.First, got.Last, idx, err)
			}
		}
		for _, limit := range []int{1, 7, 32, 33} {
			var paged []string
			for before := uint64(0); ; {
				page, _, err := l.WorkflowList(ctx, before, limit, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range page {
					paged = append(paged, p.Workflow)
				}
				if last := page[len(page)-1].Position; last == 0 {
					break
				} else {
					before = last
				}
			}
			want := slices.Clone(wfs)
			slices.Reverse(want)
			if !slices.Equal(paged, want) {
				t.Fatalf("paged by %d: %v", limit, paged)
			}
		}
		if page, _, err := l.WorkflowList(ctx, 40, 5, time.Now()); err != nil || len(page) != 5 || page[0].Position != 39 {
			t.Fatalf("before 40: %+v, %v", page, err)
		}
	}
	check(w.l, wfs)
	compareState(t, w.l, w.replay())
	w.l.Close()
	l, err := Open(w.dir, Options{Clock: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l
	check(l, wfs)
	a := newActor(t, "agent:late")
	c := w.confirm(alice, "c_late", grant(a, "wf_late", []string{"t/*"}, []string{"act"}, nil, nil, 86400))
	w.must(alice, c, authority.Accepted, "")
	check(l, append(wfs, "wf_late"))
}

// countingStore counts the records and leaves read through it.
type countingStore struct {
	storage.Store
	records atomic.Int64
}

func (c *countingStore) Record(ctx context.Context, key string) ([]byte, error) {
	c.records.Add(1)
	return c.Store.Record(ctx, key)
}

func (c *countingStore) Records(ctx context.Context, fn func(key string, value []byte) error) error {
	return c.Store.Records(ctx, func(key string, value []byte) error {
		c.records.Add(1)
		return fn(key, value)
	})
}

func (c *countingStore) Leaf(ctx context.Context, index uint64) ([]byte, error) {
	c.records.Add(1)
	return c.Store.Leaf(ctx, index)
}

// TestWorkflowListCostBounded: a page of the list reads as many records
// whatever the number of workflows and leaves before it (the newest page,
// and a page deep in the list), so its cost does not grow with history.
func TestWorkflowListCostBounded(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	begin := func(from, to int) {
		for i := from; i < to; i++ {
			wf := fmt.Sprintf("wf_%03d", i)
			a := newActor(t, "agent:"+wf)
			c := w.confirm(alice, "c_"+wf, grant(a, wf, []string{"t/*"}, []string{"act"}, nil, nil, 86400))
			w.must(alice, c, authority.Accepted, "")
			w.must(a, w.pending(a, "r_"+wf, wf, c.ConfirmID, c.ScopeHash, "s", "act", "t/x", nil), authority.Accepted, "")
		}
	}
	// The reads go through the ledger's readers part (readers.go).
	cs := &countingStore{Store: w.l.read.store}
	w.l.read.store = cs
	reads := func(before uint64) int64 {
		t.Helper()
		n := cs.records.Load()
		page, _, err := w.l.WorkflowList(context.Background(), before, 10, time.Now())
		if err != nil || len(page) != 10 {
			t.Fatalf("a page of 10 before %d: %d, %v", before, len(page), err)
		}
		return cs.records.Load() - n
	}
	begin(0, 40)
	newest, deep := reads(0), reads(20)
	if newest == 0 || deep == 0 {
		t.Fatalf("a page read %d and %d records: the count does not see the list's reads", newest, deep)
	}
	begin(40, 200)
	if n := reads(0); n != newest {
		t.Fatalf("the newest page read %d records with 40 workflows, %d with 200", newest, n)
	}
	if n := reads(20); n != deep {
		t.Fatalf("the page before position 20 read %d records with 40 workflows, %d with 200", deep, n)
	}
	t.Logf("a page of 10 reads %d records (newest) and %d (deep), with 40 workflows or 200", newest, deep)
}
