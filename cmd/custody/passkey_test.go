package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestPrincipalPasskey: enroll and add-key read a passkey file, print the
// key id to compare, and the passkey then signs a STOP the ledger accepts.
func TestPrincipalPasskey(t *testing.T) {
	e := newLedgerEnv(t)
	alice, planner := e.key("user:alice"), e.key("agent:planner")
	e.run(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:alice", "--public-key", alice)

	phone, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example.com", "https://custody.example.com")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(e.root, "phone.json")
	b, _ := json.Marshal(phone.Enrollment())
	os.WriteFile(file, b, 0o644)

	// Exactly one of --public-key and --passkey.
	e.run(2, "principal", "add-key", "--admin-key", e.keys["admin"], "--name", "user:alice")
	e.run(2, "principal", "add-key", "--admin-key", e.keys["admin"], "--name", "user:alice", "--passkey", file, "--public-key", planner)
	// A passkey file whose origin is not under its rp_id names the rule.
	bad := phone.Enrollment()
	bad.Origins = []string{"https://evil.example"}
	badFile := filepath.Join(e.root, "bad.json")
	bb, _ := json.Marshal(bad)
	os.WriteFile(badFile, bb, 0o644)
	if r := e.run(1, "principal", "add-key", "--admin-key", e.keys["admin"], "--name", "user:alice", "--passkey", badFile); !strings.Contains(r.stderr, "neither rp_id") {
		t.Fatalf("bad passkey file: %q", r.stderr)
	}

	r := e.run(0, "principal", "add-key", "--admin-key", e.keys["admin"], "--name", "user:alice", "--passkey", file)
	if !strings.Contains(r.stdout, "keyid "+phone.KeyID()) {
		t.Fatalf("add-key does not print the keyid %s:\n%s", phone.KeyID(), r.stdout)
	}
	d := e.decision(3, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:bob", "--passkey", file)
	if d.ReasonCode != "identity_conflict" || d.KeyID != phone.KeyID() {
		t.Fatalf("the same passkey enrolled again: %+v", d)
	}
	e.run(0, "confirm", "--key", alice, "--id", "c1", "--workflow", "wf1", "--grantee", "agent:planner",
		"--grantee-key", planner, "--target", "portal/x", "--capability", "book", "--ttl", "15m", "--revocable")

	stop := &statement.StopDoc{Header: statement.Header{Type: statement.Stop, Timestamp: statement.FormatTimestamp(time.Now()),
		Log: "test.example/custody", Actor: "user:alice", Seq: 1}, RequestID: "stop1", Workflow: "wf1",
		StopScope: statement.StopChain, TakeoverMode: statement.TakeoverHuman, Reason: "from my phone"}
	payload, err := statement.Marshal(stop)
	if err != nil {
		t.Fatal(err)
	}
	env, err := phone.Sign("stop", payload, softauthn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := env.Canonical()
	path := filepath.Join(e.root, "stop.json")
	os.WriteFile(path, raw, 0o644)
	if r := e.run(0, "append", path); !strings.Contains(r.stdout+r.stderr, "accepted") {
		t.Fatalf("passkey STOP: %+v", r)
	}
	// The same STOP over the same payload, signed again: a repeat.
	env2, _ := phone.Sign("stop", payload, softauthn.Options{})
	raw2, _ := env2.Canonical()
	os.WriteFile(path, raw2, 0o644)
	if r := e.run(0, "append", "--json", path); !strings.Contains(r.stdout, `"duplicate":true`) {
		t.Fatalf("second assertion over the same STOP: %+v", r)
	}
	e.run(0, "audit")
}
