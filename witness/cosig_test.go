package witness

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// The checkpoint and cosignature of the C2SP tlog-cosignature example.
const (
	specBody = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	specLine = "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA=="
	// The message the spec shows for that example's time.
	specMessage = "cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)

func TestSpecExampleMessage(t *testing.T) {
	if got := string(Message([]byte(specBody), 1679315147)); got != specMessage {
		t.Errorf("Message =\n%q\nwant\n%q", got, specMessage)
	}
}

func TestSpecExampleSignatureLine(t *testing.T) {
	_, b64, _ := strings.Cut(strings.TrimPrefix(specLine, "— "), " ")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 4+sigSize {
		t.Fatalf("spec line: %d bytes, %v", len(raw), err)
	}
	if id := binary.BigEndian.Uint32(raw); id != 0x8d66cf3f {
		t.Errorf("key id %08x, want 8d66cf3f", id)
	}
	tm, err := SignatureTime(b64)
	if err != nil || tm.Unix() != 1679315147 {
		t.Errorf("SignatureTime = %v, %v; want 1679315147 (the time of the spec's message example)", tm.Unix(), err)
	}
}

// Published cosignature/v1 verifier keys and the key ids they carry,
// recomputed here: a witness of the public network (type 0x04), and a
// plain Ed25519 key (type 0x01) read as the cosignature key of the same
// public key (the 0x04 id, SHA-256("TEST\n" || 0x04 || key)[:4]).
func TestKeyIDKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		vkey   string
		wantID uint32
		want04 string
	}{
		{"remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2", 0xda77ade7,
			"remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"},
		{"TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6", 0xfdd2dbc7,
			"TEST+fdd2dbc7+BAcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6"},
	} {
		k, err := ParseKey(tc.vkey)
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", tc.vkey, err)
		}
		if k.KeyHash() != tc.wantID {
			t.Errorf("%s: key id %08x, want %08x", tc.vkey, k.KeyHash(), tc.wantID)
		}
		if KeyID(k.Name(), k.PublicKey()) != tc.wantID {
			t.Errorf("%s: KeyID disagrees", tc.vkey)
		}
		if got := k.VerifierKey(); got != tc.want04 {
			t.Errorf("VerifierKey = %s, want %s", got, tc.want04)
		}
	}
}

func TestParseKeyRejects(t *testing.T) {
	for _, vkey := range []string{
		"",
		"name",
		"name+da77ade7",
		"remora.n621.de+da77ade8+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2",  // wrong id
		"remora.n621.de+da77ade+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2",   // 7 digits
		"remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw",   // short
		"remora.n621.de+da77ade7+A+vN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2",  // type 0x03
		"remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2=", // bad base64
		"sp ace+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2",
		"x+00000000+Bg==",
	} {
		if _, err := ParseKey(vkey); err == nil {
			t.Errorf("ParseKey(%q) accepted it", vkey)
		}
	}
}

// fixedSigner is a cosigner with a key from a fixed seed.
func fixedSigner(t testing.TB, name string, seed byte, at int64) *Signer {
	t.Helper()
	s, err := NewSigner(name, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return time.Unix(at, 0) }
	return s
}

// A cosignature made from a fixed key over the spec's checkpoint at the
// spec's time. The line was checked apart from this package with
// github.com/transparency-dev/formats/note (NewVerifierForCosignatureV1),
// the implementation Tessera and omniwitness use.
const (
	fixedVKey = "witness.example.com/w1+8122a5ab+BOpKbGPinFIKvvVQexMuxfmVR3auvr57kkIe6mkURtIs"
	fixedLine = "— witness.example.com/w1 gSKlqwAAAABkGFDLWr4Jea05CAgwNVtwky0Jgz6WfX0QJgM//FkB/W9BoT9TX0DkTxG+2cT4p/ViKNhUM/SnUwFcYQzugGFQ15LwDw=="
)

func TestFixedKeyKnownAnswer(t *testing.T) {
	s := fixedSigner(t, "witness.example.com/w1", 7, 1679315147)
	if got := s.VerifierKey(); got != fixedVKey {
		t.Errorf("verifier key %s, want %s", got, fixedVKey)
	}
	msg, err := note.Sign(&note.Note{Text: specBody}, s)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(string(msg[len(specBody)+1:]), "\n")
	if line != fixedLine {
		t.Errorf("cosignature line\n%s\nwant\n%s", line, fixedLine)
	}
	k, err := ParseKey(fixedVKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open([]byte(specBody+"\n"+fixedLine+"\n"), note.VerifierList(k)); err != nil {
		t.Errorf("the known cosignature does not verify: %v", err)
	}
	// One bit of the body changed: it no longer verifies.
	other := strings.Replace(specBody, "20852163", "20852164", 1)
	if _, err := note.Open([]byte(other+"\n"+fixedLine+"\n"), note.VerifierList(k)); err == nil {
		t.Error("the cosignature verifies over another checkpoint")
	}
}
