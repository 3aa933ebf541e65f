package authority_test

// Tests for the red-team findings of DESIGN version 3 whose rules live in
// the engine: log-signed envelopes are never submissions, agent and
// principal names are disjoint, principals at max_depth do not narrow,
// decisions whose cost must not grow with history, already_stopped, and
// who may lift a grantee's STOP.

import (
	"encoding/json"
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
