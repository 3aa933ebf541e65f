package merkle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

const testOrigin = "custody.example/log"

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func TestSignerMatchesSumdbNote(t *testing.T) {
	key := testKey(1)
	s, err := NewSigner(testOrigin, key)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := VerifierKey(testOrigin, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != v.Name() || s.KeyHash() != v.KeyHash() {
		t.Fatalf("signer %s+%08x, verifier %s+%08x", s.Name(), s.KeyHash(), v.Name(), v.KeyHash())
	}
	// note.NewSigner checks the key hash against the key it derives.
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", testOrigin, s.KeyHash(),
		base64.StdEncoding.EncodeToString(append([]byte{1}, key.Seed()...)))
	ns, err := note.NewSigner(skey)
	if err != nil {
		t.Fatalf("note.NewSigner rejects our key hash: %v", err)
	}
	n := &note.Note{Text: "hello\n"}
	ours, err := note.Sign(n, s)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := note.Sign(n, ns)
	if !bytes.Equal(ours, theirs) {
		t.Errorf("our signed note\n%s\ndiffers from sumdb/note's\n%s", ours, theirs)
	}
	if _, err := note.Open(ours, note.VerifierList(v)); err != nil {
		t.Errorf("note.Open: %v", err)
	}

	for _, name := range []string{"", "a b", "a+b", "a\nb", "\xff"} {
		if _, err := NewSigner(name, key); err == nil {
			t.Errorf("NewSigner(%q) succeeded", name)
		}
		if _, err := VerifierKey(name, key.Public().(ed25519.PublicKey)); err == nil {
			t.Errorf("VerifierKey(%q) succeeded", name)
		}
	}
	if _, err := NewSigner(testOrigin, key[:32]); err == nil {
		t.Error("NewSigner accepted a 32-byte key")
	}
	mismatched := append(append(ed25519.PrivateKey{}, key.Seed()...), testKey(2)[32:]...)
	if _, err := NewSigner(testOrigin, mismatched); err == nil {
		t.Error("NewSigner accepted a key whose public half does not match")
	}
}

func TestCheckpoints(t *testing.T) {
	key := testKey(1)
	s, _ := NewSigner(testOrigin, key)
	vkey, _ := VerifierKey(testOrigin, key.Public().(ed25519.PublicKey))
	root := LeafHash([]byte("root"))
	cp, err := SignCheckpoint(testOrigin, 42, root, s)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("%s\n42\n%s\n", testOrigin, root)
	if !bytes.HasPrefix(cp, []byte(body+"\n— "+testOrigin+" ")) {
		t.Fatalf("checkpoint:\n%s", cp)
	}
	got, err := OpenCheckpoint(cp, testOrigin, vkey)
	if err != nil || got != (Checkpoint{Origin: testOrigin, Size: 42, Root: root}) {
		t.Fatalf("OpenCheckpoint = %+v, %v", got, err)
	}
	v, _ := note.NewVerifier(vkey)
	if _, err := note.Open(cp, note.VerifierList(v)); err != nil {
		t.Errorf("note.Open: %v", err)
	}
	if c, _, _, err := log.ParseCheckpoint(cp, testOrigin, v); err != nil || c.Size != 42 || !bytes.Equal(c.Hash, root[:]) {
		t.Errorf("log.ParseCheckpoint = %+v, %v", c, err)
	}

	// Witness cosignatures from unknown keys are ignored, before or after
	// the log's signature.
	wskey, _, _ := note.GenerateKey(nil, "witness.example")
	ws, _ := note.NewSigner(wskey)
	for _, signers := range [][]note.Signer{{s, ws}, {ws, s}} {
		cosigned, err := note.Sign(&note.Note{Text: body}, signers...)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := OpenCheckpoint(cosigned, testOrigin, vkey); err != nil || got.Size != 42 {
			t.Errorf("cosigned checkpoint: %+v, %v", got, err)
		}
	}
	// A cosignature under the log's own name by another key is not the log's.
	impostor, _ := NewSigner(testOrigin, testKey(3))
	if cosigned, _ := note.Sign(&note.Note{Text: body}, s, impostor); true {
		if _, err := OpenCheckpoint(cosigned, testOrigin, vkey); err != nil {
			t.Errorf("checkpoint with an impostor cosignature: %v", err)
		}
	}

	otherVkey, _ := VerifierKey("other.example/log", testKey(2).Public().(ed25519.PublicKey))
	wrongKeyVkey, _ := VerifierKey(testOrigin, testKey(2).Public().(ed25519.PublicKey))
	onlyWitness, _ := note.Sign(&note.Note{Text: body}, ws)
	onlyImpostor, _ := note.Sign(&note.Note{Text: body}, impostor)
	tamper := func(old, new string) []byte {
		return bytes.Replace(cp, []byte(old), []byte(new), 1)
	}
	signed := func(text string) []byte {
		b, err := note.Sign(&note.Note{Text: text}, s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	short := base64.StdEncoding.EncodeToString(root[:31])
	for _, tc := range []struct {
		name   string
		text   []byte
		origin string
		vkey   string
		want   error
	}{
		{"wrong key", cp, testOrigin, wrongKeyVkey, ErrUnsignedCheckpoint},
		{"only a witness signature", onlyWitness, testOrigin, vkey, ErrUnsignedCheckpoint},
		{"impostor with the log's name", onlyImpostor, testOrigin, vkey, ErrUnsignedCheckpoint},
		{"tampered size", tamper("\n42\n", "\n43\n"), testOrigin, vkey, ErrUnsignedCheckpoint},
		{"tampered root", tamper(root.String(), EmptyRoot.String()), testOrigin, vkey, ErrUnsignedCheckpoint},
		{"tampered signature", tamper("— "+testOrigin+" ", "— "+testOrigin+" AAAA"), testOrigin, vkey, ErrUnsignedCheckpoint},
		{"wrong origin asked", cp, "other.example/log", otherVkey, ErrUnsignedCheckpoint},
		{"key for another origin", cp, testOrigin, otherVkey, ErrWrongOrigin},
		{"origin line of another log", signed("other.example/log\n42\n" + root.String() + "\n"), testOrigin, vkey, ErrWrongOrigin},
		{"leading zero size", signed(testOrigin + "\n042\n" + root.String() + "\n"), testOrigin, vkey, ErrMalformedCheckpoint},
		{"signed size", signed(testOrigin + "\n+42\n" + root.String() + "\n"), testOrigin, vkey, ErrMalformedCheckpoint},
		{"short root", signed(testOrigin + "\n42\n" + short + "\n"), testOrigin, vkey, ErrMalformedCheckpoint},
		{"extension line", signed(body + "extra\n"), testOrigin, vkey, ErrMalformedCheckpoint},
		{"two lines", signed(testOrigin + "\n42\n"), testOrigin, vkey, ErrMalformedCheckpoint},
		{"not a note", []byte(body), testOrigin, vkey, ErrMalformedCheckpoint},
	} {
		got, err := OpenCheckpoint(tc.text, tc.origin, tc.vkey)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: OpenCheckpoint = %+v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := OpenCheckpoint(cp, testOrigin, "not a key"); err == nil {
		t.Error("OpenCheckpoint accepted a malformed verifier key")
	}
	if _, err := SignCheckpoint("other.example/log", 1, root, s); !errors.Is(err, ErrWrongOrigin) {
		t.Errorf("SignCheckpoint with another origin: %v", err)
	}
	if _, err := SignCheckpoint("bad origin", 1, root, s); err == nil {
		t.Error("SignCheckpoint accepted an origin with a space")
	}
	if !strings.Contains(fmt.Sprint(func() error { _, err := OpenCheckpoint(onlyWitness, testOrigin, vkey); return err }()), testOrigin) {
		t.Error("unsigned checkpoint error does not name the log key")
	}
}
