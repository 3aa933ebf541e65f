package verify_test

// testdata/verify holds evidence made by a real ledger (and one rogue log)
// for the CLI tests and as examples for users; testdata/fuzz/FuzzVerifyBundle
// holds the fuzz seeds. `go test ./verify -run TestTestdata -update`
// rewrites both; without -update the test checks every file still gives
// the verdict its name promises.

import (
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/verify"
)

var update = flag.Bool("update", false, "rewrite testdata/verify and the FuzzVerifyBundle seeds")

func testdataDir() string { return filepath.Join("..", "testdata", "verify") }

// testdataFiles makes every file: name -> content.
func testdataFiles(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	put := func(name string, b *verify.Bundle) {
		raw, err := b.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		files[name] = append(raw, '\n')
	}
	w := newStandardWorld(t)
	files["log.vkey"] = []byte(w.vkey + "\n")
	put("receipt.bundle.json", w.Prove(w.s.Pending, false))
	put("outcome.bundle.json", w.Prove(w.s.Outcome, false))
	put("workflow.bundle.json", w.Prove(w.s.Pending, true))
	put("denial.bundle.json", w.Prove(w.s.Denial, false))
	put("genesis.bundle.json", w.Prove(0, false))
	tampered := cloneBundle(w.Prove(w.s.Pending, false))
	h, _ := base64.StdEncoding.DecodeString(tampered.Entries[3].Proof[0])
	h[0] ^= 1
	tampered.Entries[3].Proof[0] = base64.StdEncoding.EncodeToString(h)
	put("tampered-proof.invalid.bundle.json", tampered)
	tp, err := w.L.TLogProof(w.s.Pending)
	if err != nil {
		t.Fatal(err)
	}
	files["receipt.tlog-proof"] = tp
	old := w.L.Head()
	files["checkpoint.old"] = old.Checkpoint
	w.Enroll(testlog.NewActor("user:carol"), "p_carol")
	cur := w.L.Head()
	files["checkpoint.new"] = cur.Checkpoint
	proof, err := w.L.ConsistencyProof(old.Size, cur.Size)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, h := range proof {
		sb.WriteString(h.String() + "\n")
	}
	files["consistency.proof"] = []byte(sb.String())

	// A rogue log, same keys, that accepted a widening DELEGATE.
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	c := &cast{r: r, au: r.Author, alice: testlog.NewActor("user:alice"), planner: testlog.NewActor("agent:planner")}
	r.Accept(r.Admin, c.au.Enroll(r.Admin, c.alice, "p_alice"))
	r.Accept(c.alice, c.au.Confirm(c.alice, "c1", c1Grant(c.planner)))
	g := c1Grant(testlog.NewActor("agent:planner/wide"))
	g.Scope.Targets = []string{"*"}
	bad := r.Accept(c.planner, c.au.Delegate(c.planner, "d2w", "c1", g))
	put("rogue-widening.invalid.bundle.json", r.Bundle(bad, false))
	return files
}

// want is what each file must give.
var testdataWant = map[string]string{
	"receipt.bundle.json":                "",
	"outcome.bundle.json":                "",
	"workflow.bundle.json":               "",
	"denial.bundle.json":                 "",
	"genesis.bundle.json":                "",
	"tampered-proof.invalid.bundle.json": cInclusion,
	"rogue-widening.invalid.bundle.json": cDecisions,
}

func TestTestdata(t *testing.T) {
	dir := testdataDir()
	if *update {
		files := testdataFiles(t)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		seeds := filepath.Join(fuzzseed.Dir(), "FuzzVerifyBundle")
		if err := os.MkdirAll(seeds, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if strings.HasSuffix(name, ".bundle.json") {
				if err := os.WriteFile(filepath.Join(seeds, strings.TrimSuffix(name, ".bundle.json")), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, data := range map[string]string{
			"empty-object": `{}`,
			"no-entries":   `{"checkpoint":"","format":"custody-bundle/v1","origin":"custody.test/log","subject":0}`,
			"bad-leaf":     `{"checkpoint":"custody.test/log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n","entries":[{"index":0,"leaf":"e30="}],"format":"custody-bundle/v1","origin":"custody.test/log","subject":0}`,
		} {
			if err := os.WriteFile(filepath.Join(seeds, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	vkey, err := os.ReadFile(filepath.Join(dir, "log.vkey"))
	if err != nil {
		t.Fatalf("%v (run with -update to make it)", err)
	}
	if string(vkey) != fuzzKey+"\n" {
		t.Errorf("log.vkey is not the fuzz target's key")
	}
	for name, want := range testdataWant {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		v, err := checkBytes(raw, string(vkey))
		if got := failedCheck(v, err); got != want {
			t.Errorf("%s: first failed check %q, want %q", name, orValid(got), orValid(want))
		}
	}
	tp, err := os.ReadFile(filepath.Join(dir, "receipt.tlog-proof"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyTLogProof(tp, string(vkey)); err != nil || !v.Valid {
		t.Errorf("receipt.tlog-proof: %v %v", err, v)
	}
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hashes, err := verify.ParseHashes(read("consistency.proof"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyConsistency(read("checkpoint.old"), read("checkpoint.new"), hashes, string(vkey)); err != nil || !v.Valid {
		t.Errorf("consistency: %v %v", err, v)
	}
}
