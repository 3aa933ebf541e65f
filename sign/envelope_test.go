package sign

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/canon"
)

var update = flag.Bool("update", false, "rewrite testdata/sign/envelopes and the fuzz seed corpus")

type knownAnswers struct {
	Envelope struct {
		CanonicalPayload  string          `json:"canonical_payload"`
		Envelope          json.RawMessage `json:"envelope"`
		GranteeSeedHex    string          `json:"grantee_seed_hex"`
		KeyID             string          `json:"key_id"`
		PAEHex            string          `json:"pae_hex"`
		PrivateKeySeedHex string          `json:"private_key_seed_hex"`
		PublicKeyBase64   string          `json:"public_key_base64"`
	} `json:"envelope"`
}

func loadKnownAnswers(t testing.TB) knownAnswers {
	t.Helper()
	data, err := os.ReadFile("../testdata/known-answers.json")
	if err != nil {
		t.Fatal(err)
	}
	var ka knownAnswers
	if err := json.Unmarshal(data, &ka); err != nil {
		t.Fatal(err)
	}
	return ka
}

func TestKnownAnswerEnvelope(t *testing.T) {
	ka := loadKnownAnswers(t).Envelope
	seed, _ := hex.DecodeString(ka.PrivateKeySeedHex)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	if got := EncodePublicKey(pub); got != ka.PublicKeyBase64 {
		t.Errorf("public key = %s, want %s", got, ka.PublicKeyBase64)
	}
	if got := KeyID(pub); got != ka.KeyID {
		t.Errorf("key id = %s, want %s", got, ka.KeyID)
	}
	payload := []byte(ka.CanonicalPayload)
	pt, err := PayloadType("CONFIRM")
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(PAE(pt, payload)); got != ka.PAEHex {
		t.Errorf("PAE =\n%s\nwant\n%s", got, ka.PAEHex)
	}
	env, err := Sign(priv, "confirm", payload)
	if err != nil {
		t.Fatal(err)
	}
	gotBytes, err := env.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	wantBytes, err := canon.Canonicalize(ka.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotBytes, wantBytes) {
		t.Errorf("envelope =\n%s\nwant\n%s", gotBytes, wantBytes)
	}
	// The vector parses and verifies, and its payload is the canonical payload.
	p, err := ParseEnvelope(ka.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(pub); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "confirm" || string(p.Payload) != ka.CanonicalPayload {
		t.Errorf("parsed kind %q payload %q", p.Kind, p.Payload)
	}
	// The grantee key in the payload is the one from grantee_seed_hex.
	gseed, _ := hex.DecodeString(ka.GranteeSeedHex)
	gpub := EncodePublicKey(ed25519.NewKeyFromSeed(gseed).Public().(ed25519.PublicKey))
	if !strings.Contains(ka.CanonicalPayload, `"public_key":"`+gpub+`"`) {
		t.Errorf("grantee key %s not in payload", gpub)
	}
	if _, err := ParsePublicKey(gpub); err != nil {
		t.Errorf("grantee key: %v", err)
	}
}

func TestPAE(t *testing.T) {
	for _, tc := range []struct {
		typ, body, want string
	}{
		{"", "", "DSSEv1 0  0 "},
		{"t", "hello world", "DSSEv1 1 t 11 hello world"},
		// DSSE spec example.
		{"http://example.com/HelloWorld", "hello world", "DSSEv1 29 http://example.com/HelloWorld 11 hello world"},
	} {
		if got := string(PAE(tc.typ, []byte(tc.body))); got != tc.want {
			t.Errorf("PAE(%q, %q) = %q, want %q", tc.typ, tc.body, got, tc.want)
		}
	}
}

func TestPayloadType(t *testing.T) {
	for _, k := range Kinds {
		pt, err := PayloadType(strings.ToUpper(k))
		if err != nil {
			t.Fatal(err)
		}
		if want := "application/vnd.custody." + k + ".v1+json"; pt != want {
			t.Errorf("PayloadType(%s) = %s", k, pt)
		}
		if back, err := KindFromPayloadType(pt); err != nil || back != k {
			t.Errorf("KindFromPayloadType(%s) = %s, %v", pt, back, err)
		}
	}
	for _, k := range []string{"", "checkpoint", "confirm ", "Confirm\x00"} {
		if _, err := PayloadType(k); !errors.Is(err, ErrEnvelope) {
			t.Errorf("PayloadType(%q) = %v", k, err)
		}
	}
	for _, pt := range []string{
		"", "application/vnd.custody.v1+json", "application/vnd.custody.CONFIRM.v1+json",
		"Application/vnd.custody.confirm.v1+json", "application/vnd.custody.confirm.v2+json",
		"application/vnd.custody.confirm.v1+json ", "application/vnd.custody..v1+json",
		"application/vnd.custody.confirm.receipt.v1+json", "application/vnd.in-toto+json",
	} {
		if _, err := KindFromPayloadType(pt); !errors.Is(err, ErrEnvelope) {
			t.Errorf("KindFromPayloadType(%q) = %v", pt, err)
		}
	}
}

// addL returns the signature with S replaced by S + L (still < 2^256): the
// same group element, a non-canonical scalar. RFC 8032 §5.1.7 requires
// rejecting it; without that check it would verify.
func addL(sig []byte) []byte {
	le := func(b []byte) *big.Int {
		be := make([]byte, len(b))
		for i := range b {
			be[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(be)
	}
	s := new(big.Int).Add(le(sig[32:]), edL)
	be := make([]byte, 32)
	s.FillBytes(be)
	out := bytes.Clone(sig)
	for i := range 32 {
		out[32+i] = be[31-i]
	}
	return out
}

func TestNonCanonicalSRejected(t *testing.T) {
	priv := seedKey(1)
	env, _ := Sign(priv, "confirm", []byte(`{"type":"CONFIRM"}`))
	sig, _ := decodeBase64Strict(env.Signatures[0].Sig)
	bad := addL(sig)
	if bytes.Equal(bad, sig) || bytes.Equal(bad[:32], sig[:32]) == false {
		t.Fatal("addL changed R or nothing")
	}
	env.Signatures[0].Sig = base64.StdEncoding.EncodeToString(bad)
	data, _ := env.Canonical()
	p, err := ParseEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(priv.Public().(ed25519.PublicKey)); !errors.Is(err, ErrSignature) {
		t.Fatalf("S+L signature: %v, want %s", err, CodeSignature)
	}
}

func TestDedupHash(t *testing.T) {
	base := DedupHash("a", []byte("bc"), []byte("d"))
	for _, h := range [][32]byte{
		DedupHash("ab", []byte("c"), []byte("d")),
		DedupHash("a", []byte("b"), []byte("cd")),
		DedupHash("a", []byte("bc"), []byte("e")),
		DedupHash("b", []byte("bc"), []byte("d")),
	} {
		if h == base {
			t.Fatal("dedup hash collision between different triples")
		}
	}
	if DedupHash("a", []byte("bc"), []byte("d")) != base {
		t.Fatal("dedup hash not deterministic")
	}
	ka := loadKnownAnswers(t).Envelope
	p, err := ParseEnvelope(ka.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	// Whitespace and key order of the submission do not change its identity.
	var v any
	json.Unmarshal(ka.Envelope, &v)
	indented, _ := json.MarshalIndent(v, "", "   ")
	q, err := ParseEnvelope(indented)
	if err != nil {
		t.Fatal(err)
	}
	if p.DedupHash() != q.DedupHash() {
		t.Fatal("dedup hash depends on JSON spelling")
	}
}

// ---- envelope vectors: testdata/sign/envelopes/*.json ----

type envelopeVector struct {
	Description string `json:"description"`
	Envelope    string `json:"envelope"`   // exact submitted bytes
	PublicKey   string `json:"public_key"` // key the ledger would look up (std base64)
	WantCode    string `json:"want_code"`  // "" = accepted
	WantField   string `json:"want_field,omitempty"`
}

const vectorDir = "../testdata/sign/envelopes"

func TestEnvelopeVectors(t *testing.T) {
	if *update {
		writeEnvelopeVectors(t)
	}
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if len(files) < 12 {
		t.Fatalf("found %d vectors in %s", len(files), vectorDir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var v envelopeVector
			if err := canon.UnmarshalRelaxed(data, &v); err != nil {
				t.Fatal(err)
			}
			err = checkSubmission([]byte(v.Envelope), v.PublicKey)
			if v.WantCode == "" {
				if err != nil {
					t.Fatalf("%s: %v", v.Description, err)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) || se.Code != v.WantCode {
				t.Fatalf("%s: err = %v, want code %s", v.Description, err, v.WantCode)
			}
			if v.WantField != "" && se.Field != v.WantField {
				t.Fatalf("%s: field = %q, want %q (%v)", v.Description, se.Field, v.WantField, err)
			}
		})
	}
}

// checkSubmission is DESIGN §4 steps 1–2 as the ledger runs them.
func checkSubmission(data []byte, pubB64 string) error {
	p, err := ParseEnvelope(data)
	if err != nil {
		return err
	}
	pub, err := ParsePublicKey(pubB64)
	if err != nil {
		return err
	}
	return p.Verify(pub)
}

func writeEnvelopeVectors(t *testing.T) {
	ka := loadKnownAnswers(t).Envelope
	signer := seedKey(1)
	other := seedKey(0x21)
	spub := EncodePublicKey(signer.Public().(ed25519.PublicKey))
	opub := EncodePublicKey(other.Public().(ed25519.PublicKey))
	payload := []byte(ka.CanonicalPayload)
	good, _ := Sign(signer, "confirm", payload)
	enc := func(e Envelope) string {
		b, err := canon.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mod := func(f func(*Envelope)) string {
		e := good
		e.Signatures = append([]Signature(nil), good.Signatures...)
		f(&e)
		return enc(e)
	}
	goodJSON := enc(good)
	sig, _ := decodeBase64Strict(good.Signatures[0].Sig)

	tampered := bytes.Replace(payload, []byte(`"budget_usd":800`), []byte(`"budget_usd":900`), 1)
	otherSigned, _ := Sign(other, "confirm", payload)
	wrongKey, _ := Sign(signer, "confirm", payload)
	wrongKey.Signatures[0].KeyID = KeyID(other.Public().(ed25519.PublicKey))

	identity := ed25519.PublicKey(bytes.Clone(smallOrder[1][:]))
	forged := make([]byte, 64)
	copy(forged, smallOrder[1][:]) // R = identity, S = 0
	smallOrderEnv := Envelope{PayloadType: good.PayloadType, Payload: good.Payload,
		Signatures: []Signature{{KeyID: KeyID(identity), Sig: base64.StdEncoding.EncodeToString(forged)}}}

	strayBits := func(s string) string { // flip the lowest bit of the char before the padding
		i := strings.IndexByte(s, '=') - 1
		j := strings.IndexByte(base64Alphabet, s[i])
		return s[:i] + string(base64Alphabet[j^1]) + s[i+1:]
	}

	vectors := map[string]envelopeVector{
		"valid": {Description: "known-answer CONFIRM envelope, canonical bytes", Envelope: goodJSON, PublicKey: spub},
		"valid-relaxed": {Description: "same envelope with whitespace and other key order: accepted (UnmarshalRelaxed)",
			Envelope: fmt.Sprintf("{\n  \"signatures\": [ {\"sig\": %q, \"keyid\": %q} ],\n  \"payload\": %q,\n  \"payloadType\": %q\n}\n",
				good.Signatures[0].Sig, good.Signatures[0].KeyID, good.Payload, good.PayloadType), PublicKey: spub},
		"tampered-payload": {Description: "budget_usd changed from 800 to 900 after signing",
			Envelope: mod(func(e *Envelope) { e.Payload = base64.StdEncoding.EncodeToString(tampered) }), PublicKey: spub,
			WantCode: CodeSignature, WantField: "signatures[0].sig"},
		"swapped-payload-type": {Description: "signature made for a confirm presented as a receipt",
			Envelope: mod(func(e *Envelope) { e.PayloadType = "application/vnd.custody.receipt.v1+json" }), PublicKey: spub,
			WantCode: CodeSignature, WantField: "signatures[0].sig"},
		"wrong-key": {Description: "keyid names another bound key; signature made by the signer key",
			Envelope: enc(wrongKey), PublicKey: opub, WantCode: CodeSignature, WantField: "signatures[0].sig"},
		"keyid-key-mismatch": {Description: "envelope signed and named by another key, verified with the signer's key",
			Envelope: enc(otherSigned), PublicKey: spub, WantCode: CodeSignature, WantField: "signatures[0].keyid"},
		"s-plus-l": {Description: "valid signature with S replaced by S+L (non-canonical scalar)",
			Envelope: mod(func(e *Envelope) { e.Signatures[0].Sig = base64.StdEncoding.EncodeToString(addL(sig)) }), PublicKey: spub,
			WantCode: CodeSignature, WantField: "signatures[0].sig"},
		"small-order-key": {Description: "identity public key with the R=identity, S=0 signature that verifies for any message",
			Envelope: enc(smallOrderEnv), PublicKey: base64.StdEncoding.EncodeToString(identity),
			WantCode: CodeKey, WantField: "public_key"},
		"two-signatures": {Description: "the valid signature twice",
			Envelope: mod(func(e *Envelope) { e.Signatures = append(e.Signatures, e.Signatures[0]) }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures"},
		"zero-signatures": {Description: "empty signatures array",
			Envelope: fmt.Sprintf(`{"payload":%q,"payloadType":%q,"signatures":[]}`, good.Payload, good.PayloadType), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures"},
		"missing-signatures": {Description: "no signatures field",
			Envelope: fmt.Sprintf(`{"payload":%q,"payloadType":%q}`, good.Payload, good.PayloadType), PublicKey: spub,
			WantCode: CodeEnvelope},
		"payload-padding-bits": {Description: "payload base64 with non-zero padding bits (decodes to the same bytes leniently)",
			Envelope: mod(func(e *Envelope) { e.Payload = strayBits(e.Payload) }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "payload"},
		"sig-padding-bits": {Description: "sig base64 with non-zero padding bits",
			Envelope: mod(func(e *Envelope) { e.Signatures[0].Sig = strayBits(e.Signatures[0].Sig) }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures[0].sig"},
		"payload-unpadded": {Description: "payload base64 without padding",
			Envelope: mod(func(e *Envelope) { e.Payload = strings.TrimRight(e.Payload, "=") }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "payload"},
		"sig-urlsafe": {Description: "sig in URL-safe base64 (the known-answer sig contains '/')",
			Envelope: mod(func(e *Envelope) {
				e.Signatures[0].Sig = base64.URLEncoding.EncodeToString(sig)
				if e.Signatures[0].Sig == good.Signatures[0].Sig {
					t.Fatal("URL-safe sig equals std sig")
				}
			}), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures[0].sig"},
		"payload-line-break": {Description: "payload base64 with an escaped newline (encoding/base64 would skip it)",
			Envelope: mod(func(e *Envelope) { e.Payload = e.Payload[:76] + "\n" + e.Payload[76:] }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "payload"},
		"keyid-uppercase": {Description: "keyid in upper-case hex",
			Envelope: mod(func(e *Envelope) { e.Signatures[0].KeyID = strings.ToUpper(e.Signatures[0].KeyID) }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures[0].keyid"},
		"keyid-non-hex": {Description: "keyid with a non-hex character",
			Envelope: mod(func(e *Envelope) { e.Signatures[0].KeyID = "g" + e.Signatures[0].KeyID[1:] }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures[0].keyid"},
		"keyid-short": {Description: "keyid of 63 hex digits",
			Envelope: mod(func(e *Envelope) { e.Signatures[0].KeyID = e.Signatures[0].KeyID[1:] }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures[0].keyid"},
		"sig-short": {Description: "sig of 63 bytes",
			Envelope: mod(func(e *Envelope) { e.Signatures[0].Sig = base64.StdEncoding.EncodeToString(sig[:63]) }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "signatures[0].sig"},
		"unknown-payload-type": {Description: "payload type outside the custody kinds",
			Envelope: mod(func(e *Envelope) { e.PayloadType = "application/vnd.in-toto+json" }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "payloadType"},
		"payload-type-uppercase-kind": {Description: "payload type with the kind in upper case",
			Envelope: mod(func(e *Envelope) { e.PayloadType = "application/vnd.custody.CONFIRM.v1+json" }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "payloadType"},
		"unknown-field": {Description: "extra top-level field",
			Envelope: strings.Replace(goodJSON, `{"payload"`, `{"extra":"x","payload"`, 1), PublicKey: spub,
			WantCode: CodeEnvelope},
		"unknown-signature-field": {Description: "extra field inside the signature object",
			Envelope: strings.Replace(goodJSON, `{"keyid"`, `{"cert":"x","keyid"`, 1), PublicKey: spub,
			WantCode: CodeEnvelope},
		"wrong-case-field": {Description: "payloadtype instead of payloadType",
			Envelope: strings.Replace(goodJSON, `"payloadType"`, `"payloadtype"`, 1), PublicKey: spub,
			WantCode: CodeEnvelope},
		"duplicate-key": {Description: "payloadType given twice (receipt, then confirm)",
			Envelope: strings.Replace(goodJSON, `"payloadType"`, `"payloadType":"application/vnd.custody.receipt.v1+json","payloadType"`, 1), PublicKey: spub,
			WantCode: CodeEnvelope},
		"null-field": {Description: "signatures is null",
			Envelope: fmt.Sprintf(`{"payload":%q,"payloadType":%q,"signatures":null}`, good.Payload, good.PayloadType), PublicKey: spub,
			WantCode: CodeEnvelope},
		"empty-payload": {Description: "empty payload",
			Envelope: mod(func(e *Envelope) { e.Payload = "" }), PublicKey: spub,
			WantCode: CodeEnvelope, WantField: "payload"},
		"trailing-data": {Description: "a second JSON value after the envelope",
			Envelope: goodJSON + "{}", PublicKey: spub, WantCode: CodeEnvelope},
		"not-json": {Description: "not JSON", Envelope: "DSSEv1", PublicKey: spub, WantCode: CodeEnvelope},
	}
	if err := os.MkdirAll(vectorDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	for _, f := range old {
		os.Remove(f)
	}
	for name, v := range vectors {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		if err := os.WriteFile(filepath.Join(vectorDir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Fuzz seeds: every vector's envelope.
	fz := "../testdata/fuzz/FuzzParseEnvelope"
	os.MkdirAll(fz, 0o755)
	for name, v := range vectors {
		writeFuzzSeed(t, fz, name, []byte(v.Envelope))
	}
	fp := "../testdata/fuzz/FuzzParsePrivateKeyPEM"
	os.MkdirAll(fp, 0o755)
	plain, _ := MarshalPrivateKeyPEM(seedKey(1), nil)
	writeFuzzSeed(t, fp, "plain", plain)
	pubPEM, _ := MarshalPublicKeyPEM(seedKey(1).Public().(ed25519.PublicKey))
	writeFuzzSeed(t, fp, "public", pubPEM)
	block, _ := decodeOnePEM(plain)
	// Encrypted seeds with cheap parameters (the fuzz limits reject the
	// default cost), made by hand so the fuzzer explores the decrypt path.
	for _, kdf := range []string{"scrypt", "pbkdf2"} {
		der := cheapEncrypt(t, block.Bytes, []byte(fuzzPassphrase), kdf)
		writeFuzzSeed(t, fp, "encrypted-"+kdf, pemEncode(pemEncrypted, der))
	}
}

func writeFuzzSeed(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEnvelopeErrorSaidOnce: a malformed envelope's error (what a 400
// answer carries) states its cause once, not "invalid character 'j' at
// byte 0: invalid character 'j' at byte 0".
func TestEnvelopeErrorSaidOnce(t *testing.T) {
	for _, in := range []string{"junk", `{"payloadType":1}`, `{"payload":"x"`} {
		_, err := ParseEnvelope([]byte(in))
		if err == nil {
			t.Fatalf("%q parsed", in)
		}
		msg := err.Error()
		parts := strings.Split(msg, ": ")
		for k := 1; 2*k <= len(parts); k++ {
			n := len(parts)
			if strings.Join(parts[n-k:], ": ") == strings.Join(parts[n-2*k:n-k], ": ") {
				t.Errorf("%q: the message repeats itself: %q", in, msg)
			}
		}
		if !errors.Is(err, ErrEnvelope) {
			t.Errorf("%q: %v is not ErrEnvelope", in, err)
		}
	}
}
