package authority_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

func newAuth(tb testing.TB, keyType string) *softauthn.Authenticator {
	tb.Helper()
	a, err := softauthn.New(keyType, "custody.example.com", "https://custody.example.com")
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// passkeyEnroll is the admin's PRINCIPAL binding a's passkey to name.
func passkeyEnroll(a *softauthn.Authenticator, id, op, name string, allowed ...string) obj {
	e := a.Enrollment(allowed...)
	o := obj{"principal_id": id, "op": op, "name": name, "key_type": e.KeyType, "public_key": e.PublicKey,
		"credential_id": e.CredentialID, "rp_id": e.RPID, "origins": e.Origins}
	if len(allowed) > 0 {
		o["allowed_types"] = allowed
	}
	return o
}

// submitPasskey builds a statement as the passkey's holder and signs it
// with the software authenticator.
func (h *harness) submitPasskey(a *softauthn.Authenticator, kind statement.Kind, o obj, so softauthn.Options) authority.Decision {
	h.tb.Helper()
	k := &testlog.Key{Handle: "passkey", KID: a.KeyID()}
	payload := h.build(k, kind, o, opts{})
	env, err := a.Sign(kind.Lower(), payload, so)
	if err != nil {
		h.tb.Fatal(err)
	}
	return h.submitEnv(env, false)
}

func want(tb testing.TB, d authority.Decision, v authority.Verdict, code authority.Code, says ...string) {
	tb.Helper()
	if d.Verdict != v || d.Code != code || !containsAll(d.Reason, says...) {
		tb.Fatalf("got %s %s: %s; want %s %s saying %q", d.Verdict, d.Code, d.Reason, v, code, says)
	}
}

// TestPasskeyPrincipal: a passkey principal, a second device, the owner's
// authority by name, allowed_types, broken assertions refused, and the
// whole log replayed to the same decisions.
func TestPasskeyPrincipal(t *testing.T) {
	for _, kt := range []string{sign.KeyTypeWebAuthnES256, sign.KeyTypeWebAuthnEd25519} {
		t.Run(kt, func(t *testing.T) {
			h := newHarness(t)
			h.genesis(nil)
			alice := newAuth(t, kt)
			phone := newAuth(t, sign.KeyTypeWebAuthnES256)
			// alice's laptop is an Ed25519 key; her passkey is added to her name.
			want(t, h.submit("admin", statement.Principal, obj{"principal_id": "p1", "key": "alice"}, opts{}), authority.Accepted, "")
			// add_key for a name never enrolled is not_principal.
			want(t, h.submit("admin", statement.Principal, passkeyEnroll(alice, "p2", "add_key", "bob"), opts{}), authority.Denied, authority.NotPrincipal, `"bob"`)
			want(t, h.submit("admin", statement.Principal, passkeyEnroll(alice, "p3", "add_key", "alice"), opts{}), authority.Accepted, "")
			// The same passkey again, under any name, is identity_conflict.
			want(t, h.submit("admin", statement.Principal, passkeyEnroll(alice, "p4", "enroll", "carol"), opts{}), authority.Denied, authority.IdentityConflict, "already bound")
			// enroll of a taken name says to use add_key.
			want(t, h.submit("admin", statement.Principal, passkeyEnroll(phone, "p5", "enroll", "alice"), opts{}), authority.Denied, authority.IdentityConflict, "add_key")
			want(t, h.submit("admin", statement.Principal, passkeyEnroll(phone, "p6", "add_key", "alice", "APPROVAL", "CONFIRM", "STOP"), opts{}), authority.Accepted, "")
			if rec := h.e.Key(alice.KeyID()); rec == nil || rec.Name != "alice" || strings.Join(rec.AllowedTypes, ",") != "APPROVAL,RESUME,STOP" {
				t.Fatalf("passkey record %+v", rec)
			}
			// alice's Ed25519 key confirms a grant to an agent.
			want(t, h.submit("alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:bot",
				"scope": obj{"workflow_id": "wf1", "targets": []string{"t/*"}, "capabilities": []string{"buy"}}}, opts{}), authority.Accepted, "")

			// A passkey may not sign a CONFIRM unless allowed: not_authorized, logged.
			c2 := obj{"confirm_id": "c2", "actor": "alice", "seq": int64(1), "grantee": "agent:bot2",
				"scope": obj{"workflow_id": "wf1", "targets": []string{"t/*"}, "capabilities": []string{"buy"}}}
			want(t, h.submitPasskey(alice, statement.Confirm, c2, softauthn.Options{}), authority.Denied, authority.NotAuthorized, "allowed to sign only APPROVAL, RESUME, STOP, not CONFIRM")

			// Broken assertions are refused at step 2, not logged.
			stop := obj{"request_id": "s1", "workflow_id": "wf1", "actor": "alice", "seq": int64(1)}
			n := len(h.leaves)
			for name, so := range map[string]softauthn.Options{
				"type":        {Type: "webauthn.create"},
				"challenge":   {Challenge: "AAAA"},
				"origin":      {Origin: "https://evil.example"},
				"crossOrigin": {CrossOrigin: ptr(true)},
				"topOrigin":   {TopOrigin: "https://custody.example.com"},
				"rpIdHash":    {RPID: "example.com"},
				"UP":          {Flags: ptr(byte(0x04))},
				"UV":          {Flags: ptr(byte(0x01))},
				"AT":          {Flags: ptr(byte(0x45))},
				"BS":          {Flags: ptr(byte(0x15))},
				"trailing":    {Extra: []byte{0}},
				"signature":   {Corrupt: true},
			} {
				d := h.submitPasskey(alice, statement.Stop, stop, so)
				if d.Verdict != authority.Refused || d.Code != authority.BadSignature {
					t.Fatalf("%s: %s %s: %s", name, d.Verdict, d.Code, d.Reason)
				}
			}
			if len(h.leaves) != n {
				t.Fatal("a refused passkey submission was logged")
			}
			// An Ed25519 signature under the passkey's keyid is refused too.
			payload := h.build(&testlog.Key{KID: alice.KeyID()}, statement.Stop, stop, opts{})
			env, _ := sign.Sign(keyFor("alice").Priv, "stop", payload)
			env.Signatures[0].KeyID = alice.KeyID()
			want(t, h.submitEnv(env, false), authority.Refused, authority.BadSignature, "passkey")

			// The honest passkey STOP of the owner (another key of her name) is accepted.
			want(t, h.submitPasskey(alice, statement.Stop, stop, softauthn.Options{}), authority.Accepted, "")
			// Her phone may lift it: the STOP's signer is the name, not the key.
			want(t, h.submitPasskey(phone, statement.Resume, obj{"resume_id": "r1", "stop_ref": "s1", "actor": "alice", "seq": int64(1)}, softauthn.Options{}),
				authority.Denied, authority.NotAuthorized, "not RESUME")
			want(t, h.submit("alice", statement.Resume, obj{"resume_id": "r1", "stop_ref": "s1"}, opts{}), authority.Accepted, "")
			// Her phone may CONFIRM into her workflow (allowed, and her name owns it).
			c3 := obj{"confirm_id": "c3", "actor": "alice", "seq": int64(1), "grantee": "agent:bot3",
				"scope": obj{"workflow_id": "wf1", "targets": []string{"t/*"}, "capabilities": []string{"buy"}}}
			want(t, h.submitPasskey(phone, statement.Confirm, c3, softauthn.Options{}), authority.Accepted, "")

			// Retiring one device leaves the other live.
			ph := phone.Enrollment("APPROVAL", "CONFIRM", "STOP")
			want(t, h.submit("admin", statement.Principal, obj{"principal_id": "p7", "op": "retire", "name": "alice", "key_type": ph.KeyType,
				"public_key": ph.PublicKey, "credential_id": ph.CredentialID, "rp_id": ph.RPID, "origins": ph.Origins}, opts{}), authority.Accepted, "")
			want(t, h.submitPasskey(phone, statement.Stop, obj{"request_id": "s2", "workflow_id": "wf1", "actor": "alice", "seq": int64(2)}, softauthn.Options{}),
				authority.Denied, authority.Revoked, "retired")
			want(t, h.submitPasskey(alice, statement.Stop, obj{"request_id": "s3", "workflow_id": "wf1", "actor": "alice", "seq": int64(2)}, softauthn.Options{}),
				authority.Accepted, "")
			if total, live := h.e.PrincipalKeys("alice"); total != 3 || live != 2 {
				t.Fatalf("alice holds %d keys, %d live; want 3, 2", total, live)
			}

			// The whole log replays to the same decisions (the verifier's path).
			replayAll(t, h.leaves)
		})
	}
}

// TestPasskeyIdentityEncodings: one Ed25519 key is one identity, raw or
// inside a webauthn-ed25519 SPKI.
func TestPasskeyIdentityEncodings(t *testing.T) {
	h := newHarness(t)
	h.genesis(nil)
	bot := keyFor("agent:bot")
	spki := append([]byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}, bot.Pub...)
	asPasskey := obj{"principal_id": "p1", "op": "enroll", "name": "mallory", "key_type": sign.KeyTypeWebAuthnEd25519,
		"public_key": base64.StdEncoding.EncodeToString(spki), "credential_id": "AQID", "rp_id": "example.com", "origins": []string{"https://example.com"}}
	// The admin's key, wrapped as a passkey, cannot be enrolled.
	admin := keyFor("admin")
	adminSPKI := append(append([]byte{}, spki[:12]...), admin.Pub...)
	o := deepCopy(asPasskey)
	o["public_key"] = base64.StdEncoding.EncodeToString(adminSPKI)
	want(t, h.submit("admin", statement.Principal, o, opts{}), authority.Denied, authority.IdentityConflict, "other encoding", "admin")
	// A passkey enrolled first; the same key as an agent grantee is then refused.
	want(t, h.submit("admin", statement.Principal, asPasskey, opts{}), authority.Accepted, "")
	want(t, h.submit("admin", statement.Principal, obj{"principal_id": "p2", "key": "alice"}, opts{}), authority.Accepted, "")
	want(t, h.submit("alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:bot",
		"scope": obj{"workflow_id": "wf1", "targets": []string{"t/*"}, "capabilities": []string{"buy"}}}, opts{}),
		authority.Denied, authority.IdentityConflict, "other encoding", "mallory")
	// And the raw key enrolled as a principal under its raw encoding too.
	want(t, h.submit("admin", statement.Principal, obj{"principal_id": "p3", "key": "agent:bot", "name": "bob"}, opts{}),
		authority.Denied, authority.IdentityConflict, "other encoding")
	replayAll(t, h.leaves)
}

// TestPasskeyPrincipalSchema: the PRINCIPAL passkey fields are checked.
func TestPasskeyPrincipalSchema(t *testing.T) {
	h := newHarness(t)
	h.genesis(nil)
	a := newAuth(t, sign.KeyTypeWebAuthnES256)
	for name, edit := range map[string]func(o obj){
		"key_type unknown":        func(o obj) { o["key_type"] = "webauthn-rs256" },
		"key_type ed25519 spelt":  func(o obj) { o["key_type"] = "ed25519" },
		"wrong key for type":      func(o obj) { o["key_type"] = sign.KeyTypeWebAuthnEd25519 },
		"no credential_id":        func(o obj) { delete(o, "credential_id") },
		"no origins":              func(o obj) { delete(o, "origins") },
		"origin off rp_id":        func(o obj) { o["origins"] = []string{"https://evil.example"} },
		"rp_id upper case":        func(o obj) { o["rp_id"] = "Custody.example.com" },
		"allowed unsorted":        func(o obj) { o["allowed_types"] = []string{"STOP", "APPROVAL"} },
		"allowed agent kind":      func(o obj) { o["allowed_types"] = []string{"RECEIPT"} },
		"webauthn fields, no key": func(o obj) { delete(o, "key_type"); o["public_key"] = keyFor("x").B64 },
	} {
		o := passkeyEnroll(a, "p1", "enroll", "alice")
		edit(o)
		d := h.submit("admin", statement.Principal, o, opts{})
		if d.Verdict != authority.Denied || d.Code != authority.SchemaInvalid {
			t.Errorf("%s: %s %s: %s", name, d.Verdict, d.Code, d.Reason)
		}
	}
}
