package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/examples")

// seededActor is an actor whose key comes from a fixed seed, so that every
// signature, leaf and checkpoint below is the same on every run.
func seededActor(name string, seed byte) *actor {
	s := bytes.Repeat([]byte{seed}, 32)
	priv := ed25519.NewKeyFromSeed(s)
	return &actor{name: name, pub: priv.Public().(ed25519.PublicKey), priv: priv}
}

// TestExamples builds the seed scenario with fixed keys and a fixed clock
// and requires every format it produces to equal the files in
// testdata/examples (docs/FORMATS.md quotes them). Run with -update to
// rewrite them after a deliberate format change.
func TestExamples(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: mustTime("2026-03-19T08:12:00Z")}
	admin, logKey := seededActor("admin", 0xA1), seededActor("", 0xB2)
	l, err := Init(dir, "example.com/custody", InitOptions{AdminKey: admin.priv, LogKey: logKey.priv, Options: Options{Clock: clk.Now}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	admin.seq = 1
	w := &world{t: t, l: l, dir: dir, clock: clk, admin: admin}
	alice, planner, booker := seededActor("user:alice", 0x01), seededActor("agent:planner", 0x21), seededActor("agent:planner/booker", 0x22)
	hdr := func(a *actor, k statement.Kind) statement.Header {
		a.seq++
		return statement.Header{Type: k, Timestamp: statement.FormatTimestamp(clk.Now()), Log: "example.com/custody", Actor: a.name, Seq: a.seq}
	}
	w.must(admin, &statement.PrincipalDoc{Header: hdr(admin, statement.Principal), PrincipalID: "principal_alice", Op: statement.OpEnroll,
		Name: alice.name, PublicKey: alice.b64()}, authority.Accepted, "")
	c := &statement.ConfirmDoc{Header: hdr(alice, statement.Confirm), ConfirmID: "confirm_42c1", RiskLevel: "high", Grant: statement.Grant{
		Grantee: statement.Grantee{Name: planner.name, PublicKey: planner.b64()},
		Scope: scope.Scope{WorkflowID: "wf_9f3a", Capabilities: []string{"purchase", "submit_form"}, StepIDs: []string{"step_2", "step_3"},
			Targets: []string{"airline_portal/account_123"}},
		Limits: map[string]int64{"budget_usd": 800, "max_side_effects": 1}, TTLSeconds: 900, Revocable: true}}
	w.must(alice, c, authority.Accepted, "")
	d := &statement.DelegateDoc{Header: hdr(planner, statement.Delegate), DelegationID: "delegation_booker", ParentRef: c.ConfirmID,
		ParentScopeHash: c.ScopeHash, Grant: statement.Grant{
			Grantee: statement.Grantee{Name: booker.name, PublicKey: booker.b64()},
			Scope: scope.Scope{WorkflowID: "wf_9f3a", Capabilities: []string{"purchase"}, StepIDs: []string{"step_3"},
				Principals: []string{"agent:planner/booker"}, Targets: []string{"airline_portal/account_123"}},
			Limits: map[string]int64{"budget_usd": 742, "max_side_effects": 1}, TTLSeconds: 600, Revocable: true}}
	w.must(planner, d, authority.Accepted, "")
	clk.Add(30e9)
	receipt := func(id string, reserve map[string]int64) *statement.ReceiptDoc {
		return &statement.ReceiptDoc{Header: hdr(booker, statement.Receipt), ReceiptID: id, Workflow: "wf_9f3a", StepID: "step_3",
			Action: "purchase", Target: "airline_portal/account_123", AuthorizationRef: d.DelegationID,
			Result: statement.ResultPending, ScopeHash: d.ScopeHash, Reserve: reserve}
	}
	r := w.must(booker, receipt("receipt_book_1", map[string]int64{"budget_usd": 742, "max_side_effects": 1}), authority.Accepted, "")
	den := w.must(booker, receipt("receipt_book_2", map[string]int64{"budget_usd": 100, "max_side_effects": 0}), authority.Denied, authority.LimitExceeded)

	files := map[string][]byte{}
	entry := func(i uint64) *Entry {
		e, err := l.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	pretty := func(raw []byte) []byte {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			t.Fatal(err)
		}
		return append(b.Bytes(), '\n')
	}
	ce := entry(2)
	files["confirm.payload.json"] = append(ce.Envelope.Payload, '\n')
	envBytes, _ := canon.Marshal(ce.Envelope.Envelope)
	files["confirm.envelope.json"] = pretty(envBytes)
	files["confirm.leaf.json"] = append(ce.Leaf, '\n')
	files["genesis.payload.json"] = pretty(entry(0).Envelope.Payload)
	files["receipt.payload.json"] = pretty(entry(r.Index).Envelope.Payload)
	files["denial.payload.json"] = pretty(entry(den.Index).Envelope.Payload)
	desc, _ := c.Grant.Descriptor(c.Timestamp)
	descBytes, _ := canon.Marshal(desc)
	files["confirm.descriptor.json"] = append(descBytes, '\n')
	files["checkpoint.txt"] = l.Head().Checkpoint
	files["verifier-key.txt"] = []byte(l.VerifierKey() + "\n")
	b, err := l.Prove(r.Index, false)
	if err != nil {
		t.Fatal(err)
	}
	braw, _ := b.Marshal()
	files["receipt.bundle.json"] = pretty(braw)
	tp, err := l.TLogProof(r.Index)
	if err != nil {
		t.Fatal(err)
	}
	files["receipt.tlog-proof.txt"] = tp
	v, err := verify.VerifyBundle(b, l.VerifierKey())
	if err != nil || !v.Valid {
		t.Fatalf("example bundle does not verify: %v %+v", err, v.Failure())
	}

	root := filepath.Join("..", "testdata", "examples")
	if *update {
		os.MkdirAll(root, 0o755)
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, data := range files {
		want, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("%v (run go test ./ledger -run TestExamples -update)", err)
		}
		if !bytes.Equal(data, want) {
			t.Errorf("%s differs from testdata/examples/%s:\n%s", name, name, data)
		}
	}
}
