package main

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/clikit"
)

// folderHashes hashes every file of dir but Badger's lock file.
func folderHashes(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = sha256.Sum256(b)
		return nil
	})
	return out
}

// TestDamagedFolderCommands: with the MANIFEST of a data folder gone,
// serve refuses to start, audit reports the damage with exit 4, the
// reading commands fail naming it, and none of them changes a byte of the
// folder (Badger would have started empty and deleted every table file).
func TestDamagedFolderCommands(t *testing.T) {
	e := newLedgerEnv(t)
	if err := os.Remove(filepath.Join(e.dir, "db", "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	before := folderHashes(t, e.dir)
	r := custody(t, "", "serve", "--dir", e.dir, "--addr", "127.0.0.1:0")
	if r.code != clikit.ExitFail || !strings.Contains(r.stderr, "is damaged") || !strings.Contains(r.stderr, "MANIFEST") {
		t.Errorf("serve on a folder without its MANIFEST: exit %d\n%s", r.code, r.stderr)
	}
	r = custody(t, "", "audit", "--dir", e.dir)
	if r.code != clikit.ExitVerify || !strings.Contains(r.stderr, "is damaged") {
		t.Errorf("audit on a folder without its MANIFEST: exit %d\n%s", r.code, r.stderr)
	}
	r = custody(t, "", "checkpoint", "--dir", e.dir)
	if r.code == 0 || !strings.Contains(r.stderr, "MANIFEST") {
		t.Errorf("checkpoint on a folder without its MANIFEST: exit %d\n%s", r.code, r.stderr)
	}
	after := folderHashes(t, e.dir)
	if len(after) != len(before) {
		t.Fatalf("the folder held %d files, now %d", len(before), len(after))
	}
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
}

// TestCheckpointKeyOnDamagedFolder: `checkpoint --verifier-key` prints the same
// verifier key from a damaged folder (MANIFEST gone, a write-ahead log
// cut, the database folder gone) as from the whole one: it is what an
// operator needs to check the published log exactly then. The folder is
// left as it was.
func TestCheckpointKeyOnDamagedFolder(t *testing.T) {
	e := newLedgerEnv(t)
	want := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", e.dir, "--verifier-key").stdout)
	if !strings.HasPrefix(want, "test.example/custody+") {
		t.Fatalf("verifier key %q", want)
	}
	damage := map[string]func() error{
		"MANIFEST removed": func() error { return os.Remove(filepath.Join(e.dir, "db", "MANIFEST")) },
		"database removed": func() error { return os.RemoveAll(filepath.Join(e.dir, "db")) },
	}
	for _, name := range []string{"MANIFEST removed", "database removed"} {
		if err := damage[name](); err != nil {
			t.Fatal(err)
		}
		before := folderHashes(t, e.dir)
		r := custody(t, "", "checkpoint", "--dir", e.dir, "--verifier-key")
		if r.code != 0 || strings.TrimSpace(r.stdout) != want {
			t.Errorf("%s: checkpoint --verifier-key: exit %d, %q (want %q)\n%s", name, r.code, r.stdout, want, r.stderr)
		}
		after := folderHashes(t, e.dir)
		if len(after) != len(before) {
			t.Errorf("%s: the folder held %d files, now %d", name, len(before), len(after))
		}
		for p, h := range before {
			if after[p] != h {
				t.Errorf("%s: %s changed", name, p)
			}
		}
	}
	// The plain checkpoint still refuses a damaged folder.
	if r := custody(t, "", "checkpoint", "--dir", e.dir); r.code == 0 {
		t.Errorf("checkpoint (not --verifier-key) on a folder without its database: exit 0")
	}
}
