package main

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestAppendKeepsOrder: a file in which every envelope depends on the one
// before (a grant, a delegation under it, then receipts with consecutive
// seqs) is accepted whole by a local append, which keeps many in flight.
func TestAppendKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	_, adminPriv, _ := sign.GenerateKey()
	l, err := ledger.Init(dir, "order.example/log", ledger.InitOptions{AdminKey: adminPriv})
	if err != nil {
		t.Fatal(err)
	}
	origin := l.Origin()
	l.Close()
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
	add(adminPriv, &statement.PrincipalDoc{Header: hdr(statement.Principal, "admin", 2), PrincipalID: "p1", Op: "enroll", Name: "user:alice", PublicKey: b64(alice)})
	c := &statement.ConfirmDoc{Header: hdr(statement.Confirm, "user:alice", 1), ConfirmID: "c1", Grant: statement.Grant{
		Grantee: statement.Grantee{Name: "agent:p", PublicKey: b64(planner)}, TTLSeconds: 3600, Revocable: true,
		Scope: scope.Scope{WorkflowID: "wf", Targets: []string{"t/*"}, Capabilities: []string{"go"}}}}
	add(alice, c)
	d := &statement.DelegateDoc{Header: hdr(statement.Delegate, "agent:p", 1), DelegationID: "d1", ParentRef: "c1", ParentScopeHash: c.ScopeHash,
		Grant: statement.Grant{Grantee: statement.Grantee{Name: "agent:p/b", PublicKey: b64(booker)}, TTLSeconds: 1800, Revocable: true,
			Scope: scope.Scope{WorkflowID: "wf", Targets: []string{"t/a"}, Capabilities: []string{"go"}}}}
	add(planner, d)
	const receipts = 600
	for i := 1; i <= receipts; i++ {
		add(booker, &statement.ReceiptDoc{Header: hdr(statement.Receipt, "agent:p/b", uint64(i)), ReceiptID: fmt.Sprintf("r%d", i),
			Workflow: "wf", StepID: "s", Action: "go", Target: "t/a", AuthorizationRef: "d1", Result: "pending", ScopeHash: d.ScopeHash})
	}
	file := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(file, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	r := must(t, 0, "append", "--dir", dir, file)
	if got := strings.Count(r.stdout, "accepted"); got != receipts+3 {
		t.Fatalf("%d accepted, want %d:\n%s", got, receipts+3, r.stdout)
	}
}
