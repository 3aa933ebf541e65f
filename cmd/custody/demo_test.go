package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/demo"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
)

// TestDemo runs the demo into a fresh folder, checks every decision, and
// checks that every index it printed is in the log under the checkpoint it
// printed, with the verifier key it printed.
func TestDemo(t *testing.T) {
	dir := t.TempDir() + "/demo"
	r := must(t, 0, "demo", "--dir", dir)

	want := []struct{ verdict, kind, id, code string }{
		{"accepted", "PRINCIPAL", "principal_alice", ""},
		{"accepted", "CONFIRM", "confirm_42c1", ""},
		{"accepted", "DELEGATE", "del_booker", ""},
		{"accepted", "RECEIPT", "rcpt_1", ""},
		{"accepted", "RECEIPT", "rcpt_1_done", ""},
		{"denied", "RECEIPT", "rcpt_2", "limit_exceeded"},
		{"accepted", "DELEGATE", "del_checker", ""},
		{"denied", "DELEGATE", "del_helper", "depth_exceeded"},
		{"denied", "DELEGATE", "del_scout", "widening"},
		{"accepted", "STOP", "stop_alice", ""},
		{"denied", "RECEIPT", "rcpt_3", "workflow_stopped"},
	}
	line := regexp.MustCompile(`(?m)^#(\d+)\s+(accepted|denied)\s+(\S+)\s+(\S+)\s+(.*)$`)
	got := line.FindAllStringSubmatch(r.stdout, -1)
	if len(got) != len(want) {
		t.Fatalf("%d decision lines, want %d:\n%s", len(got), len(want), r.stdout)
	}
	var indexes []uint64
	for i, w := range want {
		g := got[i]
		if g[2] != w.verdict || g[3] != w.kind || g[4] != w.id || (w.code != "" && !strings.Contains(g[5], "-> "+w.code+": ")) {
			t.Errorf("decision %d: %q, want %+v", i, g[0], w)
		}
		n, _ := strconv.ParseUint(g[1], 10, 64)
		if n != uint64(i+1) {
			t.Errorf("decision %d printed index %d", i, n)
		}
		indexes = append(indexes, n)
	}

	// The printed checkpoint and verifier key.
	cpText := between(t, r.stdout, "checkpoint:\n", "\nverifier key:")
	vkey := strings.TrimSpace(between(t, r.stdout, "verifier key:\n", "\n\n"))
	cp, err := merkle.OpenCheckpoint([]byte(cpText), demo.Origin, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != uint64(len(want)+1) {
		t.Fatalf("checkpoint size %d", cp.Size)
	}
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.VerifierKey() != vkey {
		t.Fatal("printed verifier key is not the ledger's")
	}
	for _, i := range indexes {
		leaf, err := l.LeafBytes(i)
		if err != nil {
			t.Fatal(err)
		}
		proof, err := l.InclusionProof(i, cp.Size)
		if err != nil {
			t.Fatal(err)
		}
		if err := merkle.VerifyInclusion(i, cp.Size, merkle.LeafHash(leaf), proof, cp.Root); err != nil {
			t.Errorf("index %d: %v", i, err)
		}
	}

	// A second run into the same folder is refused; --force replaces it.
	if r := must(t, 1, "demo", "--dir", dir); !strings.Contains(r.stderr, "not empty") {
		t.Errorf("reuse: %q", r.stderr)
	}
	l.Close()
	must(t, 0, "demo", "--dir", dir, "--force", "--json")
}

func TestDemoRefusesForeignFolder(t *testing.T) {
	dir := t.TempDir()
	must(t, 0, "key", "generate", "--out", dir+"/precious.key")
	if r := must(t, 1, "demo", "--dir", dir, "--force"); !strings.Contains(r.stderr, "refusing to delete") {
		t.Errorf("--force on a non-ledger folder: %q", r.stderr)
	}
}

func between(t *testing.T, s, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		t.Fatalf("no %q in\n%s", start, s)
	}
	out, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("no %q after %q in\n%s", end, start, s)
	}
	return out
}
