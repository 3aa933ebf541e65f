package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/verify"
	"github.com/custodylog/custody/witness"
)

func cosigner(t *testing.T, name string, seed byte) *witness.Signer {
	t.Helper()
	s, err := witness.NewSigner(name, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return time.Unix(1767225600, 0) }
	return s
}

// addCosignatures appends the signers' cosignature lines to a signed
// checkpoint, as the log does with its witnesses' answers.
func addCosignatures(t *testing.T, cp string, signers ...*witness.Signer) string {
	t.Helper()
	body, _, _ := strings.Cut(cp, "\n\n")
	out := cp
	for _, s := range signers {
		signed, err := note.Sign(&note.Note{Text: body + "\n"}, s)
		if err != nil {
			t.Fatal(err)
		}
		out += string(signed[len(body)+2:])
	}
	return out
}

func TestCheckWitnesses(t *testing.T) {
	w := newStandardWorld(t)
	ws := []*witness.Signer{cosigner(t, "w1.example", 1), cosigner(t, "w2.example", 2), cosigner(t, "w3.example", 3)}
	policy, err := witness.ParsePolicy([]byte("witness a " + ws[0].VerifierKey() + " http://127.0.0.1:1\n" +
		"witness b " + ws[1].VerifierKey() + "\nwitness c " + ws[2].VerifierKey() + "\ngroup g 2 a b c\nquorum g\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := w.Prove(w.s.Pending, false)

	// Two of three cosigned: valid, and the verdict names them.
	b2 := cloneBundle(b)
	b2.Checkpoint = addCosignatures(t, b.Checkpoint, ws[0], ws[2])
	v := mustVerify(t, b2, w.vkey)
	if !verify.CheckWitnesses(v, []byte(b2.Checkpoint), policy) || !v.Valid {
		t.Fatalf("2 of 3 cosigned, invalid:\n%s", text(v))
	}
	if len(v.Witnessed) != 2 || v.Witnessed[0].Witness != "a" || v.Witnessed[1].Witness != "c" {
		t.Errorf("Witnessed = %+v", v.Witnessed)
	}
	if out := text(v); !strings.Contains(out, "witness a: w1.example cosigned at 2026-01-01T00:00:00Z") {
		t.Errorf("the verdict does not name the witness and its time:\n%s", out)
	}

	// One cosigned: invalid, naming the missing ones.
	b1 := cloneBundle(b)
	b1.Checkpoint = addCosignatures(t, b.Checkpoint, ws[1])
	v = mustVerify(t, b1, w.vkey)
	if verify.CheckWitnesses(v, []byte(b1.Checkpoint), policy) || v.Valid {
		t.Fatalf("1 of 3 cosigned, valid:\n%s", text(v))
	}
	if f := v.Failure(); f == nil || f.Name != "witness quorum" || !strings.Contains(f.Detail, "missing a, c") {
		t.Errorf("failure: %+v", f)
	}

	// None: the sentence says the checkpoint carries no cosignature.
	v = mustVerify(t, b, w.vkey)
	if verify.CheckWitnesses(v, []byte(b.Checkpoint), policy) {
		t.Fatal("an uncosigned checkpoint meets the quorum")
	}
	if f := v.Failure(); f == nil || !strings.Contains(f.Detail, "carries no witness cosignature, and the policy requires group g: 2 of [a b c]") {
		t.Errorf("failure: %+v", f)
	}

	// Cosignatures still leave the log's own signature check alone: a
	// bundle verifies without a policy whatever cosignatures it carries.
	mustVerify(t, b2, w.vkey)
}
