package verify_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// approvalWorld logs a held receipt approved by bob and one rejected by
// him, then an outcome of each, and returns the world and its whole
// workflow bundle.
func approvalWorld(t *testing.T) (*testlog.World, *verify.Bundle) {
	w := testlog.NewWorld(t, testlog.WorldOptions{})
	au := w.Author
	tick := func() { w.Clock.Add(2 * time.Second) }
	alice, bob, agent := testlog.NewActor("user:alice"), testlog.NewActor("user:bob"), testlog.NewActor("agent:buyer")
	w.Enroll(alice, "p_alice")
	w.Enroll(bob, "p_bob")
	g := testlog.NewGrant(agent, "wf_v", []string{"shop/*"}, []string{"buy"}, nil, map[string]int64{"usd": 800}, 3600)
	g.Approvals = []scope.Rule{{RuleID: "big", Capabilities: []string{"buy"}, Above: map[string]int64{"usd": 100},
		Approvers: []string{"user:bob"}, Quorum: 1, TTLSeconds: 600}}
	w.Accept(alice, au.Confirm(alice, "c1", g))
	answer := func(id string, p *statement.ReceiptDoc, decision string) {
		b, _ := statement.Marshal(p)
		sum := sha256.Sum256(b)
		w.Accept(bob, &statement.ApprovalDoc{Header: au.Header(bob, statement.Approval), ApprovalID: id, Workflow: "wf_v",
			ReceiptRef: p.ReceiptID, ReceiptSHA256: hex.EncodeToString(sum[:]), Decision: decision})
	}
	for i, decision := range []string{statement.DecisionApprove, statement.DecisionReject} {
		tick()
		p := au.Pending(agent, "r"+string(rune('1'+i)), "c1", "s", "buy", "shop/tv", map[string]int64{"usd": 300})
		w.Accept(agent, p)
		tick()
		answer("a"+string(rune('1'+i)), p, decision)
		tick()
		result := statement.ResultSuccess
		if decision == statement.DecisionReject {
			result = statement.ResultFailure
		}
		out := au.Outcome(agent, "o"+string(rune('1'+i)), p.ReceiptID, result, nil)
		w.Accept(agent, out)
	}
	idx, err := w.L.WorkflowIndexes("wf_v")
	if err != nil {
		t.Fatal(err)
	}
	return w, w.Prove(idx[len(idx)-1], true)
}

// TestBundleApprovals: the verifier re-runs approvals (an "approvals
// re-run" check naming each held receipt's fate), and a forged bundle
// that drops an APPROVAL or a reject is INVALID.
func TestBundleApprovals(t *testing.T) {
	w, b := approvalWorld(t)
	v, err := verify.VerifyBundle(b, w.VerifierKey())
	if err != nil || !v.Valid {
		t.Fatalf("honest bundle: %v %+v", err, v.Failure())
	}
	var approvals *verify.Check
	for i := range v.Checks {
		if v.Checks[i].Name == "approvals re-run" {
			approvals = &v.Checks[i]
		}
	}
	if approvals == nil || len(approvals.Checks) != 2 || !strings.HasPrefix(approvals.Checks[0].Detail, "approved") ||
		!strings.HasPrefix(approvals.Checks[1].Detail, "rejected") {
		t.Fatalf("approvals check: %+v", approvals)
	}
	for _, drop := range []string{"a1", "a2"} {
		forged := *b
		forged.Entries = nil
		for _, be := range b.Entries {
			if e, err := w.L.Entry(be.Index); err == nil && e.Statement.ID() == drop {
				continue
			}
			forged.Entries = append(forged.Entries, be)
		}
		if len(forged.Entries) != len(b.Entries)-1 {
			t.Fatalf("did not drop %s", drop)
		}
		v, err := verify.VerifyBundle(&forged, w.VerifierKey())
		if err != nil {
			t.Fatal(err)
		}
		if v.Valid {
			t.Errorf("a bundle without APPROVAL %s verified", drop)
		}
	}
}
