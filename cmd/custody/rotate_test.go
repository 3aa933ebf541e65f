package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/cmd/keycmd"
)

// TestRotateLog rotates the checkpoint key from the command line: old
// checkpoints and new bundles verify with the key set the ledger prints,
// the old key alone fails new evidence with exit 4, and the steps refuse
// to run out of order.
func TestRotateLog(t *testing.T) {
	e := newLedgerEnv(t)
	alice := e.key("user:alice")
	e.decision(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:alice", "--public-key", alice)
	write := func(name, data string) string {
		p := filepath.Join(e.root, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldKey := write("old.vkey", e.run(0, "checkpoint", "--verifier-key").stdout)
	oldCP := write("old.cp", e.run(0, "checkpoint").stdout)
	oldSize := mustCheckpointSize(t, e)

	e.run(1, "key", "rotate-log", "--finish") // nothing to finish
	var started keycmd.RotationInfo
	if err := json.Unmarshal([]byte(e.run(0, "key", "rotate-log", "--json").stdout), &started); err != nil {
		t.Fatal(err)
	}
	if started.Finished || len(started.Signing) != 2 || started.KeyFile != "keys/checkpoint-2.key" || started.Size != oldSize {
		t.Fatalf("rotate-log: %+v", started)
	}
	if fi, err := os.Stat(filepath.Join(e.dir, started.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new key file: %v %v", fi, err)
	}
	r := e.run(1, "key", "rotate-log")
	if !strings.Contains(r.stderr, "a rotation is under way already") {
		t.Fatalf("second start: %q", r.stderr)
	}
	e.decision(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:bob", "--public-key", e.key("user:bob"))

	r = e.run(0, "key", "rotate-log", "--finish")
	if !strings.Contains(r.stdout, "finished at size 3") || !strings.Contains(r.stdout, "max_size=3") {
		t.Fatalf("finish: %s", r.stdout)
	}
	e.decision(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:carol", "--public-key", e.key("user:carol"))
	keys := write("log.keys", e.run(0, "checkpoint", "--verifier-key").stdout)
	if lines := strings.Count(strings.TrimSpace(e.run(0, "checkpoint", "--verifier-key").stdout), "\n"); lines != 1 {
		t.Fatalf("the key set has %d lines", lines+1)
	}

	bundle := filepath.Join(e.root, "carol.bundle.json")
	e.run(0, "prove", "--index", "3", "--out", bundle)
	must(t, 0, "verify", bundle, "--log-key", keys)
	if r := must(t, 4, "verify", bundle, "--log-key", oldKey); !strings.Contains(r.stdout+r.stderr, "checkpoint") {
		t.Fatalf("old key alone: %+v", r)
	}
	// The checkpoint from before the rotation is consistent with today's,
	// checked with the key set.
	newCP := write("new.cp", e.run(0, "checkpoint").stdout)
	proof := write("cons.proof", e.run(0, "proof", "consistency", "--from", itoa(oldSize)).stdout)
	must(t, 0, "verify", "consistency", oldCP, newCP, "--proof", proof, "--log-key", keys)
	must(t, 4, "verify", "consistency", oldCP, newCP, "--proof", proof, "--log-key", oldKey)

	// A static export audits clean under the key set.
	tiles := filepath.Join(e.root, "tiles")
	e.run(0, "export", "--tiles", tiles)
	must(t, 0, "audit", "--tiles", tiles, "--log-key", keys)
}
