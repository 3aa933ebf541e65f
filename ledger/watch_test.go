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
