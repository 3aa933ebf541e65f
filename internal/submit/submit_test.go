package submit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	_ "github.com/custodylog/custody/storage/badgerstore"
)

// chain returns envelopes in which every one depends on the one before:
// an enrollment, a grant under it, a delegation under that, then n
// pending receipts with consecutive seqs.
func chain(t *testing.T, origin string, admin ed25519.PrivateKey, adminSeq uint64, n int) [][]byte {
	t.Helper()
	key := func() ed25519.PrivateKey { _, k, _ := sign.GenerateKey(); return k }
	alice, planner, booker := key(), key(), key()
	b64 := func(k ed25519.PrivateKey) string { return sign.EncodePublicKey(k.Public().(ed25519.PublicKey)) }
	now := statement.FormatTimestamp(time.Now())
	hdr := func(k statement.Kind, actor string, seq uint64) statement.Header {
		return statement.Header{Type: k, Timestamp: now, Log: origin, Actor: actor, Seq: seq}
	}
	var lines [][]byte
	add := func(priv ed25519.PrivateKey, st statement.Statement) {
		if err := statement.Seal(st); err != nil {
			t.Fatal(err)
		}
		_, raw, err := statement.Sign(priv, st)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, raw)
	}
	add(admin, &statement.PrincipalDoc{Header: hdr(statement.Principal, "admin", adminSeq), PrincipalID: "p1", Op: "enroll", Name: "user:alice", PublicKey: b64(alice)})
	c := &statement.ConfirmDoc{Header: hdr(statement.Confirm, "user:alice", 1), ConfirmID: "c1", Grant: statement.Grant{
		Grantee: statement.Grantee{Name: "agent:p", PublicKey: b64(planner)}, TTLSeconds: 3600, Revocable: true,
		Scope: scope.Scope{WorkflowID: "wf", Targets: []string{"t/*"}, Capabilities: []string{"go"}}}}
	add(alice, c)
	d := &statement.DelegateDoc{Header: hdr(statement.Delegate, "agent:p", 1), DelegationID: "d1", ParentRef: "c1", ParentScopeHash: c.ScopeHash,
		Grant: statement.Grant{Grantee: statement.Grantee{Name: "agent:p/b", PublicKey: b64(booker)}, TTLSeconds: 1800, Revocable: true,
			Scope: scope.Scope{WorkflowID: "wf", Targets: []string{"t/a"}, Capabilities: []string{"go"}}}}
	add(planner, d)
	for i := 1; i <= n; i++ {
		add(booker, &statement.ReceiptDoc{Header: hdr(statement.Receipt, "agent:p/b", uint64(i)), ReceiptID: fmt.Sprintf("r%d", i),
			Workflow: "wf", StepID: "s", Action: "go", Target: "t/a", AuthorizationRef: "d1", Result: "pending", ScopeHash: d.ScopeHash})
	}
	return lines
}

func collect(t *testing.T, l Log, in string, n int) ([]Answer, int, error) {
	t.Helper()
	var got []Answer
	bad, err := All(context.Background(), l, strings.NewReader(in), n, func(a Answer) error { got = append(got, a); return nil })
	return got, bad, err
}

// TestLocalKeepsOrder: a local ledger is fed more than one window of
// envelopes that each depend on the one before; all are accepted, and the
// answers come in input order with their line numbers.
func TestLocalKeepsOrder(t *testing.T) {
	_, admin, _ := sign.GenerateKey()
	l, err := ledger.Init(t.TempDir(), "order.example/log", ledger.InitOptions{AdminKey: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lines := chain(t, l.Origin(), admin, 2, Window+100)
	in := "\n" + string(bytes.Join(lines, []byte("\n\n"))) + "\n"
	got, bad, err := collect(t, l, in, 1)
	if err != nil || bad != 0 || len(got) != len(lines) {
		t.Fatalf("%d answers, %d bad, %v; want %d accepted", len(got), bad, err, len(lines))
	}
	for i, a := range got {
		if a.Verdict != "accepted" || a.Line != 2+2*i || *a.Index != uint64(1+i) {
			t.Fatalf("answer %d: %+v, want accepted at line %d, index %d", i, a, 2+2*i, 1+i)
		}
	}
}

// TestRefusedAndDuplicate: garbage is refused (nothing logged) and counts
// as bad, and the envelopes after it go on; a resubmission is answered as
// the first time.
func TestRefusedAndDuplicate(t *testing.T) {
	_, admin, _ := sign.GenerateKey()
	l, err := ledger.Init(t.TempDir(), "order.example/log", ledger.InitOptions{AdminKey: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lines := chain(t, l.Origin(), admin, 2, 2)
	in := string(lines[0]) + "\n{\"not\": \"an envelope\"}\n" + string(bytes.Join(lines[1:], []byte("\n")))
	got, bad, err := collect(t, l, in, 1)
	if err != nil || bad != 1 || len(got) != 6 || got[1].Verdict != "refused" || got[1].Line != 2 || got[1].Index != nil {
		t.Fatalf("answers %+v, bad %d, %v", got, bad, err)
	}
	// The same receipts again: byte-identical, so answered as before
	// (duplicates), and accepted.
	got, bad, err = collect(t, l, string(bytes.Join(lines[3:], []byte("\n"))), 1)
	if err != nil || bad != 0 || !got[0].Duplicate {
		t.Fatalf("resubmitted: %+v, %d, %v", got, bad, err)
	}
}

func TestLineTooLong(t *testing.T) {
	_, admin, _ := sign.GenerateKey()
	l, err := ledger.Init(t.TempDir(), "order.example/log", ledger.InitOptions{AdminKey: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, _, err = collect(t, l, strings.Repeat("x", MaxLine+1), 1)
	if err == nil || !strings.Contains(err.Error(), "a line is longer than") {
		t.Fatalf("long line: %v", err)
	}
}

// TestServerInOrder: over HTTP with one in flight, a dependent chain is
// accepted in order; each answer was verified by the client.
func TestServerInOrder(t *testing.T) {
	s := servertest.Start(t, server.Options{})
	cl, err := remotelog.Client(context.Background(), s.URL, s.VKey, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := remotelog.Open(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := s.Ledger.NextSeq(sign.KeyID(s.AdminKey.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	lines := chain(t, r.Origin(), s.AdminKey, seq, 20)
	var pct []int64
	in := NewInput(bytes.NewReader(bytes.Join(lines, []byte("\n"))), int64(len(bytes.Join(lines, []byte("\n")))))
	bad, err := All(context.Background(), r, in, 1, func(a Answer) error {
		if !a.OK() {
			t.Errorf("line %d: %+v", a.Line, a)
		}
		pct = append(pct, in.Percent())
		return nil
	})
	if err != nil || bad != 0 || len(pct) != len(lines) || pct[len(pct)-1] != 100 {
		t.Fatalf("bad %d, %v, progress %v", bad, err, pct)
	}
}
