package sign

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/fuzzseed"
)

// sameError reports whether two envelope errors are the same in every
// field a caller can see.
func sameError(a, b error) bool {
	var ea, eb *Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return false
	}
	return ea.Code == eb.Code && ea.Field == eb.Field && ea.Msg == eb.Msg && fmt.Sprint(ea.Err) == fmt.Sprint(eb.Err) && a.Error() == b.Error()
}

// refBase64 is decodeBase64Strict as it was before the shortcut.
func refBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid standard base64: %v", err)
	}
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("non-canonical base64 (line breaks or other characters)")
	}
	return b, nil
}

// checkFastEnvelope is the differential check behind FuzzFastEnvelope. It
// reports whether the canonical reader took data.
func checkFastEnvelope(t *testing.T, data []byte) bool {
	t.Helper()
	_, fast := readEnvelope(data)
	got, gotErr := ParseEnvelope(data)
	want, wantErr := parseEnvelopeReflect(data)
	gotP, gotC, gotCErr := ParseEnvelopeCanonical(data)
	switch {
	case (gotErr == nil) != (wantErr == nil) || (gotCErr == nil) != (wantErr == nil):
		t.Fatalf("%q: ParseEnvelope error %v, ParseEnvelopeCanonical error %v, reference error %v", data, gotErr, gotCErr, wantErr)
	case wantErr != nil:
		if !sameError(gotErr, wantErr) || !sameError(gotCErr, wantErr) {
			t.Fatalf("%q: errors %#v and %#v, reference %#v", data, gotErr, gotCErr, wantErr)
		}
	default:
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotP, want) {
			t.Fatalf("%q: read %#v and %#v, reference %#v", data, got, gotP, want)
		}
		ref, err := canon.Marshal(want.Envelope)
		if err != nil || !bytes.Equal(gotC, ref) {
			t.Fatalf("%q: canonical form %q, reference %q (%v)", data, gotC, ref, err)
		}
	}
	checkCanonical(t, got)
	b1, e1 := decodeBase64Strict(string(data))
	b2, e2 := refBase64(string(data))
	if !bytes.Equal(b1, b2) || fmt.Sprint(e1) != fmt.Sprint(e2) {
		t.Fatalf("%q: base64 %x %v, reference %x %v", data, b1, e1, b2, e2)
	}
	// Any four strings make an envelope to encode, valid or not.
	parts := bytes.SplitN(data, []byte{'|'}, 4)
	for len(parts) < 4 {
		parts = append(parts, nil)
	}
	for n := range 3 {
		e := Envelope{Payload: string(parts[0]), PayloadType: string(parts[1])}
		for range n {
			e.Signatures = append(e.Signatures, Signature{KeyID: string(parts[2]), Sig: string(parts[3])})
		}
		checkCanonical(t, &Parsed{Envelope: e})
	}
	return fast
}

// checkCanonical compares Envelope.Canonical with canon.Marshal.
func checkCanonical(t *testing.T, p *Parsed) {
	t.Helper()
	if p == nil {
		return
	}
	got, gotErr := p.Envelope.Canonical()
	want, wantErr := canon.Marshal(p.Envelope)
	if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%#v: Canonical %q %v, canon.Marshal %q %v", p.Envelope, got, gotErr, want, wantErr)
	}
}

// FuzzFastEnvelope: the hand-written envelope reader and encoder agree
// with canon's reflection path on every input.
func FuzzFastEnvelope(f *testing.F) {
	fuzzseed.Add(f)
	for _, s := range adversarialEnvelopes(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastEnvelope(t, data) })
}

// TestFastEnvelopeTaken: canonical envelopes take the hand-written
// reader, and the adversarial corpus's envelope edits agree with the
// reference.
func TestFastEnvelopeTaken(t *testing.T) {
	env, err := Sign(seedKey(1), "receipt", []byte(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := env.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !checkFastEnvelope(t, raw) {
		t.Fatal("a canonical envelope did not take the hand-written reader")
	}
	_, c, err := ParseEnvelopeCanonical(raw)
	if err != nil || &c[0] != &raw[0] {
		t.Fatalf("canonical input was copied or re-encoded (%v)", err)
	}
	for _, s := range adversarialEnvelopes(t) {
		checkFastEnvelope(t, s)
	}
}

// adversarialEnvelopes applies every envelope edit of testdata/adversarial
// to a canonical envelope, with the placeholders filled in from it.
func adversarialEnvelopes(tb testing.TB) [][]byte {
	priv := seedKey(1)
	env, err := Sign(priv, "receipt", []byte(`{"action":"read","seq":1}`))
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := env.Canonical()
	if err != nil {
		tb.Fatal(err)
	}
	s := env.Signatures[0]
	expand := func(x string) string {
		return fuzzseed.ExpandPlaceholders(x, func(name string) string {
			switch name {
			case "keyid", "rawkeyid", "hash":
				return s.KeyID
			case "KEYID":
				return strings.ToUpper(s.KeyID)
			case "sig":
				return s.Sig
			case "type":
				return env.PayloadType
			case "payload":
				return env.Payload
			}
			return "1"
		})
	}
	out := [][]byte{raw}
	for _, data := range fuzzseed.AdversarialCases(tb) {
		var c struct {
			Steps []struct {
				EnvelopeEdit []struct{ From, To string } `json:"envelope_edit"`
			}
		}
		if err := json.Unmarshal(data, &c); err != nil {
			tb.Fatal(err)
		}
		for _, st := range c.Steps {
			edited := raw
			for _, e := range st.EnvelopeEdit {
				edited = bytes.Replace(edited, []byte(expand(e.From)), []byte(expand(e.To)), 1)
				out = append(out, edited)
			}
		}
	}
	return out
}

// BenchmarkParseEnvelopeCanonical compares the ledger's envelope parse
// (parse and canonical form) by the hand-written reader with the
// reflection path it replaces.
func BenchmarkParseEnvelopeCanonical(b *testing.B) {
	env, _ := Sign(seedKey(1), "receipt", bytes.Repeat([]byte(`{"action":"read","seq":1}`), 20))
	raw, _ := env.Canonical()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := ParseEnvelopeCanonical(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := parseEnvelopeReflect(raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := canon.Marshal(p.Envelope); err != nil {
				b.Fatal(err)
			}
		}
	})
}
