package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// appendPasskey signs st with the software authenticator and appends it.
func (w *world) appendPasskey(a *softauthn.Authenticator, st statement.Statement, o softauthn.Options) (*Result, sign.Envelope) {
	w.t.Helper()
	payload, err := statement.Marshal(st)
	if err != nil {
		w.t.Fatal(err)
	}
	env, err := a.Sign(strings.ToLower(string(st.Head().Type)), payload, o)
	if err != nil {
		w.t.Fatal(err)
	}
	raw, err := env.Canonical()
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.l.Append(context.Background(), raw)
	var de *authority.DecisionError
	if errors.As(err, &de) {
		return &Result{Verdict: de.Verdict, Code: de.Code, Reason: de.Reason}, env
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return res, env
}

// twinOf returns env with its ES256 signature replaced by the (r, n−s) twin.
func twinOf(t *testing.T, env sign.Envelope) sign.Envelope {
	raw, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	twin, err := softauthn.Twin(m["signature"])
	if err != nil {
		t.Fatal(err)
	}
	m["signature"] = twin
	obj, err := canon.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := env
	out.Signatures = []sign.Signature{{KeyID: env.Signatures[0].KeyID, Sig: base64.StdEncoding.EncodeToString(obj)}}
	return out
}

// TestPasskeyStopEndToEnd: a principal whose second key is a passkey
// stops her workflow with it; the ledger (Badger) accepts the STOP, a
// broken assertion is refused and not logged, the (r, n−s) twin and a
// fresh assertion over the same payload are repeats answered with the
// first decision, the verifier accepts the bundle, audit finds nothing,
// and replay reproduces the state.
func TestPasskeyStopEndToEnd(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	pk, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example.com", "https://custody.example.com")
	if err != nil {
		t.Fatal(err)
	}
	e := pk.Enrollment()
	w.must(w.admin, &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpAddKey, Name: alice.name, PublicKey: e.PublicKey, KeyType: e.KeyType,
		CredentialID: e.CredentialID, RPID: e.RPID, Origins: e.Origins}, authority.Accepted, "")
	booker := newActor(t, "agent:booker")
	c1 := w.confirm(alice, "c1", grant(booker, "wf1", []string{"shop/*"}, []string{"buy"}, nil, nil, 3600))
	w.must(alice, c1, authority.Accepted, "")

	stop := &statement.StopDoc{Header: statement.Header{Type: statement.Stop, Timestamp: statement.FormatTimestamp(w.clock.Now()),
		Log: testOrigin, Actor: alice.name, Seq: 1}, RequestID: "stop1", Workflow: "wf1", StopScope: statement.StopChain,
		TakeoverMode: statement.TakeoverHuman, Reason: "a person said stop"}
	size := w.l.Head().Size
	bad, _ := w.appendPasskey(pk, stop, softauthn.Options{Origin: "https://evil.example"})
	if bad.Verdict != authority.Refused || bad.Code != authority.BadSignature || !strings.Contains(bad.Reason, "origin") {
		t.Fatalf("wrong origin: %s %s: %s", bad.Verdict, bad.Code, bad.Reason)
	}
	if w.l.Head().Size != size {
		t.Fatal("a refused passkey envelope was logged")
	}
	res, env := w.appendPasskey(pk, stop, softauthn.Options{})
	if res.Verdict != authority.Accepted {
		t.Fatalf("passkey STOP: %s %s: %s", res.Verdict, res.Code, res.Reason)
	}
	w.checkProof(res)
	// The twin and a second assertion are repeats: the first decision, nothing appended.
	twin, _ := twinOf(t, env).Canonical()
	again, _ := w.appendPasskey(pk, stop, softauthn.Options{})
	r2, err := w.l.Append(context.Background(), twin)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Result{r2, again} {
		if r.Verdict != authority.Accepted || r.Index != res.Index || !r.Duplicate {
			t.Fatalf("repeat: %s index %d duplicate %v, want accepted %d as a repeat", r.Verdict, r.Index, r.Duplicate, res.Index)
		}
	}
	// A repeat with a broken signature learns nothing.
	broken, _ := w.appendPasskey(pk, stop, softauthn.Options{Corrupt: true})
	if broken.Verdict != authority.Refused || broken.Code != authority.BadSignature {
		t.Fatalf("broken repeat: %s %s %s", broken.Verdict, broken.Code, broken.Reason)
	}
	// The STOP is in force: the agent's pending receipt is denied.
	p := w.pending(booker, "r1", "wf1", "c1", c1.ScopeHash, "s1", "buy", "shop/a", nil)
	w.must(booker, p, authority.Denied, authority.WorkflowStopped)

	// The verifier re-runs the decision, passkey signature included.
	b, err := w.l.Prove(res.Index, true)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := b.Marshal()
	b2, err := verify.ParseBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyBundle(b2, w.l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if !v.Valid {
		var sb strings.Builder
		v.WriteText(&sb)
		t.Fatalf("bundle invalid:\n%s", sb.String())
	}
	w.replay()
}

// TestPasskeyApprovalTwin: a person approves a held receipt with a
// passkey; the (r, n−s) twin of that APPROVAL's signature is a repeat
// answered with the first decision (nothing appended), and the bundle of
// the workflow verifies offline, APPROVAL included.
func TestPasskeyApprovalTwin(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	pk, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example.com", "https://custody.example.com")
	if err != nil {
		t.Fatal(err)
	}
	e := pk.Enrollment()
	w.must(w.admin, &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpAddKey, Name: alice.name, PublicKey: e.PublicKey, KeyType: e.KeyType,
		CredentialID: e.CredentialID, RPID: e.RPID, Origins: e.Origins}, authority.Accepted, "")
	booker := newActor(t, "agent:booker")
	g := grant(booker, "wf1", []string{"shop/*"}, []string{"buy"}, nil, nil, 3600)
	g.Approvals = []scope.Rule{{RuleID: "big", Capabilities: []string{"buy"}, Approvers: []string{"user:alice"}, Quorum: 1, TTLSeconds: 900}}
	c1 := w.confirm(alice, "c1", g)
	w.must(alice, c1, authority.Accepted, "")
	p := w.pending(booker, "r1", "wf1", "c1", c1.ScopeHash, "s1", "buy", "shop/a", nil)
	held := w.must(booker, p, authority.Accepted, "")
	if rec := w.l.seq.engine.Pending("r1"); rec == nil || rec.Hold == nil {
		t.Fatalf("r1 is not held: %+v", rec)
	}
	payload, _ := statement.Marshal(p)
	sum := sha256.Sum256(payload)
	ap := &statement.ApprovalDoc{Header: statement.Header{Type: statement.Approval, Timestamp: statement.FormatTimestamp(w.clock.Now()),
		Log: testOrigin, Actor: alice.name, Seq: 1}, ApprovalID: "a1", Workflow: "wf1", ReceiptRef: "r1",
		ReceiptSHA256: hex.EncodeToString(sum[:]), Decision: "approve"}
	res, env := w.appendPasskey(pk, ap, softauthn.Options{})
	if res.Verdict != authority.Accepted {
		t.Fatalf("passkey APPROVAL: %s %s: %s", res.Verdict, res.Code, res.Reason)
	}
	size := w.l.Head().Size
	twin, _ := twinOf(t, env).Canonical()
	r2, err := w.l.Append(context.Background(), twin)
	if err != nil || r2.Verdict != authority.Accepted || !r2.Duplicate || r2.Index != res.Index || w.l.Head().Size != size {
		t.Fatalf("the twin APPROVAL: %+v, %v; want the first decision (index %d), nothing appended", r2, err, res.Index)
	}
	// A passkey not allowed to approve (allowed_types without APPROVAL) is denied, logged.
	pk2, _ := softauthn.New(sign.KeyTypeWebAuthnEd25519, "custody.example.com", "https://custody.example.com")
	e2 := pk2.Enrollment("STOP")
	w.must(w.admin, &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpAddKey, Name: alice.name, PublicKey: e2.PublicKey, KeyType: e2.KeyType,
		CredentialID: e2.CredentialID, RPID: e2.RPID, Origins: e2.Origins, AllowedTypes: e2.AllowedTypes}, authority.Accepted, "")
	ap2 := *ap
	ap2.ApprovalID = "a2"
	if r, _ := w.appendPasskey(pk2, &ap2, softauthn.Options{}); r.Verdict != authority.Denied || r.Code != authority.NotAuthorized {
		t.Fatalf("APPROVAL by a STOP-only passkey: %s %s: %s", r.Verdict, r.Code, r.Reason)
	}
	b, err := w.l.Prove(held.Index, true)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyBundle(b, w.l.VerifierKey())
	if err != nil || !v.Valid {
		var sb strings.Builder
		if v != nil {
			v.WriteText(&sb)
		}
		t.Fatalf("bundle: %v\n%s", err, sb.String())
	}
	w.replay()
}

// TestPasskeyDeniedTwin: when the first decision on a passkey statement
// was a denial, its (r, n−s) twin gets that denial again, and nothing new
// is logged (no second DENIAL).
func TestPasskeyDeniedTwin(t *testing.T) {
	w := newWorld(t, Options{})
	bob := newActor(t, "user:bob")
	w.enroll(bob)
	pk, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example.com", "https://custody.example.com")
	if err != nil {
		t.Fatal(err)
	}
	e := pk.Enrollment()
	w.must(w.admin, &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpAddKey, Name: bob.name, PublicKey: e.PublicKey, KeyType: e.KeyType,
		CredentialID: e.CredentialID, RPID: e.RPID, Origins: e.Origins}, authority.Accepted, "")
	// bob stops a workflow that does not exist: denied (unknown_reference), logged.
	stop := &statement.StopDoc{Header: statement.Header{Type: statement.Stop, Timestamp: statement.FormatTimestamp(w.clock.Now()),
		Log: testOrigin, Actor: bob.name, Seq: 1}, RequestID: "stop_x", Workflow: "wf_none", StopScope: statement.StopChain,
		TakeoverMode: statement.TakeoverHuman, Reason: "x"}
	res, env := w.appendPasskey(pk, stop, softauthn.Options{})
	if res.Verdict != authority.Denied || res.Code != authority.UnknownReference {
		t.Fatalf("first: %s %s: %s", res.Verdict, res.Code, res.Reason)
	}
	size := w.l.Head().Size
	twin, _ := twinOf(t, env).Canonical()
	r2, err := w.l.Append(context.Background(), twin)
	if err != nil || r2.Verdict != authority.Denied || r2.Index != res.Index || !r2.Duplicate || w.l.Head().Size != size {
		t.Fatalf("twin of a denied passkey STOP: %+v, %v; want the denial at %d again, nothing logged", r2, err, res.Index)
	}
}
