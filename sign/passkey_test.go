package sign_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/sign"
)

// passkeyVectors is ../testdata/passkey.json, a copy of
// ../shared/vectors/passkey.json (computed apart from the project).
type passkeyVectors struct {
	Enrollment struct {
		KeyType      string   `json:"key_type"`
		PublicKey    string   `json:"public_key"`
		CredentialID string   `json:"credential_id"`
		RPID         string   `json:"rp_id"`
		Origins      []string `json:"origins"`
		KeyID        string   `json:"keyid"`
		Name         string   `json:"name"`
	} `json:"enrollment"`
	CanonicalPayload string        `json:"canonical_payload"`
	PAESHA256        string        `json:"pae_sha256_b64url"`
	Valid            sign.Envelope `json:"valid"`
	ValidTwin        struct {
		Envelope sign.Envelope `json:"envelope"`
	} `json:"valid_twin"`
	Refused []struct {
		Name     string        `json:"name"`
		Envelope sign.Envelope `json:"envelope"`
		Because  string        `json:"refuse_because"`
	} `json:"refused"`
}

func readPasskeyVectors(t testing.TB) *passkeyVectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/passkey.json")
	if err != nil {
		t.Fatal(err)
	}
	var v passkeyVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// checkEnvelope runs what the ledger runs at steps 1–2 for a passkey key.
func checkEnvelope(k *sign.Passkey, env sign.Envelope) error {
	raw, err := json.Marshal(env)
	if err != nil {
		return err
	}
	p, err := sign.ParseEnvelope(raw)
	if err != nil {
		return err
	}
	return p.VerifyKey(sign.Key{Passkey: k})
}

// vectorReason maps each refused vector to the field our error must name:
// the rule the vector states it breaks, and no other.
var vectorReason = map[string]struct{ code, field, says string }{
	"wrong_origin":                  {sign.CodeSignature, "client_data_json.origin", "is not one of the enrolled origins"},
	"cross_origin":                  {sign.CodeSignature, "client_data_json.crossOrigin", "crossOrigin is true"},
	"wrong_type":                    {sign.CodeSignature, "client_data_json.type", "is not webauthn.get"},
	"wrong_challenge":               {sign.CodeSignature, "client_data_json.challenge", "the SHA-256 of this envelope's PAE"},
	"no_user_verification":          {sign.CodeSignature, "authenticator_data.flags", "user-verified (UV) flag is not set"},
	"no_user_presence":              {sign.CodeSignature, "authenticator_data.flags", "user-present (UP) flag is not set"},
	"wrong_rp_id":                   {sign.CodeSignature, "authenticator_data.rpIdHash", "SHA-256 of rp_id"},
	"bad_signature":                 {sign.CodeSignature, "signature", "does not verify"},
	"short_authenticator_data":      {sign.CodeSignature, "authenticator_data", "shorter than 37"},
	"duplicate_key_in_client_data":  {sign.CodeSignature, "client_data_json", "twice"},
	"top_origin":                    {sign.CodeSignature, "client_data_json.topOrigin", "topOrigin member"},
	"attested_data_flag":            {sign.CodeSignature, "authenticator_data.flags", "attested-credential-data (AT)"},
	"backup_state_without_eligible": {sign.CodeSignature, "authenticator_data.flags", "backup-state (BS) is set without backup-eligible"},
	"padded_base64url":              {sign.CodeEnvelope, "sig.signature", "unpadded base64url"},
}

func TestPasskeyVectors(t *testing.T) {
	v := readPasskeyVectors(t)
	e := v.Enrollment
	k, err := sign.NewPasskey(e.KeyType, e.PublicKey, e.RPID, e.Origins)
	if err != nil {
		t.Fatalf("enrollment: %v", err)
	}
	if k.KeyID() != e.KeyID {
		t.Fatalf("keyid %s, vectors say %s", k.KeyID(), e.KeyID)
	}
	payload, _ := base64.StdEncoding.DecodeString(v.Valid.Payload)
	if string(payload) != v.CanonicalPayload {
		t.Fatalf("payload differs from canonical_payload")
	}
	if got := sign.Challenge(v.Valid.PayloadType, payload); got != v.PAESHA256 {
		t.Fatalf("challenge %s, vectors say %s", got, v.PAESHA256)
	}
	if err := checkEnvelope(k, v.Valid); err != nil {
		t.Fatalf("valid envelope refused: %v", err)
	}
	if err := checkEnvelope(k, v.ValidTwin.Envelope); err != nil {
		t.Fatalf("valid twin refused: %v", err)
	}
	// The twin is a repeat: same submission identity, different bytes.
	pv, _ := sign.ParseEnvelopeValue(v.Valid)
	pt, _ := sign.ParseEnvelopeValue(v.ValidTwin.Envelope)
	if string(pv.Sig) == string(pt.Sig) {
		t.Fatal("the twin's sig bytes equal the valid one's")
	}
	if pv.DedupHash() != pt.DedupHash() {
		t.Fatal("the (r, n-s) twin is not recognised as a repeat (DedupHash differs)")
	}
	if len(v.Refused) != len(vectorReason) {
		t.Fatalf("%d refused vectors, %d reasons known", len(v.Refused), len(vectorReason))
	}
	for _, r := range v.Refused {
		t.Run(r.Name, func(t *testing.T) {
			want, ok := vectorReason[r.Name]
			if !ok {
				t.Fatalf("no expected reason for vector %q (%s)", r.Name, r.Because)
			}
			err := checkEnvelope(k, r.Envelope)
			var se *sign.Error
			if !errors.As(err, &se) {
				t.Fatalf("accepted or wrong error type: %v (want refusal: %s)", err, r.Because)
			}
			if se.Code != want.code || !strings.HasSuffix(se.Field, want.field) || !strings.Contains(se.Msg, want.says) {
				t.Fatalf("refused as %v; want %s on %s saying %q (%s)", err, want.code, want.field, want.says, r.Because)
			}
		})
	}
}

func mustAuth(t testing.TB, keyType string) *softauthn.Authenticator {
	t.Helper()
	a, err := softauthn.New(keyType, "custody.example.com", "https://custody.example.com")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// TestPasskeyEachField breaks one field of an honest assertion at a time,
// for both key types, and requires the refusal to name that field.
func TestPasskeyEachField(t *testing.T) {
	payload := []byte(`{"actor":"user:alice","type":"STOP"}`)
	cases := []struct {
		name  string
		o     softauthn.Options
		field string
	}{
		{"honest", softauthn.Options{}, ""},
		{"type", softauthn.Options{Type: "webauthn.create"}, "client_data_json.type"},
		{"challenge", softauthn.Options{Challenge: sign.Challenge("application/vnd.custody.stop.v1+json", []byte(`{"other":1}`))}, "client_data_json.challenge"},
		{"origin", softauthn.Options{Origin: "https://custody.example.com.evil.example"}, "client_data_json.origin"},
		{"origin_case", softauthn.Options{Origin: "https://Custody.example.com"}, "client_data_json.origin"},
		{"crossOrigin", softauthn.Options{CrossOrigin: ptr(true)}, "client_data_json.crossOrigin"},
		{"topOrigin", softauthn.Options{TopOrigin: "https://custody.example.com"}, "client_data_json.topOrigin"},
		{"rpIdHash", softauthn.Options{RPID: "example.com"}, "authenticator_data.rpIdHash"},
		{"UP", softauthn.Options{Flags: ptr(byte(0x04))}, "authenticator_data.flags"},
		{"UV", softauthn.Options{Flags: ptr(byte(0x01))}, "authenticator_data.flags"},
		{"BS_without_BE", softauthn.Options{Flags: ptr(byte(0x15))}, "authenticator_data.flags"},
		{"BS_with_BE", softauthn.Options{Flags: ptr(byte(0x1d))}, ""},
		{"AT", softauthn.Options{Flags: ptr(byte(0x45))}, "authenticator_data.flags"},
		{"trailing_without_ED", softauthn.Options{Extra: []byte{0xa0}}, "authenticator_data"},
		{"ED_without_trailing", softauthn.Options{Flags: ptr(byte(0x85))}, "authenticator_data"},
		{"trailing_with_ED", softauthn.Options{Flags: ptr(byte(0x85)), Extra: []byte{0xa0}}, ""},
		{"signature", softauthn.Options{Corrupt: true}, "signature"},
		{"client_data_not_utf8", softauthn.Options{ClientData: []byte("{\"type\":\"webauthn.get\xff\"}")}, "client_data_json"},
		{"client_data_duplicate", softauthn.Options{ClientData: []byte(`{"type":"webauthn.get","type":"webauthn.get"}`)}, "client_data_json"},
		{"client_data_nested_duplicate", softauthn.Options{ClientData: []byte(`{"x":{"a":1,"a":2},"type":"webauthn.get"}`)}, "client_data_json"},
		{"client_data_trailing", softauthn.Options{ClientData: []byte(`{"type":"webauthn.get"} {}`)}, "client_data_json"},
		{"crossOrigin_not_bool", softauthn.Options{ClientData: []byte(`{"type":"webauthn.get","challenge":"x","origin":"y","crossOrigin":"false"}`)}, "client_data_json"},
	}
	for _, kt := range []string{sign.KeyTypeWebAuthnES256, sign.KeyTypeWebAuthnEd25519} {
		a := mustAuth(t, kt)
		k := a.Passkey()
		for _, c := range cases {
			t.Run(kt+"/"+c.name, func(t *testing.T) {
				env, err := a.Sign("stop", payload, c.o)
				if err != nil {
					t.Fatal(err)
				}
				err = checkEnvelope(k, env)
				if c.field == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				var se *sign.Error
				if !errors.As(err, &se) || se.Code != sign.CodeSignature || se.Field != "signatures[0].sig."+c.field {
					t.Fatalf("got %v, want %s on signatures[0].sig.%s", err, sign.CodeSignature, c.field)
				}
			})
		}
	}
}

// TestPasskeyKeyType: an Ed25519 signature never verifies under a passkey,
// a passkey assertion never under an Ed25519 key, and an ES256 assertion
// never under an Ed25519 passkey (and the keyid must name the key).
func TestPasskeyKeyType(t *testing.T) {
	payload := []byte(`{"type":"STOP"}`)
	es := mustAuth(t, sign.KeyTypeWebAuthnES256)
	ed := mustAuth(t, sign.KeyTypeWebAuthnEd25519)
	env, _ := es.Sign("stop", payload, softauthn.Options{})
	// Under the other passkey (keyid mismatch first).
	if err := checkEnvelope(ed.Passkey(), env); !errors.Is(err, sign.ErrSignature) {
		t.Fatalf("ES256 assertion under an Ed25519 passkey: %v", err)
	}
	// Under an Ed25519 key.
	pub, priv, _ := sign.GenerateKey()
	raw, _ := json.Marshal(env)
	p, err := sign.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.VerifyKey(sign.Key{Ed25519: pub}); !errors.Is(err, sign.ErrSignature) {
		t.Fatalf("passkey assertion under an Ed25519 key: %v", err)
	}
	// An Ed25519 signature under a passkey.
	e2, _ := sign.Sign(priv, "stop", payload)
	e2.Signatures[0].KeyID = es.KeyID()
	if err := checkEnvelope(es.Passkey(), e2); !errors.Is(err, sign.ErrSignature) {
		t.Fatalf("Ed25519 signature under a passkey: %v", err)
	}
	// The same ES256 assertion under its own key verifies.
	if err := checkEnvelope(es.Passkey(), env); err != nil {
		t.Fatal(err)
	}
}

// TestPasskeyTwin: the (r, n−s) twin verifies and is the same submission.
func TestPasskeyTwin(t *testing.T) {
	a := mustAuth(t, sign.KeyTypeWebAuthnES256)
	payload := []byte(`{"type":"STOP"}`)
	var twin string
	env, _ := a.Sign("stop", payload, softauthn.Options{})
	env2, _ := a.Sign("stop", payload, softauthn.Options{Mutate: func(m map[string]string) {}})
	raw, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	var m map[string]string
	json.Unmarshal(raw, &m)
	twin, err := softauthn.Twin(m["signature"])
	if err != nil {
		t.Fatal(err)
	}
	m["signature"] = twin
	obj, _ := json.Marshal(m) // keys sorted, no escapes needed: canonical
	envT := env
	envT.Signatures = []sign.Signature{{KeyID: env.Signatures[0].KeyID, Sig: base64.StdEncoding.EncodeToString(obj)}}
	for _, e := range []sign.Envelope{env, env2, envT} {
		if err := checkEnvelope(a.Passkey(), e); err != nil {
			t.Fatal(err)
		}
	}
	p1, _ := sign.ParseEnvelopeValue(env)
	p2, _ := sign.ParseEnvelopeValue(env2)
	p3, _ := sign.ParseEnvelopeValue(envT)
	if p1.DedupHash() != p2.DedupHash() || p1.DedupHash() != p3.DedupHash() {
		t.Fatal("passkey submissions over one payload by one key differ in DedupHash")
	}
}

// TestPasskeyEnrollment checks the key, rp_id and origin rules.
func TestPasskeyEnrollment(t *testing.T) {
	a := mustAuth(t, sign.KeyTypeWebAuthnES256)
	pk := a.PublicKey()
	for _, c := range []struct {
		rp      string
		origins []string
		ok      bool
	}{
		{"custody.example.com", []string{"https://custody.example.com"}, true},
		{"example.com", []string{"https://a.example.com", "https://example.com:8443"}, true},
		{"localhost", []string{"http://localhost:8080"}, true},
		{"example.com", []string{"http://example.com"}, false},
		{"example.com", []string{"https://example.com/"}, false},
		{"example.com", []string{"https://example.com:443"}, false},
		{"example.com", []string{"https://example.com:080"}, false},
		{"example.com", []string{"https://badexample.com"}, false},
		{"example.com", []string{"https://b.example.com", "https://a.example.com"}, false},
		{"example.com", []string{"https://a.example.com", "https://a.example.com"}, false},
		{"example.com", nil, false},
		{"Example.com", []string{"https://example.com"}, false},
		{"example.com.", []string{"https://example.com"}, false},
		{"-x.com", []string{"https://-x.com"}, false},
	} {
		_, err := sign.NewPasskey(sign.KeyTypeWebAuthnES256, pk, c.rp, c.origins)
		if (err == nil) != c.ok {
			t.Errorf("rp %q origins %q: err %v, want ok=%v", c.rp, c.origins, err, c.ok)
		}
	}
	// Wrong key type for the key; unknown key type; non-canonical SPKI.
	if _, err := sign.ParsePasskeyKey(sign.KeyTypeWebAuthnEd25519, pk); err == nil {
		t.Error("a P-256 key enrolled as webauthn-ed25519")
	}
	if _, err := sign.ParsePasskeyKey("webauthn-rs256", pk); err == nil {
		t.Error("an unknown key type accepted")
	}
	der := a.SPKI()
	// The compressed form of the same point is another encoding of one key.
	comp := append([]byte{}, der[:len(der)-65]...)
	comp[1] -= 32 // outer SEQUENCE length
	comp[len(comp)-1] -= 32
	x := der[len(der)-64 : len(der)-32]
	y := der[len(der)-1]
	comp = append(comp, 0x02|y&1)
	comp = append(comp, x...)
	if _, err := sign.ParsePasskeyKey(sign.KeyTypeWebAuthnES256, base64.StdEncoding.EncodeToString(comp)); err == nil {
		t.Error("a compressed-point SPKI accepted")
	}
}

// FuzzPasskeySig feeds the passkey signature parser and check arbitrary
// bytes, both as a whole sig and as the three members of an assertion
// object: it must never panic, must fail only with a *sign.Error of the
// envelope or signature code, and can accept only the vectors' own
// signatures (nothing else is signed by their key).
func FuzzPasskeySig(f *testing.F) {
	v := readPasskeyVectors(f)
	e := v.Enrollment
	k, err := sign.NewPasskey(e.KeyType, e.PublicKey, e.RPID, e.Origins)
	if err != nil {
		f.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(v.Valid.Payload)
	pt := v.Valid.PayloadType
	envs := []sign.Envelope{v.Valid, v.ValidTwin.Envelope}
	for _, r := range v.Refused {
		envs = append(envs, r.Envelope)
	}
	for _, env := range envs {
		sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
		var m map[string]string
		json.Unmarshal(sig, &m)
		ad, _ := base64.RawURLEncoding.DecodeString(m["authenticator_data"])
		cd, _ := base64.RawURLEncoding.DecodeString(m["client_data_json"])
		s, _ := base64.RawURLEncoding.DecodeString(m["signature"])
		f.Add(sig, ad, cd, s)
	}
	good := map[string]bool{}
	for _, env := range envs[:2] {
		sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
		good[string(sig)] = true
	}
	check := func(t *testing.T, sig []byte) {
		err := sign.VerifyPasskey(k, e.KeyID, pt, payload, sig)
		if err == nil {
			if !good[string(sig)] {
				t.Fatalf("accepted a sig the vectors do not hold: %q", sig)
			}
			return
		}
		var se *sign.Error
		if !errors.As(err, &se) || (se.Code != sign.CodeEnvelope && se.Code != sign.CodeSignature) {
			t.Fatalf("error %v is not an envelope or signature *sign.Error", err)
		}
	}
	f.Fuzz(func(t *testing.T, sig, ad, cd, s []byte) {
		check(t, sig)
		obj := `{"authenticator_data":"` + base64.RawURLEncoding.EncodeToString(ad) +
			`","client_data_json":"` + base64.RawURLEncoding.EncodeToString(cd) +
			`","signature":"` + base64.RawURLEncoding.EncodeToString(s) + `"}`
		check(t, []byte(obj))
	})
}

// BenchmarkVerifyPasskey is the cost of the one passkey check, per key
// type, beside an Ed25519 envelope's (the ledger runs one per submission).
func BenchmarkVerifyPasskey(b *testing.B) {
	payload := []byte(`{"actor":"user:alice","type":"APPROVAL"}`)
	for _, kt := range []string{sign.KeyTypeWebAuthnES256, sign.KeyTypeWebAuthnEd25519} {
		a := mustAuth(b, kt)
		env, _ := a.Sign("approval", payload, softauthn.Options{})
		p, err := sign.ParseEnvelopeValue(env)
		if err != nil {
			b.Fatal(err)
		}
		key := sign.Key{Passkey: a.Passkey()}
		b.Run(kt, func(b *testing.B) {
			for b.Loop() {
				if err := p.VerifyKey(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	pub, priv, _ := sign.GenerateKey()
	env, _ := sign.Sign(priv, "approval", payload)
	p, _ := sign.ParseEnvelopeValue(env)
	b.Run("ed25519", func(b *testing.B) {
		for b.Loop() {
			if err := p.VerifyKey(sign.Key{Ed25519: pub}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
