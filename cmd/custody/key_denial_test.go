package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyRotateDenial: custody key rotate-denial generates a key, lists it
// and appends the admin's log_key statement; DENIALs after it are signed
// by the new key, and the log still audits clean.
func TestKeyRotateDenial(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	must(t, 0, "init", "--dir", dir, "--origin", "example.com/rot")
	admin := filepath.Join(dir, "keys", "admin.key")
	r := must(t, 0, "key", "rotate-denial", "--dir", dir, "--admin-key", admin, "--json")
	var out struct {
		Old     string `json:"old_denial_keyid"`
		New     string `json:"denial_keyid"`
		KeyFile string `json:"key_file"`
		Index   uint64 `json:"index"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if out.KeyFile != "keys/denial-2.key" || out.Index != 1 || out.Old == out.New || len(out.New) != 64 {
		t.Fatalf("rotation: %+v", out)
	}
	// A second rotation generates keys/denial-3.key.
	r = must(t, 0, "key", "rotate-denial", "--dir", dir, "--admin-key", admin)
	if !strings.Contains(r.stdout, "keys/denial-3.key") || !strings.Contains(r.stdout, "retired for good") {
		t.Fatalf("second rotation:\n%s", r.stdout)
	}
	// The wrong admin key is refused.
	must(t, 0, "key", "generate", "--out", filepath.Join(dir, "other.key"))
	if r := custody(t, "", "key", "rotate-denial", "--dir", dir, "--admin-key", filepath.Join(dir, "other.key")); r.code == 0 || !strings.Contains(r.stderr, "not this log's admin key") {
		t.Fatalf("rotation with another key as the admin's: exit %d: %s", r.code, r.stderr)
	}
	must(t, 0, "audit", "--dir", dir)
}
