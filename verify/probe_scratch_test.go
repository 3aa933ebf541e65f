package verify_test

import (
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/verify"
)

func show(t *testing.T, b *verify.Bundle, vkey string) *verify.Verdict {
	raw, _ := b.Marshal()
	b2, err := verify.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyBundle(b2, vkey)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	v.WriteText(&sb)
	t.Log(sb.String())
	return v
}

func TestProbeStandaloneDenial(t *testing.T) {
	w := testlog.NewWorld(t, testlog.WorldOptions{})
	s := w.Standard()
	// booker, bound in wf_9f3a, submits a receipt in another workflow where it holds nothing.
	st := w.Author.Pending(s.Booker, "r9", "d3", "step_2", "purchase", testlog.StdTarget, nil)
	st.Workflow = "wf_other"
	res := w.Submit(s.Booker, st)
	t.Logf("%s %s %s", res.Verdict, res.Code, res.Reason)
	show(t, w.Prove(res.Index, false), w.VerifierKey())
	// bob confirms into alice's workflow.
	c := w.Author.Confirm(s.Bob, "c9", testlog.NewGrant(testlog.NewActor("agent:x"), testlog.StdWorkflow, []string{"a"}, []string{"b"}, nil, nil, 60))
	res = w.Submit(s.Bob, c)
	t.Logf("%s %s %s", res.Verdict, res.Code, res.Reason)
	show(t, w.Prove(res.Index, false), w.VerifierKey())
	// booker STOPs another workflow (bob's).
	w.Confirm(s.Bob, "cb", testlog.NewGrant(testlog.NewActor("agent:y"), "wf_bob", []string{"a"}, []string{"b"}, nil, nil, 600))
	res = w.Submit(s.Booker, w.Author.StopChain(s.Booker, "s9", "wf_bob", "x"))
	t.Logf("%s %s %s", res.Verdict, res.Code, res.Reason)
	show(t, w.Prove(res.Index, false), w.VerifierKey())
	_ = authority.Accepted
}
