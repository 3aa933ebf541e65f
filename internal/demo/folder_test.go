package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewDir(t *testing.T) {
	base, now := t.TempDir(), time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	first := NewDir(base, now)
	if first != filepath.Join(base, "demo-20261201-220000") {
		t.Fatalf("NewDir = %s", first)
	}
	os.Mkdir(first, 0o755)
	if second := NewDir(base, now); second != first+"-2" {
		t.Fatalf("the same second again: %s", second)
	}
}

func TestFresh(t *testing.T) {
	dir := t.TempDir()
	if err := Fresh(filepath.Join(dir, "none"), false); err != nil {
		t.Errorf("absent: %v", err)
	}
	if err := Fresh(dir, false); err != nil {
		t.Errorf("empty: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	if err := Fresh(dir, false); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("not empty: %v", err)
	}
	if err := Fresh(dir, true); err == nil || !strings.Contains(err.Error(), "refusing to delete") {
		t.Errorf("force on a folder that is not a ledger: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal("a folder that is not a ledger was deleted")
	}
	os.WriteFile(filepath.Join(dir, "custody.json"), []byte("{}"), 0o644)
	if err := Fresh(dir, true); err != nil {
		t.Errorf("force on a ledger: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("the ledger was not deleted")
	}
}
