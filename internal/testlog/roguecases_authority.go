package testlog

import (
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// RogueAuthorityCases are logs whose operator admitted what DESIGN
// version 3 forbids (issue 15, items 2, 3, 5 and 6): the verifier and the
// audit re-run the decision function and catch each at its entry.
func RogueAuthorityCases() []RogueCase {
	return []RogueCase{{
		Name:    "accepted-squatted-principal-name",
		Attack:  "alice grants a throwaway key under the name user:carol, a person's name, before carol is enrolled, so the admin could never enrol her; the log accepts it",
		Defence: "agent names start with agent: and principal names never do (identity_conflict, DESIGN §1)",
		Verify:  "identity_conflict", Audit: "identity_conflict", AuditCheck: "decision",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			squat := NewActor("user:carol")
			bad := r.Accept(s.Alice, r.Author.Confirm(s.Alice, "c_squat", NewGrant(squat, "wf_carol",
				[]string{"airline_portal/*"}, []string{"purchase"}, nil, nil, 600)))
			return Forged{R: r, Bad: bad}
		},
	}, {
		Name:    "accepted-transfer-at-max-depth",
		Attack:  "at max_depth, the coordinator hands a new agent its whole grant, narrowed only by a principals set that can restrict nobody (a depth-3 grant never delegates); the log accepts it",
		Defence: "at max_depth a principals set does not count as narrowing: the delegation is a transfer (equal_scope, DESIGN §3)",
		Verify:  "equal_scope", Audit: "equal_scope", AuditCheck: "decision",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			r.Accept(s.Alice, r.Author.Resume(s.Alice, "u1", StdWorkflow, "s1"))
			clone := NewActor("agent:planner/coordinator/clone")
			g := NewGrant(clone, StdWorkflow, []string{StdTarget}, []string{"purchase", "submit_form"}, []string{"step_2", "step_3"},
				map[string]int64{"budget_usd": 500, "max_side_effects": 2}, 1200)
			g.Scope.Principals = []string{"agent:planner/coordinator/clone/*"}
			bad := r.Accept(s.Coordinator, r.Author.Delegate(s.Coordinator, "d_clone", "d2", g))
			return Forged{R: r, Bad: bad}
		},
	}, {
		Name:    "accepted-stop-that-changes-nothing",
		Attack:  "alice STOPs her workflow again while her first chain STOP is in force; the log accepts it, and every such STOP is one more that later decisions would have to read",
		Defence: "a STOP by a signer who already has one in force on the same scope and step is already_stopped (DESIGN §4, Bounded cost)",
		Verify:  "already_stopped", Audit: "already_stopped", AuditCheck: "decision",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			bad := r.Accept(s.Alice, r.Author.StopChain(s.Alice, "s1_again", StdWorkflow, "stop, again"))
			return Forged{R: r, Bad: bad}
		},
	}, {
		Name:    "denial-of-a-logged-denial",
		Attack:  "someone with no key posts the log's own DENIAL back to the append path, and the log records a DENIAL of it (as a ledger before DESIGN version 3 did: duplicate_id), growing without any signer",
		Defence: "an envelope signed by the log's DENIAL or checkpoint key is never a submission: it is refused at step 2 and not logged (bad_signature, DESIGN §1)",
		Verify:  "bad_signature", Audit: "bad_signature",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			leaf, _, err := statement.ParseLeaf(r.Leaf(s.Denial))
			if err != nil {
				tb.Fatal(err)
			}
			p, err := sign.ParseEnvelope(leaf.Envelope)
			if err != nil {
				tb.Fatal(err)
			}
			bad := r.DenyForged(p.Envelope, authority.DuplicateID, "DENIAL "+authority.DenialID(s.Denial)+": id already used", Forgery{})
			return Forged{R: r, Bad: bad}
		},
	}}
}
