package witness_test

import (
	"bytes"
	"crypto/ed25519"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/witness"
)

var update = flag.Bool("update", false, "rewrite testdata/examples/checkpoint.cosigned.txt and witnesses.policy")

// exampleWitnesses are the fixed keys of the documented example
// (docs/FORMATS.md): seeds 0x11, 0x22, 0x33.
func exampleWitnesses(t *testing.T) []*witness.Signer {
	var out []*witness.Signer
	for i, name := range []string{"witness1.example.org", "witness2.example.net", "witness3.example.com"} {
		s, err := witness.NewSigner(name, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{byte(0x11 * (i + 1))}, 32)))
		if err != nil {
			t.Fatal(err)
		}
		at := int64(1767225600 + i)
		s.Now = func() time.Time { return time.Unix(at, 0) }
		out = append(out, s)
	}
	return out
}

// TestDocumentedExample keeps the cosigned checkpoint and the policy that
// docs/FORMATS.md shows true: witnesses 1 and 3 cosigned the example
// checkpoint, which meets the 2-of-3 policy and still verifies under the
// log's key alone.
func TestDocumentedExample(t *testing.T) {
	dir := filepath.Join("..", "testdata", "examples")
	ws := exampleWitnesses(t)
	policy := "# witnesses of example.com/custody\n" +
		"witness w1 " + ws[0].VerifierKey() + " https://witness1.example.org\n" +
		"witness w2 " + ws[1].VerifierKey() + " https://witness2.example.net/tlog\n" +
		"witness w3 " + ws[2].VerifierKey() + " https://witness3.example.com\n" +
		"group public 2 w1 w2 w3\n" +
		"quorum public\n"
	cp, err := os.ReadFile(filepath.Join(dir, "checkpoint.txt"))
	if err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(string(cp), "\n\n")
	cosigned := string(cp)
	for _, s := range []*witness.Signer{ws[0], ws[2]} {
		signed, err := note.Sign(&note.Note{Text: body + "\n"}, s)
		if err != nil {
			t.Fatal(err)
		}
		cosigned += string(signed[len(body)+2:])
	}
	if *update {
		os.WriteFile(filepath.Join(dir, "witnesses.policy"), []byte(policy), 0o644)
		os.WriteFile(filepath.Join(dir, "checkpoint.cosigned.txt"), []byte(cosigned), 0o644)
	}
	gotPolicy, _ := os.ReadFile(filepath.Join(dir, "witnesses.policy"))
	gotCosigned, _ := os.ReadFile(filepath.Join(dir, "checkpoint.cosigned.txt"))
	if string(gotPolicy) != policy || string(gotCosigned) != cosigned {
		t.Fatalf("testdata/examples differs from what the example's keys make (go test -update to rewrite):\n%s\n%s", gotPolicy, gotCosigned)
	}
	p, err := witness.ParsePolicy(gotPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ev := p.Evaluate(gotCosigned)
	if !ev.Satisfied || len(ev.Signed) != 2 || ev.Signed[1].Witness != "w3" || ev.Signed[1].Time.Unix() != 1767225602 {
		t.Fatalf("%+v", ev)
	}
	vkey, _ := os.ReadFile(filepath.Join(dir, "verifier-key.txt"))
	if _, err := merkle.OpenCheckpoint(gotCosigned, "example.com/custody", strings.TrimSpace(string(vkey))); err != nil {
		t.Fatalf("the log's key no longer verifies the cosigned checkpoint: %v", err)
	}
}
