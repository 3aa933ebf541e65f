package ledger

import (
	"context"
	"errors"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// batchOutcome is one submission's answer: a logged verdict and code, or
// a refusal's code.
type batchOutcome struct {
	verdict authority.Verdict
	code    authority.Code
}

// submitBatch submits the statements as one Batch (what POST
// /v1/entries/batch does) and returns each answer.
func (w *world) submitBatch(signers []*actor, sts []statement.Statement) []batchOutcome {
	w.t.Helper()
	var b Batch
	ps := make([]*Pending, len(sts))
	for i, st := range sts {
		if err := statement.Seal(st); err != nil {
			w.t.Fatal(err)
		}
		_, raw, err := statement.Sign(signers[i].priv, st)
		if err != nil {
			w.t.Fatal(err)
		}
		if ps[i], err = w.l.SubmitBatched(context.Background(), &b, raw); err != nil {
			w.t.Fatal(err)
		}
	}
	out := make([]batchOutcome, len(sts))
	for i, p := range ps {
		res, err := p.Wait(context.Background())
		var de *authority.DecisionError
		switch {
		case err == nil:
			out[i] = batchOutcome{res.Verdict, res.Code}
		case errors.As(err, &de):
			out[i] = batchOutcome{de.Verdict, de.Code}
		default:
			w.t.Fatalf("statement %d: %v", i, err)
		}
	}
	return out
}

// seqMismatchDenials counts the DENIALs of seq_mismatch in the log.
func (w *world) seqMismatchDenials() int {
	w.t.Helper()
	n := 0
	for i := uint64(0); i < w.l.Head().Size; i++ {
		e, err := w.l.Entry(i)
		if err != nil {
			w.t.Fatal(err)
		}
		if d, ok := e.Statement.(*statement.DenialDoc); ok && d.ReasonCode == string(authority.SeqMismatch) {
			n++
		}
	}
	return n
}

// TestBatchWithdrawsAfterDenial: in a batch, the statements of a key after
// one of its statements was denied carry seqs one too high; they are
// withdrawn (not decided, not logged), the other keys' statements are
// decided as usual, and signed again with the right seqs they are judged
// on their merits. No seq_mismatch DENIAL is logged. A seq that is wrong
// for another reason is still denied and logged.
func TestBatchWithdrawsAfterDenial(t *testing.T) {
	w := newWorld(t, Options{})
	alice, agent := newActor(t, "user:alice"), newActor(t, "agent:batch")
	w.enroll(alice)
	c := w.confirm(alice, "confirm_b", grant(agent, "wf_b", []string{"t/*"}, []string{"do"}, nil, map[string]int64{"budget": 10}, 900))
	w.must(alice, c, authority.Accepted, "")
	rcpt := func(id, target string, n int64) *statement.ReceiptDoc {
		return w.pending(agent, id, "wf_b", "confirm_b", c.ScopeHash, "s_"+id, "do", "t/"+target, map[string]int64{"budget": n})
	}

	// Entry 1 (budget 8 of 10 after 4) is denied; 2 and 3 follow it with
	// seqs one and two too high; alice's STOP in between is another key.
	p0 := rcpt("r0", "a", 4)
	p1 := rcpt("r1", "a", 8)
	p2 := rcpt("r2", "a", 3)
	stop := &statement.StopDoc{Header: w.header(alice, statement.Stop), RequestID: "stop_b", Workflow: "wf_b",
		StopScope: statement.StopStep, StepID: "s_elsewhere", TakeoverMode: "human", Reason: "hold one step"}
	p3 := rcpt("r3", "elsewhere", 1)
	p3.Target = "u/x" // out of the grant's targets
	got := w.submitBatch([]*actor{agent, agent, agent, alice, agent}, []statement.Statement{p0, p1, p2, stop, p3})
	want := []batchOutcome{
		{authority.Accepted, ""},
		{authority.Denied, authority.LimitExceeded},
		{authority.Refused, authority.Withdrawn},
		{authority.Accepted, ""},
		{authority.Refused, authority.Withdrawn},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %v, want %v", i, got[i], want[i])
		}
	}
	// Signed again with the seqs that follow the accepted ones, the
	// withdrawn statements are judged on their merits.
	agent.seq = p0.Seq
	p2.Header = w.header(agent, statement.Receipt)
	p3.Header = w.header(agent, statement.Receipt)
	got = w.submitBatch([]*actor{agent, agent}, []statement.Statement{p2, p3})
	if want := []batchOutcome{{authority.Accepted, ""}, {authority.Denied, authority.OutOfScope}}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("resent: %v, want %v", got, want)
	}
	if n := w.seqMismatchDenials(); n != 0 {
		t.Fatalf("%d seq_mismatch DENIALs in the log", n)
	}

	// A seq the batch cannot explain is denied and logged as ever: one
	// below the next (a replay of a used seq), and one further above the
	// next than the statements not accepted before it.
	agent.seq = p2.Seq // p3 was denied: the next seq is p2's + 1
	bad := rcpt("r4", "elsewhere", 1)
	bad.Target = "u/y"
	low := rcpt("r5", "a", 1)
	low.Seq = p2.Seq // used
	far := rcpt("r6", "a", 1)
	far.Seq = bad.Seq + 3 // two statements before it were not accepted, not three
	got = w.submitBatch([]*actor{agent, agent, agent}, []statement.Statement{bad, low, far})
	if want := []batchOutcome{{authority.Denied, authority.OutOfScope}, {authority.Denied, authority.SeqMismatch}, {authority.Denied, authority.SeqMismatch}}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("unexplained seqs: %v, want %v", got, want)
	}
	// Outside a batch a seq too high is denied seq_mismatch, as ever.
	agent.seq = bad.Seq
	alone := rcpt("r7", "a", 1)
	if res, err := w.submit(agent, alone); err != nil || res.Code != authority.SeqMismatch {
		t.Fatalf("a lone statement with a seq too high: %+v %v", res, err)
	}
	if n := w.seqMismatchDenials(); n != 3 {
		t.Fatalf("%d seq_mismatch DENIALs in the log, want 3", n)
	}
	// Replaying the log reproduces every decision (withdrawn ones were
	// never logged).
	w.replay()
}
