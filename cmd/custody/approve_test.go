package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/server/api"
)

// TestApproveFromTheCommandLine: a grant with --approvals holds a big
// step (exit 0, "held"), custody approvals lists it with what it needs,
// custody approve by a named principal is accepted (exit 0), a second
// answer and a stranger's are denied (exit 3), and custody append prints
// "held N" for a held envelope.
func TestApproveFromTheCommandLine(t *testing.T) {
	e := newLedgerEnv(t)
	alice, bob, mallory, agent := e.key("user:alice"), e.key("user:bob"), e.key("user:mallory"), e.key("agent:buyer")
	for name, k := range map[string]string{"user:alice": alice, "user:bob": bob, "user:mallory": mallory} {
		e.decision(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", name, "--public-key", k)
	}
	rules := filepath.Join(e.root, "rules.json")
	os.WriteFile(rules, []byte(`[{"rule_id":"big","capabilities":["purchase"],"above":{"usd":100},"approvers":["user:bob"],"quorum":1,"ttl_seconds":900}]`), 0o644)
	d := e.decision(0, "confirm", "--key", alice, "--grantee", "agent:buyer", "--grantee-key", agent, "--workflow", "wf_cli",
		"--target", "shop/*", "--capability", "purchase", "--limit", "usd=1000", "--ttl", "1h", "--approvals", rules, "--id", "c1")
	if d.Verdict != "accepted" {
		t.Fatalf("confirm: %+v", d)
	}
	bad := filepath.Join(e.root, "bad.json")
	os.WriteFile(bad, []byte(`[{"rule_id":"x","capabilities":["purchase"],"approvers":["user:bob"],"quorum":0,"ttl_seconds":9}]`), 0o644)
	if r := custody(t, "", "confirm", "--dir", e.dir, "--key", alice, "--grantee", "agent:b2", "--grantee-key", e.key("agent:b2"), "--workflow", "wf_cli2",
		"--target", "shop/*", "--capability", "purchase", "--ttl", "1h", "--approvals", bad); r.code == 0 || !strings.Contains(r.stderr, "quorum 0") {
		t.Fatalf("a bad rules file: %+v", r)
	}

	r := e.run(0, "receipt", "--key", agent, "--auth", "c1", "--step", "s1", "--action", "purchase", "--target", "shop/tv", "--reserve", "usd=500", "--id", "r_big")
	if !strings.HasPrefix(r.stdout, "held: RECEIPT r_big at index 5 until ") || !strings.Contains(r.stdout, "needs: 1 of user:bob (rule big of c1)") {
		t.Fatalf("held receipt: %q", r.stdout)
	}
	var list api.HeldList
	if err := json.Unmarshal([]byte(e.run(0, "approvals", "--json", "--approver", "user:bob").stdout), &list); err != nil || len(list.Held) != 1 || list.Held[0].ReceiptID != "r_big" {
		t.Fatalf("approvals: %+v %v", list, err)
	}
	if out := e.run(0, "approvals").stdout; !strings.Contains(out, "r_big (index 5, workflow wf_cli) by agent:buyer: purchase on shop/tv, step s1, reserve usd=500") || !strings.Contains(out, "needs 1 of user:bob") {
		t.Fatalf("approvals text: %q", out)
	}
	if r := e.run(3, "approve", "--key", mallory, "--receipt", "r_big"); !strings.Contains(r.stderr, "not_approver") {
		t.Fatalf("a stranger approves: %+v", r)
	}
	d = e.decision(0, "approve", "--key", bob, "--receipt", "r_big", "--reason", "fine")
	if d.Verdict != "accepted" || d.Kind != "APPROVAL" {
		t.Fatalf("approve: %+v", d)
	}
	if r := e.run(3, "approve", "--key", bob, "--receipt", "r_big", "--reject"); !strings.Contains(r.stderr, "not_held") {
		t.Fatalf("a second answer: %+v", r)
	}
	if out := e.run(0, "approvals").stdout; out != "nothing is held for approval\n" {
		t.Fatalf("after the approval: %q", out)
	}

	// custody append prints held N for a held envelope.
	env := filepath.Join(e.root, "r2.json")
	e.run(0, "receipt", "--key", agent, "--auth", "c1", "--step", "s2", "--action", "purchase", "--target", "shop/tv", "--reserve", "usd=200", "--id", "r_2", "--out", env)
	if r := e.run(0, "append", env); !strings.HasPrefix(r.stdout, "held 9 until ") {
		t.Fatalf("append: %q", r.stdout)
	}
}
