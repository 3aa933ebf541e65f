package sign

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"testing"
)

const fuzzPassphrase = "fuzz"

// fuzzKDFLimits keep each fuzz execution cheap: a seed may not ask for more
// than 1 MiB of scrypt or 1000 PBKDF2 rounds.
var fuzzKDFLimits = kdfLimits{maxScryptMem: 1 << 20, maxScryptP: 2, maxPBKDF2: 1000}

func cheapEncrypt(t testing.TB, der, pass []byte, kdf string) []byte {
	t.Helper()
	spec := kdfSpec{pbkdf2Iter: 10}
	if kdf == "scrypt" {
		spec = kdfSpec{scryptN: 16, scryptR: 1, scryptP: 1}
	}
	out, err := encryptPBES2(der, pass, spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestCheapKDFRoundTrip(t *testing.T) {
	plain, _ := MarshalPrivateKeyPEM(seedKey(1), nil)
	block, _ := decodeOnePEM(plain)
	for _, kdf := range []string{"scrypt", "pbkdf2"} {
		p := pemEncode(pemEncrypted, cheapEncrypt(t, block.Bytes, []byte("pw"), kdf))
		got, err := parsePrivateKeyPEM(p, constPass("pw"), fuzzKDFLimits)
		if err != nil || !got.Equal(seedKey(1)) {
			t.Fatalf("%s: %v", kdf, err)
		}
		if _, err := parsePrivateKeyPEM(p, constPass("px"), fuzzKDFLimits); !errors.Is(err, ErrWrongPassphrase) {
			t.Fatalf("%s wrong passphrase: %v", kdf, err)
		}
	}
	// Default-cost files are refused under the fuzz limits: the limits work.
	enc, _ := MarshalPrivateKeyPEM(seedKey(1), []byte("pw"))
	if _, err := parsePrivateKeyPEM(enc, constPass("pw"), fuzzKDFLimits); err == nil || errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("scrypt N=2^14 under 1 MiB limit: %v", err)
	}
}

func FuzzParseEnvelope(f *testing.F) {
	pub := seedKey(1).Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseEnvelope(data)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Code != CodeEnvelope {
				t.Fatalf("error is not a %s *Error: %v", CodeEnvelope, err)
			}
			return
		}
		if err := p.Verify(pub); err != nil && !errors.Is(err, ErrSignature) {
			t.Fatalf("Verify error is not %s: %v", CodeSignature, err)
		}
		// An accepted envelope re-encodes canonically and parses to the same thing.
		c, err := p.Envelope.Canonical()
		if err != nil {
			t.Fatalf("Canonical of an accepted envelope: %v", err)
		}
		q, err := ParseEnvelope(c)
		if err != nil {
			t.Fatalf("canonical form rejected: %v\n%s", err, c)
		}
		if !bytes.Equal(p.Payload, q.Payload) || !bytes.Equal(p.Sig, q.Sig) || p.KeyID != q.KeyID || p.PayloadType != q.PayloadType {
			t.Fatal("canonical form parses differently")
		}
		if p.DedupHash() != q.DedupHash() {
			t.Fatal("dedup hash changed under re-encoding")
		}
	})
}

func FuzzParsePrivateKeyPEM(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		priv, err := parsePrivateKeyPEM(data, constPass(fuzzPassphrase), fuzzKDFLimits)
		if err != nil {
			if !errors.Is(err, ErrPrivateKey) {
				t.Fatalf("error is not %s: %v", CodePrivateKey, err)
			}
			return
		}
		if len(priv) != ed25519.PrivateKeySize {
			t.Fatalf("key of %d bytes", len(priv))
		}
		again, err := MarshalPrivateKeyPEM(priv, nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePrivateKeyPEM(again, nil)
		if err != nil || !back.Equal(priv) {
			t.Fatalf("re-encoded key does not round trip: %v", err)
		}
	})
}

// ---- benchmarks ----

func benchParsed(b *testing.B) (*Parsed, ed25519.PublicKey) {
	ka := loadKnownAnswers(b).Envelope
	p, err := ParseEnvelope(ka.Envelope)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := ParsePublicKey(ka.PublicKeyBase64)
	if err != nil {
		b.Fatal(err)
	}
	return p, pub
}

// BenchmarkVerify is one signature check over the known-answer CONFIRM
// (565-byte payload).
func BenchmarkVerify(b *testing.B) {
	p, pub := benchParsed(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Verify(pub); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyParallel is the same check on every core: the ceiling on
// submissions per second that the whole ledger is measured against.
func BenchmarkVerifyParallel(b *testing.B) {
	p, pub := benchParsed(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Verify(pub); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkParseAndVerify is DESIGN §4 steps 1–2 for one submission.
func BenchmarkParseAndVerify(b *testing.B) {
	ka := loadKnownAnswers(b).Envelope
	_, pub := benchParsed(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(ka.Envelope)))
	for b.Loop() {
		p, err := ParseEnvelope(ka.Envelope)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Verify(pub); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	ka := loadKnownAnswers(b).Envelope
	priv := seedKey(1)
	payload := []byte(ka.CanonicalPayload)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sign(priv, "confirm", payload); err != nil {
			b.Fatal(err)
		}
	}
}
