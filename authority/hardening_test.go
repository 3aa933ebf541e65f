package authority_test

// Tests for the red-team findings of DESIGN version 3 whose rules live in
// the engine: log-signed envelopes are never submissions, agent and
// principal names are disjoint, principals at max_depth do not narrow,
// decisions whose cost must not grow with history, already_stopped, and
// who may lift a grantee's STOP.

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// workflowOf starts a log with alice enrolled and a CONFIRM c1 of wf1 to
// agent:a (capabilities buy and sell, targets shop/*, limit usd 100).
func workflowOf(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.genesis(obj{})
	mustAccept(t, h.submit("admin", statement.Principal, obj{"principal_id": "p-alice", "key": "principal:alice"}, opts{}))
	mustAccept(t, h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:a",
		"scope":  obj{"capabilities": []any{"buy", "sell"}, "targets": []any{"shop/*"}, "workflow_id": "wf1"},
		"limits": obj{"usd": int64(100)}}, opts{}))
	return h
}

func mustAccept(t *testing.T, d authority.Decision) {
	t.Helper()
	if d.Verdict != authority.Accepted {
		t.Fatalf("%s %s: %s", d.Verdict, d.Code, d.Reason)
	}
}

func wantVerdict(t *testing.T, what string, d authority.Decision, want string) {
	t.Helper()
	if got := verdictString(d); got != want {
		t.Errorf("%s: %s (%s), want %s", what, got, d.Reason, want)
	}
}

// TestLogSignedEnvelopeRefused: a DENIAL the log signed, posted back, is
// refused at step 2 and not logged (DESIGN §1), however many times, and
// whether or not the caller verified the signature already.
func TestLogSignedEnvelopeRefused(t *testing.T) {
	h := workflowOf(t)
	// A denial to get a log-signed envelope: agent:a buys outside shop/*.
	d := h.submit("agent:a", statement.Receipt, obj{"receipt_id": "r1", "authorization_ref": "c1",
		"action": "buy", "target": "bank/x", "reserve": obj{"usd": int64(1)}}, opts{})
	wantVerdict(t, "receipt out of scope", d, "denied/out_of_scope")
	_, denial := leafEnvelope(t, h.leaves[len(h.leaves)-1])
	if denial.KeyID != h.logKey.KID {
		t.Fatalf("the last leaf is not a log-signed DENIAL")
	}
	size := h.index
	for _, verified := range []bool{false, true} {
		d := h.submitEnv(denial.Envelope, verified)
		wantVerdict(t, "a logged DENIAL posted back", d, "refused/bad_signature")
		if !strings.Contains(d.Reason, "never a submission") {
			t.Errorf("reason %q does not say why", d.Reason)
		}
	}
	// Any kind of statement the log key signs: a CONFIRM made with it.
	payload := h.build(h.logKey, statement.Receipt, obj{"receipt_id": "r2", "authorization_ref": "c1",
		"action": "buy", "target": "shop/x", "reserve": obj{"usd": int64(1)}}, opts{})
	wantVerdict(t, "a RECEIPT signed by the log key", h.submitEnv(h.envelope(h.logKey, statement.Receipt, payload, opts{}), false), "refused/bad_signature")
	if h.index != size {
		t.Errorf("log grew from %d to %d", size, h.index)
	}
	replayAll(t, h.leaves)
}

// TestNameSpaces: agent names start with agent:, principal and admin names
// never do (DESIGN §1), so a grantee cannot squat a person's name.
func TestNameSpaces(t *testing.T) {
	h := workflowOf(t)
	wantVerdict(t, "grantee named like a principal", h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c2",
		"grantee": obj{"name": "user:carol", "key": "agent:squatter"},
		"scope":   obj{"capabilities": []any{"buy"}, "targets": []any{"shop/*"}, "workflow_id": "wf1"}}, opts{}), "denied/identity_conflict")
	wantVerdict(t, "delegate named like a principal", h.submit("agent:a", statement.Delegate, obj{"delegation_id": "d1", "parent_ref": "c1",
		"grantee": obj{"name": "user:carol", "key": "agent:squatter"},
		"scope":   obj{"capabilities": []any{"buy"}, "targets": []any{"shop/*"}}, "limits": obj{"usd": int64(100)}}, opts{}), "denied/identity_conflict")
	// carol can still be enrolled under her name.
	mustAccept(t, h.submit("admin", statement.Principal, obj{"principal_id": "p-carol", "name": "user:carol", "key": "principal:carol"}, opts{}))
	wantVerdict(t, "principal named like an agent", h.submit("admin", statement.Principal, obj{"principal_id": "p-dave",
		"name": "agent:dave", "key": "principal:dave"}, opts{}), "denied/identity_conflict")
	replayAll(t, h.leaves)

	g := newHarness(t)
	d := g.submit("admin", statement.Genesis, obj{"actor": "agent:admin"}, opts{})
	wantVerdict(t, "admin named like an agent", d, "refused/identity_conflict")
}

// TestPrincipalsAtMaxDepth: a delegation at max_depth whose only narrowing
// is a principals set is a transfer (DESIGN §3); below max_depth it is a
// narrowing.
func TestPrincipalsAtMaxDepth(t *testing.T) {
	h := workflowOf(t) // max_depth 3; c1 is depth 1
	sc := obj{"capabilities": []any{"buy", "sell"}, "targets": []any{"shop/*"}}
	mustAccept(t, h.submit("agent:a", statement.Delegate, obj{"delegation_id": "d2", "parent_ref": "c1",
		"grantee": "agent:b", "scope": sc, "limits": obj{"usd": int64(90)}}, opts{}))
	withPrincipals := obj{"capabilities": []any{"buy", "sell"}, "targets": []any{"shop/*"}, "principals": []any{"agent:x/*"}}
	d := h.submit("agent:b", statement.Delegate, obj{"delegation_id": "d3", "parent_ref": "d2",
		"grantee": "agent:c", "scope": withPrincipals, "limits": obj{"usd": int64(90)}}, opts{})
	wantVerdict(t, "depth 3, only principals narrower", d, "denied/equal_scope")
	if !strings.Contains(d.Reason, "max_depth") {
		t.Errorf("reason %q does not name max_depth", d.Reason)
	}
	// The same narrowing at depth 2 is a narrowing.
	mustAccept(t, h.submit("agent:a", statement.Delegate, obj{"delegation_id": "d2b", "parent_ref": "c1",
		"grantee": "agent:b2", "scope": withPrincipals, "limits": obj{"usd": int64(100)}}, opts{}))
	// At depth 3 with a lower limit too: accepted.
	mustAccept(t, h.submit("agent:b", statement.Delegate, obj{"delegation_id": "d3b", "parent_ref": "d2",
		"grantee": "agent:c", "scope": withPrincipals, "limits": obj{"usd": int64(89)}}, opts{}))
	replayAll(t, h.leaves)
}

var (
	_ = json.Marshal
	_ = time.Second
	_ = sign.KeyID
)

// TestRevokedGranteeCannotResume: a grantee's STOP may be lifted by its
// signer only while the signer holds a live grant in the workflow; after
// its grant is revoked, the owner (or the admin) lifts it.
func TestRevokedGranteeCannotResume(t *testing.T) {
	h := workflowOf(t)
	mustAccept(t, h.submit("agent:a", statement.Stop, obj{"request_id": "s1", "workflow_id": "wf1"}, opts{}))
	mustAccept(t, h.submit("agent:a", statement.Stop, obj{"request_id": "s2", "workflow_id": "wf1", "step_id": "step_2"}, opts{}))
	mustAccept(t, h.submit("agent:a", statement.Resume, obj{"resume_id": "u1", "stop_ref": "s2"}, opts{}))
	mustAccept(t, h.submit("principal:alice", statement.Revoke, obj{"revoke_id": "v1", "target_ref": "c1"}, opts{}))
	d := h.submit("agent:a", statement.Resume, obj{"resume_id": "u2", "stop_ref": "s1"}, opts{})
	wantVerdict(t, "revoked grantee lifts its own STOP", d, "denied/not_authorized")
	if !strings.Contains(d.Reason, "no longer holds a live grant") {
		t.Errorf("reason %q", d.Reason)
	}
	mustAccept(t, h.submit("principal:alice", statement.Resume, obj{"resume_id": "u3", "stop_ref": "s1"}, opts{}))
	replayAll(t, h.leaves)
}

// countingStore counts what a cold engine reads.
type countingStore struct {
	m            authority.MemStore
	loads, bytes int
}

func (s *countingStore) Load(key string) ([]byte, error) {
	v, _ := s.m.Load(key)
	s.loads++
	s.bytes += len(v)
	return v, nil
}

// TestDecisionCostFlat: what a decision reads and writes does not grow with
// the STOPs or grants before it (DESIGN §4, Bounded cost). It counts
// records and bytes, not time: a pending receipt, and a STOP by a grantee,
// decided by an engine with nothing cached, after 1 and after 300 STOPs or
// grants in the same workflow.
func TestDecisionCostFlat(t *testing.T) {
	type cost struct{ loads, read, written int }
	measure := func(kind string, n int) (pend, stop cost) {
		h := historyLog(t, kind, n, "same")
		h.advance(time.Second)
		env := pendings(t, h, 1, h.now)[0]
		decide := func(env *sign.Parsed) cost {
			cs := &countingStore{m: h.store}
			e := authority.New(cs)
			d := e.Decide(authority.Submission{Env: env, Verified: true}, h.index, h.now)
			if d.Verdict != authority.Accepted {
				t.Fatalf("%s=%d: %s %s", kind, n, d.Code, d.Reason)
			}
			e.Link(h.index, h.now, d.Statement)
			c := cost{loads: cs.loads, read: cs.bytes}
			e.Dirty(func(_ string, v []byte) { c.written += len(v) })
			return c
		}
		pend = decide(env)
		exec := keyFor("agent:acme/exec")
		payload := h.build(exec, statement.Stop, obj{"request_id": "s_exec", "workflow_id": "wf1", "step_id": "step_9"}, opts{})
		p, err := sign.ParseEnvelopeValue(h.envelope(exec, statement.Stop, payload, opts{}))
		if err != nil {
			t.Fatal(err)
		}
		return pend, decide(p)
	}
	for _, kind := range []string{"stops", "grants"} {
		p0, s0 := measure(kind, 1)
		pn, sn := measure(kind, 300)
		for _, c := range []struct {
			what string
			a, b cost
		}{{"pending receipt", p0, pn}, {"grantee STOP", s0, sn}} {
			// A few bytes may differ: counts and ids grow by a digit or two.
			if c.a.loads != c.b.loads || c.b.read > c.a.read+64 || c.b.written > c.a.written+64 {
				t.Errorf("after 300 %s, a %s reads %d records (%d bytes) and writes %d bytes; after one, %d records (%d bytes), %d bytes",
					kind, c.what, c.b.loads, c.b.read, c.b.written, c.a.loads, c.a.read, c.a.written)
			}
		}
	}
}

// TestStopsInForce: STOPs in force on the chain and on steps, lifted in
// any order, decide exactly as before they were kept as linked records; a
// STOP that changes nothing is already_stopped, and once lifted the same
// STOP may be made again.
func TestStopsInForce(t *testing.T) {
	h := workflowOf(t)
	receipt := func(n int, step, want string) {
		t.Helper()
		d := h.submit("agent:a", statement.Receipt, obj{"receipt_id": "r" + itoa(n), "authorization_ref": "c1",
			"action": "buy", "target": "shop/x", "step_id": step, "reserve": obj{"usd": int64(0)}}, opts{})
		wantVerdict(t, "receipt on "+step, d, want)
	}
	stop := func(by, id, step, want string) {
		t.Helper()
		o := obj{"request_id": id, "workflow_id": "wf1"}
		if step != "" {
			o["step_id"] = step
		}
		wantVerdict(t, by+" STOP "+id, h.submit(by, statement.Stop, o, opts{}), want)
	}
	resume := func(by, id, stopRef string) {
		t.Helper()
		mustAccept(t, h.submit(by, statement.Resume, obj{"resume_id": id, "stop_ref": stopRef}, opts{}))
	}
	stop("principal:alice", "s1", "", "accepted")
	stop("agent:a", "s2", "", "accepted")
	stop("principal:alice", "s3", "a", "accepted")
	stop("principal:alice", "s4", "a/b", "accepted")
	stop("agent:a", "s5", "a/b", "accepted")
	stop("principal:alice", "s1b", "", "denied/already_stopped")
	stop("principal:alice", "s4b", "a/b", "denied/already_stopped")
	receipt(1, "z", "denied/workflow_stopped")
	resume("principal:alice", "u1", "s1")
	d := h.submit("agent:a", statement.Receipt, obj{"receipt_id": "r2", "authorization_ref": "c1", "action": "buy", "target": "shop/x",
		"step_id": "z", "reserve": obj{"usd": int64(0)}}, opts{})
	if d.Code != authority.WorkflowStopped || !strings.Contains(d.Reason, "s2") {
		t.Errorf("after lifting s1: %s %s", d.Code, d.Reason)
	}
	resume("agent:a", "u2", "s2")
	receipt(3, "z", "accepted")
	receipt(4, "a/b/c", "denied/step_stopped")
	resume("principal:alice", "u3", "s3") // the earliest, on a
	d = h.submit("agent:a", statement.Receipt, obj{"receipt_id": "r5", "authorization_ref": "c1", "action": "buy", "target": "shop/x",
		"step_id": "a/b/c", "reserve": obj{"usd": int64(0)}}, opts{})
	if d.Code != authority.StepStopped || !strings.Contains(d.Reason, "s4") {
		t.Errorf("after lifting s3: %s %s", d.Code, d.Reason)
	}
	receipt(6, "a/x", "accepted")
	resume("principal:alice", "u4", "s4")
	receipt(7, "a/b", "denied/step_stopped")          // s5 still
	stop("principal:alice", "s4c", "a/b", "accepted") // lifted: may stop again
	resume("principal:alice", "u5", "s4c")
	resume("agent:a", "u6", "s5")
	receipt(8, "a/b", "accepted")
	if w := h.e.Workflow("wf1"); w.StepStops != 0 {
		t.Errorf("step STOPs in force: %d, want 0", w.StepStops)
	}
	replayAll(t, h.leaves)
}

// TestHeldGrantsList: the grants a key holds in a workflow are walked
// newest first; a grant revoked by its own REVOKE leaves the list at once;
// a key's STOP right follows its live grants whatever killed the others.
func TestHeldGrantsList(t *testing.T) {
	h := workflowOf(t)
	sc := obj{"capabilities": []any{"buy"}, "targets": []any{"shop/*"}}
	deleg := func(id, parent, by string, ttl int64) {
		t.Helper()
		mustAccept(t, h.submit(by, statement.Delegate, obj{"delegation_id": id, "parent_ref": parent, "grantee": "agent:b",
			"scope": sc, "limits": obj{"usd": int64(50)}, "ttl_seconds": ttl}, opts{}))
	}
	deleg("d_long", "c1", "agent:a", 3000)
	deleg("d_short", "c1", "agent:a", 10)
	deleg("d_rev", "c1", "agent:a", 3000)
	mustAccept(t, h.submit("agent:a", statement.Revoke, obj{"revoke_id": "v1", "target_ref": "d_rev"}, opts{}))
	if g := h.e.Grant("d_rev"); !g.OffHeld {
		t.Error("a revoked grant stays in its grantee's list")
	}
	h.advance(time.Minute) // d_short expires
	mustAccept(t, h.submit("agent:b", statement.Stop, obj{"request_id": "s1", "workflow_id": "wf1", "step_id": "w"}, opts{}))
	if g := h.e.Grant("d_long"); g.OffHeld || g.NewerHeld != "d_short" {
		t.Errorf("the live grant: %+v", g)
	}
	mustAccept(t, h.submit("agent:a", statement.Revoke, obj{"revoke_id": "v2", "target_ref": "d_long"}, opts{}))
	wantVerdict(t, "STOP with no live grant left", h.submit("agent:b", statement.Stop, obj{"request_id": "s2", "workflow_id": "wf1", "step_id": "x"}, opts{}), "denied/not_authorized")
	deleg("d_new", "c1", "agent:a", 3000)
	mustAccept(t, h.submit("agent:b", statement.Stop, obj{"request_id": "s3", "workflow_id": "wf1", "step_id": "x"}, opts{}))
	// Revoking c1 kills d_new below it without touching d_new's record.
	mustAccept(t, h.submit("principal:alice", statement.Revoke, obj{"revoke_id": "v3", "target_ref": "c1"}, opts{}))
	wantVerdict(t, "STOP below a revoked grant", h.submit("agent:b", statement.Stop, obj{"request_id": "s4", "workflow_id": "wf1", "step_id": "y"}, opts{}), "denied/not_authorized")
	replayAll(t, h.leaves)
}

// TestCheckStateVersion: state records of another format are refused,
// naming both formats; a store without a log is fine.
func TestCheckStateVersion(t *testing.T) {
	if err := authority.CheckStateVersion(authority.MemStore{}); err != nil {
		t.Errorf("empty store: %v", err)
	}
	h := workflowOf(t)
	h.flush()
	if err := authority.CheckStateVersion(h.store); err != nil {
		t.Errorf("a store this build wrote: %v", err)
	}
	delete(h.store, "format")
	if err := authority.CheckStateVersion(h.store); err == nil || !strings.Contains(err.Error(), "format 1") {
		t.Errorf("a store without a format record (format 1): %v", err)
	}
	h.store["format"] = []byte(`{"version":3}`)
	if err := authority.CheckStateVersion(h.store); err == nil || !strings.Contains(err.Error(), "format 3") {
		t.Errorf("a store of format 3: %v", err)
	}
}

// TestDeadGrantsWalkedOnce: a key whose many grants expired (or sit below a
// revoked grant) and which holds no live one sends STOP after STOP; each is
// denied (or, past the denial rate limit, refused), and only the first
// walks its dead grants: it leaves hints that later walks jump along. The
// hints are not state: a replay that has none decides the same and
// derives the same records.
func TestDeadGrantsWalkedOnce(t *testing.T) {
	h := workflowOf(t)
	sc := obj{"capabilities": []any{"buy"}, "targets": []any{"shop/*"}}
	for i := range 200 {
		mustAccept(t, h.submit("agent:a", statement.Delegate, obj{"delegation_id": "d" + itoa(i), "parent_ref": "c1", "grantee": "agent:b",
			"scope": sc, "limits": obj{"usd": int64(50)}, "ttl_seconds": int64(10)}, opts{}))
	}
	h.advance(time.Minute) // every grant of agent:b has expired
	stopCost := func(n int) int {
		h.flush()
		hints := 0
		for k := range h.store {
			if authority.IsHint(k) {
				hints++
			}
		}
		cs := &countingStore{m: h.store}
		h.e = authority.New(cs) // cold: what a restarted ledger reads
		d := h.submit("agent:b", statement.Stop, obj{"request_id": "s" + itoa(n), "workflow_id": "wf1", "step_id": "x" + itoa(n)}, opts{})
		wantVerdict(t, "STOP with only dead grants", d, "denied/not_authorized")
		h.flush()
		h.e = authority.New(h.store)
		t.Logf("STOP %d: %d records read, %d hints stored before", n, cs.loads, hints)
		return cs.loads
	}
	first := stopCost(1)
	second := stopCost(2)
	third := stopCost(3)
	if first < 200 {
		t.Errorf("the first STOP read %d records; it should have walked the 200 dead grants", first)
	}
	if second > 30 || third > 30 {
		t.Errorf("later STOPs read %d and %d records: the dead grants were walked again", second, third)
	}
	h.flush()
	e, _ := replayAll(t, h.leaves)
	got := dirtyMap(e)
	for k := range got {
		if authority.IsHint(k) {
			t.Errorf("Dirty emitted hint %s", k)
		}
	}
	sameState(t, h.allDirty, got, "ledger vs replay")
}

// TestStopsAndGrantsModel plays random STOPs, RESUMEs, grants, REVOKEs,
// clock moves and receipts against a naive model that keeps every STOP and
// grant in plain lists and scans them, as the engine did before its
// records were linked: every verdict, code and named STOP must agree, and
// the log must replay.
func TestStopsAndGrantsModel(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(6) {
		t.Run("seed"+itoa(int(seed)), func(t *testing.T) { playModel(t, seed, seen) })
	}
	t.Logf("verdicts: %v", seen)
	for _, v := range []string{"STOP accepted", "STOP denied/already_stopped", "STOP denied/not_authorized", "RESUME accepted",
		"receipt accepted", "receipt denied/workflow_stopped", "receipt denied/step_stopped"} {
		if seen[v] == 0 {
			t.Errorf("no %s in any seed: the model does not exercise it", v)
		}
	}
}

func playModel(t *testing.T, seed uint64, seen map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 15))
	h := workflowOf(t)
	h.flushEvery, h.restartEvery = 5, 3
	type stopRec struct {
		id, by, step string // step "" = chain
		index        uint64
	}
	type grantRec struct {
		id      string
		expires time.Time
		revoked bool
	}
	var inForce []stopRec
	var grants []grantRec // agent:b's grants, all under c1
	c1Revoked := false
	signers := []string{"principal:alice", "agent:a", "agent:b", "admin"}
	steps := []string{"a", "a/b", "a/b/c", "b"}
	n := 0
	next := func(p string) string { n++; return p + itoa(n) }
	liveB := func() bool {
		for _, g := range grants {
			if !g.revoked && !c1Revoked && h.now.Before(g.expires) {
				return true
			}
		}
		return false
	}
	mustAccept(t, h.submit("agent:a", statement.Delegate, obj{"delegation_id": "d0", "parent_ref": "c1", "grantee": "agent:b",
		"scope": obj{"capabilities": []any{"buy"}, "targets": []any{"shop/*"}}, "limits": obj{"usd": int64(1)}, "ttl_seconds": int64(5)}, opts{}))
	grants = append(grants, grantRec{"d0", h.now.Add(5 * time.Second), false})
	for range 250 {
		h.advance(time.Duration(rng.IntN(4)) * time.Second)
		switch r := rng.IntN(10); {
		case r < 3: // STOP
			by, step := signers[rng.IntN(len(signers))], ""
			if rng.IntN(5) != 0 {
				step = steps[rng.IntN(len(steps))]
			}
			id := next("s")
			o := obj{"request_id": id, "workflow_id": "wf1"}
			if step != "" {
				o["step_id"] = step
			}
			want := "accepted"
			switch {
			case by == "agent:a" && c1Revoked, by == "agent:b" && !liveB():
				want = "denied/not_authorized"
			default:
				for _, s := range inForce {
					if s.by == by && s.step == step {
						want = "denied/already_stopped"
					}
				}
			}
			index := h.index
			d := h.submit(by, statement.Stop, o, opts{})
			wantVerdict(t, "STOP "+id+" by "+by, d, want)
			seen["STOP "+verdictString(d)]++
			if d.Verdict == authority.Accepted {
				inForce = append(inForce, stopRec{id, by, step, index})
			}
		case r < 5: // RESUME one in force, by its signer (or the owner, or the admin)
			if len(inForce) == 0 {
				continue
			}
			i := rng.IntN(len(inForce))
			s := inForce[i]
			by := s.by
			if by == "agent:a" || by == "agent:b" {
				if (by == "agent:a" && c1Revoked) || (by == "agent:b" && !liveB()) {
					by = "principal:alice"
				}
			}
			wantVerdict(t, "RESUME of "+s.id, h.submit(by, statement.Resume, obj{"resume_id": next("u"), "stop_ref": s.id}, opts{}), "accepted")
			seen["RESUME accepted"]++
			inForce = append(inForce[:i:i], inForce[i+1:]...)
		case r < 7: // grant agent:b something
			if c1Revoked || len(inForce) > 0 && slices.ContainsFunc(inForce, func(s stopRec) bool { return s.step == "" }) {
				continue
			}
			ttl := int64(1 + rng.IntN(30))
			id := next("d")
			mustAccept(t, h.submit("agent:a", statement.Delegate, obj{"delegation_id": id, "parent_ref": "c1", "grantee": "agent:b",
				"scope": obj{"capabilities": []any{"buy"}, "targets": []any{"shop/*"}}, "limits": obj{"usd": int64(1)}, "ttl_seconds": ttl}, opts{}))
			grants = append(grants, grantRec{id, h.now.Add(time.Duration(ttl) * time.Second), false})
		case r < 8: // revoke one of agent:b's grants, rarely c1
			if c1Revoked {
				continue
			}
			if rng.IntN(12) == 0 {
				mustAccept(t, h.submit("principal:alice", statement.Revoke, obj{"revoke_id": next("v"), "target_ref": "c1"}, opts{}))
				c1Revoked = true
				continue
			}
			if len(grants) == 0 {
				continue
			}
			g := &grants[rng.IntN(len(grants))]
			d := h.submit("agent:a", statement.Revoke, obj{"revoke_id": next("v"), "target_ref": g.id}, opts{})
			if g.revoked {
				wantVerdict(t, "second REVOKE of "+g.id, d, "denied/revoked")
			} else {
				mustAccept(t, d)
				g.revoked = true
			}
		default: // a pending receipt on a random step
			if c1Revoked {
				continue
			}
			step := steps[rng.IntN(len(steps))] + []string{"", "/x"}[rng.IntN(2)]
			want, named := "accepted", ""
			for _, s := range inForce {
				if s.step == "" {
					want, named = "denied/workflow_stopped", s.id
					break
				}
			}
			if named == "" {
				var first *stopRec
				for i, s := range inForce {
					if s.step != "" && (step == s.step || strings.HasPrefix(step, s.step+"/")) && (first == nil || s.index < first.index) {
						first = &inForce[i]
					}
				}
				if first != nil {
					want, named = "denied/step_stopped", first.id
				}
			}
			d := h.submit("agent:a", statement.Receipt, obj{"receipt_id": next("r"), "authorization_ref": "c1", "action": "buy",
				"target": "shop/x", "step_id": step, "reserve": obj{"usd": int64(0)}}, opts{})
			wantVerdict(t, "receipt on "+step, d, want)
			seen["receipt "+verdictString(d)]++
			if named != "" && !strings.Contains(d.Reason, " "+named+" ") {
				t.Errorf("receipt on %s: %q does not name %s", step, d.Reason, named)
			}
		}
	}
	replayAll(t, h.leaves)
}

// TestRefuseKeys: a checkpoint key, which the log does not bind, signs no
// submission once the engine is told of it (Engine.RefuseKeys), even a
// key the admin went on to enroll as a principal.
func TestRefuseKeys(t *testing.T) {
	h := workflowOf(t)
	cp := keyFor("checkpoint-2")
	mustAccept(t, h.submit("admin", statement.Principal, obj{"principal_id": "p-cp", "name": "user:cp", "key": "checkpoint-2"}, opts{}))
	d := h.submit("checkpoint-2", statement.Stop, obj{"request_id": "s-cp", "workflow_id": "wf1"}, opts{})
	wantVerdict(t, "before RefuseKeys", d, "denied/not_authorized")
	h.e.RefuseKeys(cp.KID)
	size := h.index
	d = h.submit("checkpoint-2", statement.Stop, obj{"request_id": "s-cp2", "workflow_id": "wf1"}, opts{})
	wantVerdict(t, "a statement signed by a checkpoint key", d, "refused/bad_signature")
	if h.index != size {
		t.Errorf("the log grew")
	}
}

// awayStore is a record store that stops answering when away is set (a
// database cut off, or a read ended by a lost lease).
type awayStore struct {
	m    authority.MemStore
	away bool
}

func (s *awayStore) Load(key string) ([]byte, error) {
	if s.away {
		return nil, errors.New("the store stopped answering")
	}
	return s.m.Load(key)
}

// TestDenialStoreAway: a DENIAL is built after its decision, and building
// it reads the log key's record. When the store stops answering in
// between, Denial returns nil and Err says why; it does not panic (a
// leader cut from its database while deciding did).
func TestDenialStoreAway(t *testing.T) {
	h := historyLog(t, "stops", 1, "same")
	h.advance(time.Second)
	env := pendings(t, h, 1, h.now)[0]
	st := &awayStore{m: h.store}
	e := authority.New(st)
	first := e.Decide(authority.Submission{Env: env, Verified: true}, h.index, h.now)
	if first.Verdict != authority.Accepted {
		t.Fatalf("%s %s", first.Code, first.Reason)
	}
	e.Link(h.index, h.now, first.Statement)
	// The same receipt again: a replay, denied.
	d := e.Decide(authority.Submission{Env: env, Verified: true}, h.index+1, h.now)
	if d.Verdict != authority.Denied {
		t.Fatalf("the replay: %s %s %s, want denied", d.Verdict, d.Code, d.Reason)
	}
	st.away = true
	if doc := e.Denial(&d, env, h.index+1, h.now, true); doc != nil {
		t.Fatalf("a DENIAL built with the store away: %+v", doc)
	}
	if e.Err() == nil {
		t.Fatal("Denial found no log key and Err says nothing")
	}
}
