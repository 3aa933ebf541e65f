package ledger

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
)

// TestDelegatedWorkflow runs the seed scenario end to end through a real
// Badger ledger, checks every answer's proof, reopens, and replays.
func TestDelegatedWorkflow(t *testing.T) {
	w := newWorld(t, Options{})
	alice, planner, booker, leaf := newActor(t, "user:alice"), newActor(t, "agent:planner"), newActor(t, "agent:planner/booker"), newActor(t, "agent:planner/booker/leaf")
	w.enroll(alice)

	c := w.confirm(alice, "confirm_42c1", grant(planner, "wf_9f3a", []string{"airline_portal/account_123"},
		[]string{"purchase", "submit_form"}, []string{"step_2", "step_3"}, map[string]int64{"budget_usd": 800, "max_side_effects": 1}, 900))
	r := w.must(alice, c, authority.Accepted, "")
	w.checkProof(r)

	d := w.delegate(planner, "del_booker", "confirm_42c1", c.ScopeHash, grant(booker, "wf_9f3a", []string{"airline_portal/account_123"},
		[]string{"purchase"}, []string{"step_3"}, map[string]int64{"budget_usd": 742, "max_side_effects": 1}, 600))
	w.must(planner, d, authority.Accepted, "")

	p := w.pending(booker, "rcpt_1", "wf_9f3a", "del_booker", d.ScopeHash, "step_3", "purchase", "airline_portal/account_123",
		map[string]int64{"budget_usd": 742, "max_side_effects": 1})
	r = w.must(booker, p, authority.Accepted, "")
	w.checkProof(r)

	// Resubmitting the same bytes returns the first decision and appends nothing.
	_, raw, _ := statement.Sign(booker.priv, p)
	size := w.l.Head().Size
	again, err := w.l.Append(context.Background(), raw)
	if err != nil || !again.Duplicate || again.Index != r.Index || w.l.Head().Size != size {
		t.Fatalf("resubmission: %+v, %v (size %d -> %d)", again, err, size, w.l.Head().Size)
	}

	// A second purchase is over budget: denied, logged as a DENIAL.
	p2 := w.pending(booker, "rcpt_2", "wf_9f3a", "del_booker", d.ScopeHash, "step_3", "purchase", "airline_portal/account_123",
		map[string]int64{"budget_usd": 1, "max_side_effects": 0})
	den := w.must(booker, p2, authority.Denied, authority.LimitExceeded)
	w.checkProof(den)
	e, err := w.l.Entry(den.Index)
	if err != nil {
		t.Fatal(err)
	}
	dd, ok := e.Statement.(*statement.DenialDoc)
	if !ok || dd.ReasonCode != "limit_exceeded" || dd.StatementID != "rcpt_2" || dd.Workflow != "wf_9f3a" {
		t.Fatalf("denial entry: %+v", e.Statement)
	}

	// A depth-4 delegation is denied.
	d2 := w.delegate(booker, "del_leaf", "del_booker", d.ScopeHash, grant(leaf, "wf_9f3a", []string{"airline_portal/account_123"},
		[]string{"purchase"}, []string{"step_3"}, map[string]int64{"budget_usd": 700, "max_side_effects": 1}, 300))
	_ = d2
	// (booker is at depth 2; its delegate is depth 3 and allowed.)
	w.must(booker, d2, authority.Accepted, "")

	// A garbage submission is refused and nothing is logged.
	size = w.l.Head().Size
	if _, err := w.l.Append(context.Background(), []byte(`{"payloadType":"x"}`)); err == nil {
		t.Fatal("garbage accepted")
	} else {
		var de *authority.DecisionError
		if !errors.As(err, &de) || de.Code != authority.BadEnvelope {
			t.Fatalf("garbage: %v", err)
		}
	}
	if w.l.Head().Size != size {
		t.Fatal("a refused submission changed the log")
	}

	// The workflow's back-links list its entries in order.
	idx, err := w.l.WorkflowIndexes("wf_9f3a")
	if err != nil || len(idx) != 5 {
		t.Fatalf("workflow indexes %v, %v", idx, err)
	}

	// Replay reproduces the stored state exactly.
	replayed := w.replay()
	compareState(t, w.l, replayed)

	// Reopen: same head, proofs still good.
	head := w.l.Head()
	if err := w.l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(w.dir, Options{Clock: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l2
	if h := l2.Head(); h.Size != head.Size || h.Root != head.Root || !bytes.Equal(h.Checkpoint, head.Checkpoint) {
		t.Fatalf("head after reopen %+v, want %+v", h, head)
	}
	w.clock.Add(time.Second)
	p3 := w.pending(leaf, "rcpt_3", "wf_9f3a", "del_leaf", d2.ScopeHash, "step_3", "purchase", "airline_portal/account_123",
		map[string]int64{"budget_usd": 0, "max_side_effects": 0})
	r = w.must(leaf, p3, authority.Accepted, "")
	w.checkProof(r)
	proof, err := l2.ConsistencyProof(head.Size, r.Head.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := merkle.VerifyConsistency(head.Size, r.Head.Size, proof, head.Root, r.Head.Root); err != nil {
		t.Fatal(err)
	}
}

// compareState requires the ledger's stored state records to equal a replay's.
func compareState(t *testing.T, l *Ledger, replayed authority.MemStore) {
	t.Helper()
	stored, err := l.StateRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(replayed) {
		t.Errorf("stored state has %d records, replay %d", len(stored), len(replayed))
	}
	for k, v := range replayed {
		if !bytes.Equal(stored[k], v) {
			t.Errorf("record %s: stored %s, replay %s", k, stored[k], v)
		}
	}
}

func TestSecondOpenRefused(t *testing.T) {
	w := newWorld(t, Options{})
	_, err := Open(w.dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

func TestInitRefusesExisting(t *testing.T) {
	w := newWorld(t, Options{})
	w.l.Close()
	if _, err := Init(w.dir, testOrigin, InitOptions{}); err == nil {
		t.Fatal("Init over an existing ledger succeeded")
	}
}
