package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCreateAndReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Create(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, []byte("two"), 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want it refused", err)
	}
	if err := Replace(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v; want two", b, err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := os.Stat(p + ".new"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Replace left its temporary file: %v", err)
	}
}
