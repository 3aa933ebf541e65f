package cosign

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/witness"
)

// The request body of the C2SP tlog-witness example.
func TestRequestBodySpecExample(t *testing.T) {
	var proof []merkle.Hash
	for _, s := range []string{"PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=", "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=",
		"5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=", "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0="} {
		h, err := merkle.ParseHash(s)
		if err != nil {
			t.Fatal(err)
		}
		proof = append(proof, h)
	}
	cp := "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n" +
		"— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
	want := "old 20852014\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\njrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n" +
		"5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=\n/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=\n\n" + cp
	got, err := RequestBody(20852014, proof, []byte(cp))
	if err != nil || string(got) != want {
		t.Errorf("RequestBody =\n%s\nwant\n%s (%v)", got, want, err)
	}
	if _, err := RequestBody(0, proof, []byte(cp)); err == nil {
		t.Error("a proof from size 0 was written")
	}
	if _, err := RequestBody(1, make([]merkle.Hash, 64), []byte(cp)); err == nil {
		t.Error("a 64-line proof was written")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"0\n": 0, "20852163\n": 20852163} {
		if got, err := ParseSize([]byte(in)); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "1", "01\n", "-1\n", " 1\n", "1\n\n", "x\n", "18446744073709551616\n"} {
		if _, err := ParseSize([]byte(in)); err == nil {
			t.Errorf("ParseSize(%q) accepted it", in)
		}
	}
}

func TestCosignatureFor(t *testing.T) {
	body := "example.com/log\n7\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	logSig, _ := witness.NewSigner("example.com/log", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)))
	cp, err := note.Sign(&note.Note{Text: body}, logSig)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := witness.NewSigner("w.example", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32)))
	other, _ := witness.NewSigner("w2.example", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32)))
	w.Now = func() time.Time { return time.Unix(1700000000, 0) }
	line := func(s *Signer) string {
		msg, _ := note.Sign(&note.Note{Text: body}, s)
		return string(msg[len(body)+1:])
	}
	good, foreign := line(w), line(other)
	key := &w.Key
	if got, err := CosignatureFor(key, cp, []byte(foreign+good)); err != nil || got+"\n" != good {
		t.Errorf("CosignatureFor = %q, %v", got, err)
	}
	for name, answer := range map[string]string{
		"empty":            "",
		"no newline":       strings.TrimSuffix(good, "\n"),
		"another key only": foreign,
		"not a sig line":   "hello\n" + good,
		"another body": func() string {
			msg, _ := note.Sign(&note.Note{Text: strings.Replace(body, "\n7\n", "\n8\n", 1)}, w)
			return string(msg[len(body)+1:])
		}(),
	} {
		if _, err := CosignatureFor(key, cp, []byte(answer)); err == nil {
			t.Errorf("%s: accepted %q", name, answer)
		}
	}
}

type Signer = witness.Signer
