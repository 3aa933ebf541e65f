package ledger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
)

// TestRetiredKeyPinnedToRoot: finishing a rotation pins the retired key to
// the head's size and root (DESIGN §6), and a data folder whose config was
// written before the root was recorded gets it from its own tree when the
// ledger opens, so the key set it hands out is always pinned.
func TestRetiredKeyPinnedToRoot(t *testing.T) {
	w := newWorld(t, Options{})
	opts := Options{Clock: w.clock.Now}
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	w.must(alice, w.confirm(alice, "confirm_1", grant(newActor(t, "agent:p"), "wf_1", []string{"db/x"}, []string{"write"}, nil, nil, 600)),
		authority.Accepted, "")
	oldKey := w.l.VerifierKey()
	w.l.Close()
	_, newPriv, _ := sign.GenerateKey()
	if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, "keys/checkpoint-2.key"), newPriv, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := RotateCheckpointKey(w.dir, "keys/checkpoint-2.key", opts); err != nil {
		t.Fatal(err)
	}
	r, err := FinishRotation(w.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(w.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := l.Head()
	l.Close()
	pinned := merkle.RetiredLine(oldKey, h.Size, h.Root)
	if !strings.Contains(r.Keys, pinned) {
		t.Fatalf("key set %q does not hold %q", r.Keys, pinned)
	}

	// A config from before the root was recorded.
	path := filepath.Join(w.dir, configName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg config
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.RetiredKeys) != 1 || cfg.RetiredKeys[0].Root == "" {
		t.Fatalf("config's retired keys: %+v", cfg.RetiredKeys)
	}
	cfg.RetiredKeys[0].Root = ""
	out, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.Contains(l.VerifierKey(), pinned) {
		t.Fatalf("reopened without a recorded root, the key set is %q, want it to hold %q", l.VerifierKey(), pinned)
	}
}

// TestExportAcrossRotation: an export made before a checkpoint key
// rotation, whose checkpoint the old key alone signed, is brought up to
// date after it: its root is this log's at its size.
func TestExportAcrossRotation(t *testing.T) {
	w := newWorld(t, Options{})
	opts := Options{Clock: w.clock.Now}
	w.enroll(newActor(t, "user:alice"))
	out := t.TempDir()
	if err := Export(w.l, out, nil); err != nil {
		t.Fatal(err)
	}
	w.enroll(newActor(t, "user:bob")) // the old key is retired at a later head
	w.l.Close()
	_, newPriv, _ := sign.GenerateKey()
	if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, "keys/checkpoint-2.key"), newPriv, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := RotateCheckpointKey(w.dir, "keys/checkpoint-2.key", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := FinishRotation(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	var err error
	if w.l, err = Open(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	w.enroll(newActor(t, "user:carol"))
	if err := Export(w.l, out, nil); err != nil {
		t.Fatalf("exporting over an export from before the rotation: %v", err)
	}
}
