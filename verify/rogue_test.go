package verify_test

// The verifier does not trust the ledger. A testlog.Rogue log accepts
// whatever it is given and denies whatever it is told to, and signs it all
// genuinely with the log key: every signature, proof and back-link in its
// bundles is right; only its decisions are wrong. Each bundle below must
// fail in the decisions re-run, at the entry the log decided wrongly, and
// name the rule it broke.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// cast is the standard scenario's actors on a Rogue, with grants c1, d2
// (depth 2) and d3 (depth 3) accepted and nothing else yet.
type cast struct {
	r                                        *testlog.Rogue
	au                                       *testlog.Author
	alice, bob, planner, coordinator, booker *testlog.Actor
}

func newCast(t *testing.T) *cast {
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	c := &cast{r: r, au: r.Author,
		alice: testlog.NewActor("user:alice"), bob: testlog.NewActor("user:bob"),
		planner: testlog.NewActor("agent:planner"), coordinator: testlog.NewActor("agent:planner/coordinator"),
		booker: testlog.NewActor("agent:planner/coordinator/booker")}
	r.Accept(r.Admin, c.au.Enroll(r.Admin, c.alice, "p_alice"))
	r.Accept(r.Admin, c.au.Enroll(r.Admin, c.bob, "p_bob"))
	r.Accept(c.alice, c.au.Confirm(c.alice, "c1", c1Grant(c.planner)))
	c.tick()
	r.Accept(c.planner, c.au.Delegate(c.planner, "d2", "c1", testlog.NewGrant(c.coordinator, testlog.StdWorkflow,
		[]string{testlog.StdTarget}, []string{"purchase", "submit_form"}, []string{"step_2", "step_3"},
		map[string]int64{"budget_usd": 500, "max_side_effects": 2}, 1800)))
	c.tick()
	r.Accept(c.coordinator, c.au.Delegate(c.coordinator, "d3", "d2", testlog.NewGrant(c.booker, testlog.StdWorkflow,
		[]string{testlog.StdTarget}, []string{"purchase"}, []string{"step_2"},
		map[string]int64{"budget_usd": 300, "max_side_effects": 1}, 900)))
	c.tick()
	return c
}

func c1Grant(to *testlog.Actor) statement.Grant {
	return testlog.NewGrant(to, testlog.StdWorkflow, []string{"airline_portal/*"}, []string{"purchase", "submit_form"}, nil,
		map[string]int64{"budget_usd": 800, "max_side_effects": 2}, 3600)
}

func (c *cast) tick() { c.r.Clock.Add(5 * time.Second) }

// pending is the booker's pending receipt under d3 with the given budget.
func (c *cast) pending(id, target string, budget int64) *statement.ReceiptDoc {
	return c.au.Pending(c.booker, id, "d3", "step_2", "purchase", target, map[string]int64{"budget_usd": budget, "max_side_effects": 0})
}

func TestRogueDecisionsAreCaught(t *testing.T) {
	type built struct {
		bad   uint64 // the wrongly decided entry
		whole bool   // prove the whole workflow rather than up to bad
	}
	cases := []struct {
		name  string
		build func(c *cast) built
		rule  string // the code the re-run names
		msg   string // and a phrase of its message
	}{
		{"pending receipt after a REVOKE of its grant", func(c *cast) built {
			c.r.Accept(c.coordinator, c.au.Revoke(c.coordinator, "rv1", "d3", "no longer needed"))
			c.tick()
			p := c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 10))
			c.r.Accept(c.booker, c.au.Outcome(c.booker, "r1-out", "r1", "success", nil))
			return built{bad: p, whole: true}
		}, "revoked", "revoked by rv1"},
		{"receipt after a REVOKE of an ancestor", func(c *cast) built {
			c.r.Accept(c.alice, c.au.Revoke(c.alice, "rv1", "c1", "stop everything"))
			c.tick()
			return built{bad: c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 10))}
		}, "revoked", "c1 was revoked"},
		{"equal-scope DELEGATE", func(c *cast) built {
			g := c1Grant(testlog.NewActor("agent:planner/twin"))
			g.TTLSeconds = 1800   // neither time...
			g.Limits["extra"] = 5 // ...nor an added limit makes a child narrower
			return built{bad: c.r.Accept(c.planner, c.au.Delegate(c.planner, "d2b", "c1", g))}
		}, "equal_scope", "against parent c1"},
		{"widening DELEGATE", func(c *cast) built {
			g := c1Grant(testlog.NewActor("agent:planner/wide"))
			g.Scope.Targets = []string{"*"}
			return built{bad: c.r.Accept(c.planner, c.au.Delegate(c.planner, "d2w", "c1", g))}
		}, "widening", "against parent c1"},
		{"DELEGATE raising a limit", func(c *cast) built {
			g := testlog.NewGrant(testlog.NewActor("agent:planner/coordinator/greedy"), testlog.StdWorkflow,
				[]string{testlog.StdTarget}, []string{"purchase"}, []string{"step_2"}, map[string]int64{"budget_usd": 501, "max_side_effects": 1}, 60)
			return built{bad: c.r.Accept(c.coordinator, c.au.Delegate(c.coordinator, "d3g", "d2", g))}
		}, "limit_widened", "budget_usd"},
		{"depth-4 grant", func(c *cast) built {
			g := testlog.NewGrant(testlog.NewActor("agent:planner/coordinator/booker/sub"), testlog.StdWorkflow,
				[]string{testlog.StdTarget}, []string{"purchase"}, []string{"step_2"}, map[string]int64{"budget_usd": 100, "max_side_effects": 1}, 300)
			return built{bad: c.r.Accept(c.booker, c.au.Delegate(c.booker, "d4", "d3", g))}
		}, "depth_exceeded", "depth 4"},
		{"receipt outside its scope", func(c *cast) built {
			return built{bad: c.r.Accept(c.booker, c.pending("r1", "airline_portal/account_999", 10))}
		}, "out_of_scope", "airline_portal/account_999"},
		{"receipt for a step outside its scope", func(c *cast) built {
			return built{bad: c.r.Accept(c.booker, c.au.Pending(c.booker, "r1", "d3", "step_3", "purchase", testlog.StdTarget,
				map[string]int64{"budget_usd": 1, "max_side_effects": 0}))}
		}, "out_of_scope", "step_3"},
		{"receipt after expiry", func(c *cast) built {
			c.r.Clock.Add(901 * time.Second) // d3 lives 900 s
			return built{bad: c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 10))}
		}, "expired", "d3 expired"},
		{"DELEGATE spliced from another chain", func(c *cast) built {
			// bob's grant in his own workflow, whose scope hash the
			// coordinator's DELEGATE claims as its parent's.
			c.r.Accept(c.bob, c.au.Confirm(c.bob, "c_bob", testlog.NewGrant(testlog.NewActor("agent:bob"), "wf_bob",
				[]string{"airline_portal/*"}, []string{"purchase"}, nil, nil, 3600)))
			d := c.au.Delegate(c.coordinator, "d3s", "d2", testlog.NewGrant(testlog.NewActor("agent:planner/coordinator/spliced"),
				testlog.StdWorkflow, []string{testlog.StdTarget}, []string{"purchase"}, []string{"step_2"},
				map[string]int64{"budget_usd": 100, "max_side_effects": 1}, 300))
			d.ParentScopeHash = c.au.Grant("c_bob").ScopeHash
			return built{bad: c.r.Accept(c.coordinator, d)}
		}, "scope_hash_mismatch", "parent_scope_hash"},
		{"receipt with another grant's scope_hash", func(c *cast) built {
			p := c.pending("r1", testlog.StdTarget, 10)
			p.ScopeHash = c.au.Grant("d2").ScopeHash
			return built{bad: c.r.Accept(c.booker, p)}
		}, "scope_hash_mismatch", "scope_hash"},
		{"receipt over budget", func(c *cast) built {
			c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 250))
			c.tick()
			return built{bad: c.r.Accept(c.booker, c.pending("r2", testlog.StdTarget, 100))}
		}, "limit_exceeded", "would bring d3 to 350 of its 300"},
		{"receipt reserving too little", func(c *cast) built {
			return built{bad: c.r.Accept(c.booker, c.au.Pending(c.booker, "r1", "d3", "step_2", "purchase", testlog.StdTarget,
				map[string]int64{"budget_usd": 10}))}
		}, "reserve_missing", "max_side_effects"},
		{"receipt after a chain STOP", func(c *cast) built {
			c.r.Accept(c.alice, c.au.StopChain(c.alice, "s1", testlog.StdWorkflow, "halt"))
			c.tick()
			return built{bad: c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 10))}
		}, "workflow_stopped", "stopped by s1"},
		{"RESUME by an agent of its owner's STOP", func(c *cast) built {
			c.r.Accept(c.alice, c.au.StopChain(c.alice, "s1", testlog.StdWorkflow, "halt"))
			c.tick()
			return built{bad: c.r.Accept(c.booker, c.au.Resume(c.booker, "rs1", testlog.StdWorkflow, "s1"))}
		}, "not_authorized", "s1 may be lifted only by"},
		{"outcome written by another key", func(c *cast) built {
			c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 10))
			c.tick()
			o := c.au.Outcome(c.booker, "r1-out", "r1", "success", nil)
			c.booker.Seq--
			o.Actor, o.Seq = c.coordinator.Name, c.coordinator.Seq+1
			c.coordinator.Seq++
			return built{bad: c.r.Accept(c.coordinator, o)}
		}, "not_grantee", "only its signer records the outcome"},
		{"CONFIRM by an agent", func(c *cast) built {
			return built{bad: c.r.Accept(c.planner, c.au.Confirm(c.planner, "c_agent", testlog.NewGrant(testlog.NewActor("agent:x"),
				testlog.StdWorkflow, []string{"a"}, []string{"b"}, nil, nil, 60)))}
		}, "not_principal", "only an enrolled principal"},
		{"DENIAL whose reason_code is wrong", func(c *cast) built {
			c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 250))
			c.tick()
			return built{bad: c.r.Deny(c.booker, c.pending("r2", testlog.StdTarget, 100), authority.OutOfScope)}
		}, "limit_exceeded", "reason_code out_of_scope, but the decision function says limit_exceeded"},
		{"DENIAL of a statement that should have been accepted", func(c *cast) built {
			return built{bad: c.r.Deny(c.booker, c.pending("r1", testlog.StdTarget, 100), authority.LimitExceeded)}
		}, "limit_exceeded", "unjustified: RECEIPT r1 would be accepted"},
		{"DENIAL of an envelope that should have been refused", func(c *cast) built {
			env := c.r.SignAccept(c.booker, c.pending("r1", testlog.StdTarget, 100))
			c.booker.Seq--
			env.Signatures[0].Sig = env.Signatures[0].Sig[:10] + flipB64(env.Signatures[0].Sig[10]) + env.Signatures[0].Sig[11:]
			return built{bad: c.r.DenyEnvelope(env, authority.LimitExceeded, "forged")}
		}, "bad_signature", "should not have been logged"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCast(t)
			got := tc.build(c)
			// Before the bad entry the log is honest and its bundles verify.
			mustVerify(t, c.r.Bundle(got.bad-1, false), c.r.VerifierKey())
			b := c.r.Bundle(got.bad, got.whole)
			if !slicesContain(entryIndexes(b), got.bad) {
				t.Fatalf("bundle %v lacks entry %d", entryIndexes(b), got.bad)
			}
			v, err := check(t, b, c.r.VerifierKey())
			if err != nil {
				t.Fatal(err)
			}
			top, leaf := topFailure(v)
			if top == nil || top.Name != cDecisions {
				t.Fatalf("first failed check is %v, want %q:\n%s", top, cDecisions, text(v))
			}
			// Every check before it passed: signatures, proofs, links are right.
			for _, ch := range v.Checks[:len(v.Checks)-1] {
				if !ch.OK {
					t.Errorf("check %q failed too", ch.Name)
				}
			}
			if leaf.Index == nil || *leaf.Index != got.bad || !strings.HasPrefix(leaf.Name, fmt.Sprintf("#%d ", got.bad)) {
				t.Errorf("failure names %q (index %v), want entry %d:\n%s", leaf.Name, leaf.Index, got.bad, text(v))
			}
			if !strings.Contains(leaf.Detail, tc.rule) || !strings.Contains(leaf.Detail, tc.msg) {
				t.Errorf("failure detail %q does not name rule %q and %q", leaf.Detail, tc.rule, tc.msg)
			}
			out := text(v)
			if !strings.Contains(out, fmt.Sprintf("FAIL #%d ", got.bad)) || !strings.Contains(out, tc.rule) {
				t.Errorf("text verdict does not show the failing entry and rule:\n%s", out)
			}
		})
	}
}

func slicesContain(s []uint64, x uint64) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// flipB64 changes one base64 character into another.
func flipB64(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func TestRogueCheckpointsAreCaught(t *testing.T) {
	c := newCast(t)
	p := c.r.Accept(c.booker, c.pending("r1", testlog.StdTarget, 10))
	honest := c.r.Bundle(p, false)
	mustVerify(t, honest, c.r.VerifierKey())

	// Another log under the same origin, with its own key, holding the very
	// same leaves: its proofs and checkpoint are right for its tree.
	otherKey := testlog.NewActorSeed(testlog.Origin, "another log")
	other := testlog.RogueFromLeaves(t, testlog.Origin, otherKey, c.r.Leaves())
	// A third log with different content.
	third := testlog.NewRogue(t, testlog.RogueOptions{LogKey: otherKey})
	testlog.Standard(third)

	stranger := testlog.NewActor("mallory")
	cases := []struct {
		name string
		b    *verify.Bundle
		msg  string
	}{
		{"entry proven against another log's checkpoint", other.Bundle(p, false), "no signature by " + testlog.Origin},
		{"another log's checkpoint over different leaves", withCheckpoint(honest, string(third.Checkpoint())), "no signature by " + testlog.Origin},
		{"checkpoint signed by a key other than the log's", c.r.BundleWith(p, entryIndexes(honest), c.r.Size(),
			c.r.CheckpointSignedBy(stranger.NoteSigner(testlog.Origin))), "no signature by " + testlog.Origin},
		{"checkpoint signed by the admin key", c.r.BundleWith(p, entryIndexes(honest), c.r.Size(),
			c.r.CheckpointSignedBy(c.r.Admin.NoteSigner(testlog.Origin))), "no signature by " + testlog.Origin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := check(t, tc.b, c.r.VerifierKey())
			if err != nil {
				t.Fatal(err)
			}
			top, _ := topFailure(v)
			if top == nil || top.Name != cCheckpoint || !strings.Contains(top.Detail, tc.msg) {
				t.Fatalf("want %q failing with %q:\n%s", cCheckpoint, tc.msg, text(v))
			}
			if len(v.Checks) != 1 {
				t.Errorf("checks went on after the checkpoint failed: %d", len(v.Checks))
			}
		})
	}
	// With the other log's key, the other log's bundle is proven, but its
	// GENESIS names this log's key: not the log the auditor asked about.
	v, err := check(t, other.Bundle(p, false), other.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if top, _ := topFailure(v); top == nil || top.Name != cStructure || !strings.Contains(top.Detail, "GENESIS log_key") {
		t.Errorf("other log's bundle under its own key: want a structure failure naming GENESIS log_key:\n%s", text(v))
	}
}

// TestRogueHiddenHistoryIsLeftToAudit pins a limit of any bundle: the
// back-links are the log's own claim, committed to by the checkpoint. A log
// that forges a leaf's prev_in_workflow can start a workflow's chain anew
// after a STOP and hide the STOP from a bundle. The verdict lists this
// among what it leaves to a whole-log audit, and replaying the whole log
// (custody audit) catches it.
func TestRogueHiddenHistoryIsLeftToAudit(t *testing.T) {
	c := newCast(t)
	c.r.Accept(c.alice, c.au.StopChain(c.alice, "s1", testlog.StdWorkflow, "halt"))
	c.tick()
	// A second CONFIRM of the stopped workflow, on a chain of its own.
	env := c.r.SignAccept(c.alice, c.au.Confirm(c.alice, "c2", c1Grant(testlog.NewActor("agent:second"))))
	c2 := c.r.AppendForged(env, nil, 2)
	v, err := check(t, c.r.BundleOf(c2, []uint64{0, 1, 2, c2}), c.r.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if !v.Valid {
		t.Fatalf("the forged chain is caught by the bundle after all; update this test and the verdict's notes:\n%s", text(v))
	}
	found := false
	for _, n := range v.LeftToAudit {
		found = found || strings.Contains(n, "back-links")
	}
	if !found {
		t.Errorf("the verdict does not leave back-link completeness to the audit: %q", v.LeftToAudit)
	}
	// The honest bundle of the STOP, which holds the whole chain, still verifies...
	mustVerify(t, c.r.Bundle(c2-1, false), c.r.VerifierKey())
	// ...and a replay of the whole log catches the forged link.
	e := authority.New(authority.MemStore{})
	var rerr error
	for i, l := range c.r.Leaves() {
		if _, rerr = e.Replay(uint64(i), l); rerr != nil {
			break
		}
	}
	if rerr == nil || !strings.Contains(rerr.Error(), "workflow_stopped") {
		t.Errorf("whole-log replay: %v, want workflow_stopped", rerr)
	}
}

// TestStandaloneDenials: a DENIAL that joins no workflow comes with the
// trust chain alone. Its reason may rest on a workflow or a key binding
// elsewhere; the verifier notes that instead of calling an honest ledger
// a liar. (These failed before authority's partial view learned it.)
func TestStandaloneDenials(t *testing.T) {
	w := newStandardWorld(t)
	s := w.s
	// The booker writes into a workflow where it holds nothing.
	st := w.Author.Pending(s.Booker, "r9", "d3", "step_2", "purchase", testlog.StdTarget, nil)
	st.Workflow = "wf_other"
	mismatch := w.Must(s.Booker, st, authority.Denied, authority.WorkflowMismatch)
	// bob CONFIRMs into alice's workflow.
	owned := w.Must(s.Bob, w.Author.Confirm(s.Bob, "c9", testlog.NewGrant(testlog.NewActor("agent:x"),
		testlog.StdWorkflow, []string{"a"}, []string{"b"}, nil, nil, 60)), authority.Denied, authority.WorkflowOwned)
	// The booker STOPs bob's workflow.
	w.Confirm(s.Bob, "cb", testlog.NewGrant(testlog.NewActor("agent:y"), "wf_bob", []string{"a"}, []string{"b"}, nil, nil, 600))
	stop := w.Must(s.Booker, w.Author.StopChain(s.Booker, "s9", "wf_bob", "x"), authority.Denied, authority.NotAuthorized)
	// A later DENIAL inside the workflow: the log key's seq has gaps in it.
	late := w.Must(s.Booker, w.Author.Pending(s.Booker, "r10", "d3", "step_2", "purchase", testlog.StdTarget,
		map[string]int64{"budget_usd": 1, "max_side_effects": 0}), authority.Denied, authority.WorkflowStopped)
	for _, res := range []uint64{mismatch.Index, owned.Index, stop.Index, late.Index} {
		v := mustVerify(t, w.Prove(res, false), w.vkey)
		if res != late.Index && !strings.Contains(strings.Join(v.Notes, "\n"), "rests on leaves outside this bundle") {
			t.Errorf("DENIAL %d: no note that its reason rests on other leaves: %q", res, v.Notes)
		}
	}
	mustVerify(t, w.Prove(w.s.Pending, true), w.vkey)
}
