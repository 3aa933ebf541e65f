package ledger

import (
	"slices"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
)

func TestWatchAndWorkflowAfter(t *testing.T) {
	w := newWorld(t, Options{})
	heads, stop := w.l.Watch()
	defer stop()
	alice, planner := newActor(t, "user:alice"), newActor(t, "agent:planner")
	w.enroll(alice)
	c := w.confirm(alice, "c1", grant(planner, "wf1", []string{"x/*"}, []string{"go"}, nil, nil, 900))
	r := w.must(alice, c, authority.Accepted, "")
	select {
	case h := <-heads:
		if h.Size < r.Head.Size-1 {
			t.Fatalf("watched head %d, committed %d", h.Size, r.Head.Size)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no head published")
	}
	p1 := w.must(planner, w.pending(planner, "p1", "wf1", "c1", c.ScopeHash, "s", "go", "x/a", nil), authority.Accepted, "")
	p2 := w.must(planner, w.pending(planner, "p2", "wf1", "c1", c.ScopeHash, "s", "go", "x/b", nil), authority.Accepted, "")
	got, err := w.l.WorkflowIndexesAfter("wf1", r.Index)
	if err != nil || !slices.Equal(got, []uint64{p1.Index, p2.Index}) {
		t.Fatalf("after %d: %v, %v", r.Index, got, err)
	}
	if got, _ := w.l.WorkflowIndexesAfter("wf1", p2.Index); len(got) != 0 {
		t.Fatalf("after the last: %v", got)
	}
}

// TestWatchWorkflow: a subscriber of one workflow is woken only by the
// commits of that workflow, with the workflow's new leaves; one that let a
// commit of its workflow go unread is told it missed it.
func TestWatchWorkflow(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	pa, pb := newActor(t, "agent:pa"), newActor(t, "agent:pb")
	ca := w.confirm(alice, "ca", grant(pa, "wf_a", []string{"x/*"}, []string{"go"}, nil, nil, 900))
	w.must(alice, ca, authority.Accepted, "")
	cb := w.confirm(alice, "cb", grant(pb, "wf_b", []string{"x/*"}, []string{"go"}, nil, nil, 900))
	w.must(alice, cb, authority.Accepted, "")
	heads, stop := w.l.WatchWorkflow("wf_a")
	defer stop()
	w.must(pb, w.pending(pb, "b1", "wf_b", "cb", cb.ScopeHash, "s", "go", "x/a", nil), authority.Accepted, "")
	select {
	case c := <-heads:
		t.Fatalf("a commit of wf_b woke a subscriber of wf_a: %+v", c.Indexes)
	case <-time.After(100 * time.Millisecond):
	}
	a1 := w.must(pa, w.pending(pa, "a1", "wf_a", "ca", ca.ScopeHash, "s", "go", "x/a", nil), authority.Accepted, "")
	select {
	case c := <-heads:
		if c.Missed || !slices.Equal(c.Indexes["wf_a"], []uint64{a1.Index}) {
			t.Fatalf("commit of wf_a: missed %v, indexes %v, want [%d]", c.Missed, c.Indexes["wf_a"], a1.Index)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no commit of wf_a delivered")
	}
	// Two commits while the subscriber does not read: the second replaces
	// the first and says so.
	w.must(pa, w.pending(pa, "a2", "wf_a", "ca", ca.ScopeHash, "s", "go", "x/a", nil), authority.Accepted, "")
	w.must(pa, w.pending(pa, "a3", "wf_a", "ca", ca.ScopeHash, "s", "go", "x/a", nil), authority.Accepted, "")
	if c := <-heads; !c.Missed {
		t.Fatalf("a replaced commit was not reported missed: %+v", c.Indexes)
	}
}
