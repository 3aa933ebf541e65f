package replay_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/replay"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/statement"
)

// TestReplayApprovals: the timeline shows a held receipt with what it
// needed and who approved it and when, a rejected one, and flags the
// outcome of a held step that ran without approval.
func TestReplayApprovals(t *testing.T) {
	w := testlog.NewWorld(t, testlog.WorldOptions{})
	au := w.Author
	tick := func() { w.Clock.Add(3 * time.Second) }
	alice, bob := testlog.NewActor("user:alice"), testlog.NewActor("user:bob")
	agent := testlog.NewActor("agent:buyer")
	wf := "wf_ap"
	w.Enroll(alice, "p_alice")
	w.Enroll(bob, "p_bob")
	tick()
	g := testlog.NewGrant(agent, wf, []string{"shop/*"}, []string{"buy"}, nil, map[string]int64{"usd": 800}, 3600)
	g.Approvals = []scope.Rule{{RuleID: "big", Capabilities: []string{"buy"}, Above: map[string]int64{"usd": 100},
		Approvers: []string{"user:bob"}, Quorum: 1, TTLSeconds: 600}}
	w.Accept(alice, au.Confirm(alice, "c1", g))
	tick()
	approval := func(id, ref, decision string, p *statement.ReceiptDoc) *statement.ApprovalDoc {
		b, err := statement.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		return &statement.ApprovalDoc{Header: au.Header(bob, statement.Approval), ApprovalID: id, Workflow: wf, ReceiptRef: ref,
			ReceiptSHA256: hex.EncodeToString(sum[:]), Decision: decision, Reason: "looked at it"}
	}
	r1 := au.Pending(agent, "r1", "c1", "s1", "buy", "shop/tv", map[string]int64{"usd": 300})
	w.Accept(agent, r1)
	tick()
	w.Accept(bob, approval("a1", "r1", statement.DecisionApprove, r1))
	tick()
	w.Accept(agent, au.Outcome(agent, "o1", "r1", statement.ResultSuccess, map[string]int64{"usd": 300}))
	tick()
	r2 := au.Pending(agent, "r2", "c1", "s2", "buy", "shop/car", map[string]int64{"usd": 400})
	w.Accept(agent, r2)
	tick()
	w.Accept(bob, approval("a2", "r2", statement.DecisionReject, r2))
	tick()
	// r3 is held, and its step runs anyway: a violation.
	w.Accept(agent, au.Pending(agent, "r3", "c1", "s3", "buy", "shop/boat", map[string]int64{"usd": 200}))
	tick()
	w.Accept(agent, au.Outcome(agent, "o3", "r3", statement.ResultSuccess, map[string]int64{"usd": 200}))
	idx, err := w.L.WorkflowIndexes(wf)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Build(w.Prove(idx[len(idx)-1], true), w.VerifierKey(), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified {
		t.Fatalf("not verified: %v", rep.Failure)
	}
	held := map[string]*replay.Held{}
	for _, p := range rep.Pendings {
		if p.Held != nil {
			held[p.ID] = p.Held
		}
	}
	if h := held["r1"]; h == nil || h.State != "approved" || len(h.Answers) != 1 || !strings.HasPrefix(h.Answers[0], "user:bob approve (#") ||
		len(h.Needs) != 1 || h.Needs[0] != "1 of user:bob (rule big of c1)" {
		t.Errorf("r1: %+v", h)
	}
	if h := held["r2"]; h == nil || h.State != "rejected" || !strings.HasPrefix(h.Answers[0], "user:bob reject") {
		t.Errorf("r2: %+v", h)
	}
	if h := held["r3"]; h == nil || h.State != "held" {
		t.Errorf("r3: %+v", h)
	}
	var flagged bool
	for _, a := range rep.Attention {
		if a.Kind == replay.AttnApproval && strings.Contains(a.Text, "o3") && strings.Contains(a.Text, "r3") {
			flagged = true
		}
		if a.Kind == replay.AttnApproval && strings.Contains(a.Text, "o1 ") {
			t.Errorf("the approved step is flagged: %s", a.Text)
		}
	}
	if !flagged {
		t.Errorf("the unapproved outcome is not flagged: %+v", rep.Attention)
	}
	var text strings.Builder
	if err := rep.WriteText(&text, replay.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "html": string(rep.HTML())} {
		for _, want := range []string{"approved", "rejected", "user:bob approve (#", "1 of user:bob (rule big of c1)", "looked at it"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s page lacks %q", name, want)
			}
		}
	}
}
