package author

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	_ "github.com/custodylog/custody/storage/badgerstore"
)

// newLog makes a ledger in a new folder whose admin key is admin, with
// max_ttl_seconds maxTTL.
func newLog(t *testing.T, maxTTL int64) (*ledger.Ledger, ed25519.PrivateKey) {
	t.Helper()
	_, admin, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Init(t.TempDir(), "example.com/author", ledger.InitOptions{AdminKey: admin, MaxTTLSeconds: maxTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, admin
}

func session(l *ledger.Ledger, key ed25519.PrivateKey) *Session {
	return New(append(ed25519.PrivateKey(nil), key...), func() (Log, error) { return l, nil }, false)
}

func TestHeaderFromTheLog(t *testing.T) {
	l, admin := newLog(t, 0)
	s := session(l, admin)
	h, err := s.Header(statement.Principal)
	if err != nil {
		t.Fatal(err)
	}
	if h.Log != "example.com/author" || h.Actor != "admin" || h.Seq != 2 {
		// GENESIS is the admin key's seq 1.
		t.Fatalf("header %+v: want the log's origin, the admin's bound name and seq 2", h)
	}
	s.Actor, s.Origin, s.Seq = "user:given", "example.com/given", 7
	if h, err = s.Header(statement.Principal); err != nil || h.Log != "example.com/given" || h.Actor != "user:given" || h.Seq != 7 {
		t.Fatalf("given values: %+v, %v", h, err)
	}
}

func TestHeaderUnboundKey(t *testing.T) {
	l, _ := newLog(t, 0)
	_, stranger, _ := sign.GenerateKey()
	_, err := session(l, stranger).Header(statement.Stop)
	if err == nil || !strings.Contains(err.Error(), "is not bound in the ledger example.com/author") || !strings.Contains(err.Error(), "--actor") {
		t.Fatalf("unbound key: %v", err)
	}
}

func TestOfflineNamesWhatNeededTheLog(t *testing.T) {
	_, key, _ := sign.GenerateKey()
	s := New(key, func() (Log, error) { return nil, errors.New("no data folder") }, true)
	s.Actor, s.Seq = "user:alice", 3
	_, err := s.Header(statement.Stop)
	if err == nil || !strings.Contains(err.Error(), "finding the log's origin needs the ledger (no data folder)") {
		t.Fatalf("offline: %v", err)
	}
	s.Origin = "example.com/x"
	s2 := New(key, func() (Log, error) { t.Fatal("opened the log with every value given"); return nil, nil }, true)
	s2.Actor, s2.Origin, s2.Seq = "user:alice", "example.com/x", 3
	if _, err := s2.Header(statement.Stop); err != nil {
		t.Fatal(err)
	}
}

func enroll(t *testing.T, s *Session, name string, pub ed25519.PublicKey) Outcome {
	t.Helper()
	h, err := s.Header(statement.Principal)
	if err != nil {
		t.Fatal(err)
	}
	doc := &statement.PrincipalDoc{Header: h, PrincipalID: NewID("principal"), Op: statement.OpEnroll, Name: name, PublicKey: sign.EncodePublicKey(pub)}
	raw, out, err := s.Sign(doc)
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != "PRINCIPAL" || out.KeyID != sign.KeyID(pub) || out.Seq != h.Seq {
		t.Fatalf("signed outcome %+v", out)
	}
	out, err = s.Append(context.Background(), raw, out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAppendOutcomes(t *testing.T) {
	l, admin := newLog(t, 0)
	s := session(l, admin)
	alicePub, alice, _ := sign.GenerateKey()
	out := enroll(t, s, "user:alice", alicePub)
	if out.Verdict != "accepted" || out.Index == nil || *out.Index != 1 || out.CheckpointSize != 2 || len(out.InclusionProof) != 1 {
		t.Fatalf("enroll: %+v", out)
	}
	if name, err := s.BoundName(sign.KeyID(alicePub), "test"); err != nil || name != "user:alice" {
		t.Fatalf("BoundName = %q, %v", name, err)
	}
	// The same key enrolled again: the ledger denies it, and logs a DENIAL.
	if out = enroll(t, session(l, admin), "user:alice2", alicePub); out.Verdict != "denied" || out.ReasonCode == "" || out.Index == nil {
		t.Fatalf("second enroll: %+v", out)
	}
	// A statement whose seq the key has used: refused, nothing logged.
	size := l.Head().Size
	s3 := session(l, alice)
	s3.Seq = 1
	h, _ := s3.Header(statement.Stop)
	h.Seq = 0
	raw, o, err := s3.Sign(&statement.StopDoc{Header: h, RequestID: "stop_1", Workflow: "wf", StopScope: statement.StopChain, TakeoverMode: statement.TakeoverHuman, Reason: "r"})
	if err == nil {
		o, err = s3.Append(context.Background(), raw, o)
	}
	if err == nil && o.Verdict != "refused" {
		t.Fatalf("seq 0: %+v", o)
	}
	if l.Head().Size != size {
		t.Fatal("a refused statement was logged")
	}
}

func TestPrecheckTTL(t *testing.T) {
	l, admin := newLog(t, 3600)
	s := session(l, admin)
	g := &statement.ConfirmDoc{Grant: statement.Grant{TTLSeconds: 3601}}
	if err := s.Precheck(g); err != nil {
		t.Fatalf("with the log not open (offline), the ledger decides: %v", err)
	}
	s.Log("test")
	var te *TTLError
	if err := s.Precheck(g); !errors.As(err, &te) || te.MaxTTLSeconds != 3600 || !strings.Contains(err.Error(), "max_ttl_seconds 3600") {
		t.Fatalf("ttl above max: %v", err)
	}
	g.Grant.TTLSeconds = 3600
	if err := s.Precheck(g); err != nil {
		t.Fatalf("ttl at max: %v", err)
	}
}

func TestEntryKindAndWorkflow(t *testing.T) {
	l, admin := newLog(t, 0)
	s := session(l, admin)
	pub, _, _ := sign.GenerateKey()
	enroll(t, s, "user:bob", pub)
	id := ""
	if e, err := l.Entry(1); err == nil {
		id = e.Statement.ID()
	}
	_, err := s.Entry("--parent", id, statement.Confirm, statement.Delegate)
	if err == nil || !strings.Contains(err.Error(), "--parent "+id+" is a PRINCIPAL at index 1, not a [CONFIRM DELEGATE]") {
		t.Fatalf("wrong kind: %v", err)
	}
	if _, err := s.Entry("--grant", "nope", statement.Confirm); err == nil || !strings.HasPrefix(err.Error(), "--grant: ") {
		t.Fatalf("unknown id: %v", err)
	}
	if wf, err := s.Workflow("wf_given", "--grant", "nope"); err != nil || wf != "wf_given" {
		t.Fatalf("given workflow: %q, %v", wf, err)
	}
}

func TestValues(t *testing.T) {
	if m, err := ParseAmounts("limit", []string{"budget_usd=800", "n=0"}); err != nil || m["budget_usd"] != 800 || m["n"] != 0 || len(m) != 2 {
		t.Fatalf("ParseAmounts = %v, %v", m, err)
	}
	for _, bad := range [][]string{{"budget_usd"}, {"=1"}, {"x=-1"}, {"x=1.5"}, {"x=9007199254740992"}, {"x=1", "x=2"}} {
		if _, err := ParseAmounts("limit", bad); err == nil || !strings.HasPrefix(err.Error(), "--limit") {
			t.Errorf("ParseAmounts(%q) = %v, want an error naming --limit", bad, err)
		}
	}
	if m, err := ParseAmounts("limit", nil); m != nil || err != nil {
		t.Errorf("no limits: %v, %v", m, err)
	}
	if m, err := ParsePairs("side-effect", []string{"a=b=c"}); err != nil || m["a"] != "b=c" {
		t.Errorf("ParsePairs = %v, %v", m, err)
	}
	if _, err := ParsePairs("side-effect", []string{"a=1", "a=2"}); err == nil {
		t.Error("a key given twice")
	}
	if got := CanonicalSet([]string{"b", "a", "b"}); strings.Join(got, ",") != "a,b" {
		t.Errorf("CanonicalSet = %v", got)
	}
	if OptionalSet([]string{"*", "*"}) != nil || CanonicalSet(nil) != nil {
		t.Error(`["*"] and an empty set are written absent`)
	}
	if n, err := Seconds("ttl", 15*time.Minute); n != 900 || err != nil {
		t.Errorf("Seconds = %d, %v", n, err)
	}
	for _, d := range []time.Duration{0, -time.Second, 1500 * time.Millisecond} {
		if _, err := Seconds("ttl", d); err == nil {
			t.Errorf("Seconds(%s) accepted", d)
		}
	}
	if id := NewID("confirm"); len(id) != len("confirm_")+8 || !strings.HasPrefix(id, "confirm_") {
		t.Errorf("NewID = %q", id)
	}
}

func TestGrantSpec(t *testing.T) {
	pub, _, _ := sign.GenerateKey()
	g, err := GrantSpec{Grantee: "agent:a", GranteeKey: pub, Workflow: "wf", Steps: []string{"*"},
		Targets: []string{"t/2", "t/1", "t/2"}, Capabilities: []string{"buy"}, TTLSeconds: 60, Revocable: true}.Grant()
	if err != nil || g.Scope.StepIDs != nil || strings.Join(g.Scope.Targets, ",") != "t/1,t/2" || g.Grantee.PublicKey != sign.EncodePublicKey(pub) {
		t.Fatalf("Grant = %+v, %v", g, err)
	}
	_, err = GrantSpec{GranteeKey: pub, Approvals: []byte("{"), ApprovalsFrom: "--approvals r.json"}.Grant()
	if err == nil || !strings.HasPrefix(err.Error(), "--approvals r.json: ") {
		t.Fatalf("bad approvals: %v", err)
	}
}

// TestBindPasskey: a passkey file as a browser's authenticator would make
// it binds the key whose id the file's passkey has.
func TestBindPasskey(t *testing.T) {
	a, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example", "https://custody.example")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a.Enrollment("APPROVAL"))
	pf, pk, err := sign.ParsePasskeyFile(b)
	if err != nil {
		t.Fatal(err)
	}
	var doc statement.PrincipalDoc
	BindPasskey(&doc, pf)
	if got := PrincipalKeyID(&doc); got != pk.KeyID() || got != a.KeyID() || doc.AllowedTypes[0] != "APPROVAL" {
		t.Fatalf("bound key id %q, want %q", got, a.KeyID())
	}
}
