package sign

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/custodylog/custody/canon"
)

// Key types of a bound key (DESIGN §1). A statement's `key_type` absent
// means KeyTypeEd25519.
const (
	KeyTypeEd25519         = "ed25519"
	KeyTypeWebAuthnES256   = "webauthn-es256"
	KeyTypeWebAuthnEd25519 = "webauthn-ed25519"
)

// IsPasskeyType reports whether keyType names a WebAuthn credential.
func IsPasskeyType(keyType string) bool {
	return keyType == KeyTypeWebAuthnES256 || keyType == KeyTypeWebAuthnEd25519
}

// Passkey is the public part of an enrolled WebAuthn credential: its key,
// and the relying party and origins an assertion must name. Build one with
// NewPasskey, which checks every field.
type Passkey struct {
	KeyType string   // KeyTypeWebAuthnES256 or KeyTypeWebAuthnEd25519
	SPKI    []byte   // the SubjectPublicKeyInfo DER, in its one encoding
	RPID    string   // a lowercase host name
	Origins []string // sorted, exact origins

	ec *ecdsa.PublicKey
	ed ed25519.PublicKey
}

// KeyID is the passkey's key id: the lowercase hex SHA-256 of its SPKI DER.
func (k *Passkey) KeyID() string {
	h := sha256.Sum256(k.SPKI)
	return hex.EncodeToString(h[:])
}

// Ed25519 returns the inner key of a webauthn-ed25519 passkey (nil for
// ES256), so that identity rules compare the underlying key whatever its
// encoding.
func (k *Passkey) Ed25519() ed25519.PublicKey { return k.ed }

// spkiEd25519Prefix is the DER of an Ed25519 SubjectPublicKeyInfo up to the
// key: SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING (0 unused) }.
var spkiEd25519Prefix = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}

// Ed25519SPKIKeyID is the key id the same Ed25519 key would have if it
// were enrolled as a webauthn-ed25519 passkey: the SHA-256 of its SPKI
// DER. Identity rules use it to see one key under both encodings.
func Ed25519SPKIKeyID(pub ed25519.PublicKey) string {
	h := sha256.New()
	h.Write(spkiEd25519Prefix)
	h.Write(pub)
	return hex.EncodeToString(h.Sum(nil))
}

// ParsePasskeyKey reads the `public_key` of a passkey enrollment: the
// standard base64 of an SPKI DER of the type's algorithm. The DER must be
// the one encoding crypto/x509 writes for that key (named curve P-256 and
// an uncompressed point for ES256; OID 1.3.101.112 for Ed25519, whose
// inner key must pass CheckPublicKey), so that one key has one key id.
func ParsePasskeyKey(keyType, publicKey string) (*Passkey, error) {
	der, err := decodeBase64Strict(publicKey)
	if err != nil {
		return nil, keyErr("public_key", err.Error())
	}
	if len(der) > 512 {
		return nil, keyErr("public_key", fmt.Sprintf("SPKI of %d bytes is too long for a passkey key", len(der)))
	}
	pk, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, keyErr("public_key", fmt.Sprintf("not a SubjectPublicKeyInfo: %v", err))
	}
	k := &Passkey{KeyType: keyType}
	switch keyType {
	case KeyTypeWebAuthnES256:
		ec, ok := pk.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, keyErr("public_key", "a webauthn-es256 key must be an ECDSA key on P-256 (COSE alg -7)")
		}
		k.ec = ec
	case KeyTypeWebAuthnEd25519:
		ed, ok := pk.(ed25519.PublicKey)
		if !ok {
			return nil, keyErr("public_key", "a webauthn-ed25519 key must be an Ed25519 key (OID 1.3.101.112, COSE alg -8)")
		}
		if err := CheckPublicKey(ed); err != nil {
			return nil, err
		}
		k.ed = ed
	default:
		return nil, keyErr("key_type", fmt.Sprintf("%q is not a passkey key type (%s or %s)", keyType, KeyTypeWebAuthnES256, KeyTypeWebAuthnEd25519))
	}
	again, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil || !bytes.Equal(again, der) {
		return nil, keyErr("public_key", "SPKI DER is not in its one encoding (named curve, uncompressed point, minimal DER); re-encode it")
	}
	k.SPKI = der
	return k, nil
}

// NewPasskey checks an enrollment's key, rp_id and origins (DESIGN §1) and
// returns the passkey they describe.
func NewPasskey(keyType, publicKey, rpID string, origins []string) (*Passkey, error) {
	k, err := ParsePasskeyKey(keyType, publicKey)
	if err != nil {
		return nil, err
	}
	if err := CheckRPID(rpID); err != nil {
		return nil, err
	}
	if err := CheckOrigins(rpID, origins); err != nil {
		return nil, err
	}
	k.RPID, k.Origins = rpID, origins
	return k, nil
}

// CheckRPID accepts a WebAuthn relying party id: a lowercase DNS host name
// (letters, digits, hyphens; labels of 1..63 bytes, not starting or ending
// with a hyphen; at most 253 bytes), with no port, scheme or trailing dot.
func CheckRPID(rpID string) error {
	if rpID == "" || len(rpID) > 253 {
		return keyErr("rp_id", fmt.Sprintf("%q must be a host name of 1..253 bytes", rpID))
	}
	for _, label := range strings.Split(rpID, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return keyErr("rp_id", fmt.Sprintf("%q is not a lowercase host name (label %q)", rpID, label))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return keyErr("rp_id", fmt.Sprintf("%q is not a lowercase host name (byte %q)", rpID, c))
			}
		}
	}
	return nil
}

// CheckOrigins accepts a passkey's origins: a non-empty set, sorted and
// without repeats, of exact origins "https://host[:port]" whose host is
// rpID or a name below it. "http://localhost[:port]" is accepted only with
// rp_id "localhost", for trying things out. No path, no trailing slash, no
// default port spelled out, no user info.
func CheckOrigins(rpID string, origins []string) error {
	if len(origins) == 0 {
		return keyErr("origins", "must list at least one origin")
	}
	for i, o := range origins {
		if i > 0 && origins[i-1] >= o {
			return keyErr("origins", fmt.Sprintf("must be sorted without repeats: %q after %q", o, origins[i-1]))
		}
		if err := checkOrigin(rpID, o); err != nil {
			return keyErr("origins", err.Error())
		}
	}
	return nil
}

func checkOrigin(rpID, o string) error {
	rest, https := strings.CutPrefix(o, "https://")
	if !https {
		var ok bool
		rest, ok = strings.CutPrefix(o, "http://")
		if !ok || rpID != "localhost" {
			return fmt.Errorf("%q must be https://host[:port] (http:// only for localhost)", o)
		}
	}
	host, port, hasPort := strings.Cut(rest, ":")
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port || (https && n == 443) || (!https && n == 80) {
			return fmt.Errorf("%q has port %q, not a port number 1..65535 other than the scheme's default, without leading zeros", o, port)
		}
	}
	if err := CheckRPID(host); err != nil {
		return fmt.Errorf("%q has host %q, not a lowercase host name (nothing after it: no path or slash)", o, host)
	}
	if host != rpID && !strings.HasSuffix(host, "."+rpID) {
		return fmt.Errorf("%q has host %q, which is neither rp_id %q nor below it", o, host, rpID)
	}
	if !https && host != "localhost" {
		return fmt.Errorf("%q: http:// only for localhost", o)
	}
	return nil
}

// Assertion is a passkey signature as a DSSE envelope carries it (DESIGN
// §1): the standard base64 of exactly the JCS object
// {"authenticator_data","client_data_json","signature"}, each member the
// strict unpadded base64url of the authenticator's bytes.
type Assertion struct {
	AuthenticatorData []byte
	ClientDataJSON    []byte
	Signature         []byte
}

type assertionJSON struct {
	AuthenticatorData string `json:"authenticator_data"`
	ClientDataJSON    string `json:"client_data_json"`
	Signature         string `json:"signature"`
}

// MaxPasskeySig bounds the decoded sig of a passkey envelope.
const MaxPasskeySig = 16 << 10

// minPasskeySig is shorter than any passkey sig: the object's frame with
// 37 bytes of authenticator data is already longer than an Ed25519
// signature, so the sig's length alone tells the two forms apart.
const minPasskeySig = ed25519.SignatureSize + 1

// IsPasskeySig reports whether decoded sig bytes take the passkey form
// rather than a 64-byte Ed25519 signature. Every passkey sig is longer
// than 64 bytes (its JSON frame and 37 bytes of authenticator data alone
// are), so the length decides.
func IsPasskeySig(sig []byte) bool { return len(sig) >= minPasskeySig }

// ParseAssertion reads the decoded sig of a passkey envelope: exactly the
// canonical JSON of the three-member object, each member strict unpadded
// base64url. Failures are *Error with CodeEnvelope.
func ParseAssertion(sig []byte) (*Assertion, error) {
	const field = "signatures[0].sig"
	if len(sig) > MaxPasskeySig {
		return nil, envErr(field, fmt.Sprintf("passkey assertion of %d bytes exceeds %d", len(sig), MaxPasskeySig))
	}
	var j assertionJSON
	if err := canon.Unmarshal(sig, &j); err != nil {
		return nil, envErr(field, fmt.Sprintf("a passkey sig must be the canonical JSON object {authenticator_data, client_data_json, signature}: %v", err))
	}
	var a Assertion
	var err error
	if a.AuthenticatorData, err = decodeB64URL(j.AuthenticatorData); err != nil {
		return nil, envErr(field+".authenticator_data", err.Error())
	}
	if a.ClientDataJSON, err = decodeB64URL(j.ClientDataJSON); err != nil {
		return nil, envErr(field+".client_data_json", err.Error())
	}
	if a.Signature, err = decodeB64URL(j.Signature); err != nil {
		return nil, envErr(field+".signature", err.Error())
	}
	return &a, nil
}

// decodeB64URL decodes strict unpadded base64url: no padding, no stray
// bits, no line breaks.
func decodeB64URL(s string) ([]byte, error) {
	if strings.ContainsAny(s, "=\r\n") {
		return nil, errors.New("must be unpadded base64url without line breaks")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid unpadded base64url: %v", err)
	}
	return b, nil
}

// Authenticator data flags (WebAuthn L3 §6.1).
const (
	flagUP = 0x01 // user present
	flagUV = 0x04 // user verified
	flagBE = 0x08 // backup eligible
	flagBS = 0x10 // backup state
	flagAT = 0x40 // attested credential data included
	flagED = 0x80 // extension data included
)

// authDataMin is rpIdHash (32) || flags (1) || signCount (4).
const authDataMin = 37

// Challenge is the challenge a passkey signs for a statement: the unpadded
// base64url of SHA-256(PAE(payloadType, payload)).
func Challenge(payloadType string, payload []byte) string {
	h := sha256.Sum256(PAE(payloadType, payload))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// VerifyPasskey is custody's one check of a passkey signature (DESIGN §1),
// run by the ledger at step 2, by the verifier, by audit and by replay. It
// follows the relying party's steps of W3C WebAuthn Level 3 §7.2
// "Verifying an Authentication Assertion", with the statement's PAE in
// place of a server's random challenge. keyID must be the passkey's key
// id; sig the decoded sig bytes. Failures are *Error with CodeSignature
// (or CodeEnvelope when the sig is not an assertion at all), and name the
// field and the rule.
func VerifyPasskey(k *Passkey, keyID, payloadType string, payload, sig []byte) error {
	// §7.2 steps 1–2 (options, navigator.credentials.get) are the signing
	// client's; nothing to check here.
	// Step 3: the response is an assertion: the sig is exactly the
	// three-member object (ParseAssertion).
	a, err := ParseAssertion(sig)
	if err != nil {
		return err
	}
	return k.verify(a, keyID, payloadType, payload)
}

func sigErr(field, msg string) error {
	return &Error{Code: CodeSignature, Field: "signatures[0].sig." + field, Msg: msg}
}

func (k *Passkey) verify(a *Assertion, keyID, payloadType string, payload []byte) error {
	// Step 4: client extension results are not part of the signed bytes;
	// nothing to check.
	// Step 5: allowCredentials: the keyid names exactly one credential.
	// Steps 6–7: the credential record is the key the log bound to keyid.
	if subtleKeyID(k.SPKI, keyID) {
		return &Error{Code: CodeSignature, Field: "signatures[0].keyid", Msg: fmt.Sprintf("keyid %s does not name the given passkey %s", keyID, k.KeyID())}
	}
	// Step 8: cData, authData and sig.
	cData, authData, sig := a.ClientDataJSON, a.AuthenticatorData, a.Signature
	// Step 9: JSONtext is the UTF-8 decoding of cData; it must be valid.
	if !utf8.Valid(cData) {
		return sigErr("client_data_json", "is not valid UTF-8")
	}
	// Step 10: C is the parsed client data: one JSON object, no duplicate
	// keys at any depth, nothing after it.
	c, err := parseClientData(cData)
	if err != nil {
		return sigErr("client_data_json", err.Error())
	}
	// Step 11: C.type is "webauthn.get".
	if c.typ != "webauthn.get" {
		return sigErr("client_data_json.type", fmt.Sprintf("type %q is not webauthn.get", c.typ))
	}
	// Step 12: C.challenge is the base64url of the expected challenge, here
	// SHA-256(PAE(payloadType, payload)): the passkey signed this statement.
	if want := Challenge(payloadType, payload); c.challenge != want {
		return sigErr("client_data_json.challenge", fmt.Sprintf("challenge %q is not %s, the SHA-256 of this envelope's PAE", c.challenge, want))
	}
	// Step 13: C.origin is one the relying party expects: byte-equal to an
	// enrolled origin.
	if !slices.Contains(k.Origins, c.origin) {
		return sigErr("client_data_json.origin", fmt.Sprintf("origin %q is not one of the enrolled origins %q", c.origin, k.Origins))
	}
	// Step 14: no cross-origin use: crossOrigin absent or false, and no
	// topOrigin (custody expects no embedding frame at all).
	if c.topOrigin {
		return sigErr("client_data_json.topOrigin", "has a topOrigin member; a passkey signs custody statements only in a top-level page")
	}
	if c.crossOrigin {
		return sigErr("client_data_json.crossOrigin", "crossOrigin is true; a passkey signs custody statements only in a top-level page")
	}
	if len(authData) < authDataMin {
		return sigErr("authenticator_data", fmt.Sprintf("is %d bytes, shorter than 37 (rpIdHash, flags, signCount)", len(authData)))
	}
	// Step 15: rpIdHash is SHA-256 of the enrolled rp_id.
	if rp := sha256.Sum256([]byte(k.RPID)); !bytes.Equal(authData[:32], rp[:]) {
		return sigErr("authenticator_data.rpIdHash", fmt.Sprintf("does not start with SHA-256 of rp_id %q", k.RPID))
	}
	flags := authData[32]
	// Step 16: user present.
	if flags&flagUP == 0 {
		return sigErr("authenticator_data.flags", "the user-present (UP) flag is not set")
	}
	// Step 17: user verification is always required.
	if flags&flagUV == 0 {
		return sigErr("authenticator_data.flags", "the user-verified (UV) flag is not set")
	}
	// Step 18: backup state only with backup eligibility.
	if flags&flagBS != 0 && flags&flagBE == 0 {
		return sigErr("authenticator_data.flags", "backup-state (BS) is set without backup-eligible (BE)")
	}
	// Step 19: how the relying party uses BE/BS: custody does not.
	// Step 20 (and 24: no attestation in an assertion): attested credential
	// data never appears, and bytes after the 37 only with extension data.
	if flags&flagAT != 0 {
		return sigErr("authenticator_data.flags", "the attested-credential-data (AT) flag is set in an assertion")
	}
	if ed := flags&flagED != 0; ed != (len(authData) > authDataMin) {
		if ed {
			return sigErr("authenticator_data", "the extension-data (ED) flag is set but no extension data follows")
		}
		return sigErr("authenticator_data", fmt.Sprintf("%d bytes follow signCount without the extension-data (ED) flag", len(authData)-authDataMin))
	}
	// Step 21: hash = SHA-256(cData).
	hash := sha256.Sum256(cData)
	signed := make([]byte, 0, len(authData)+len(hash))
	signed = append(append(signed, authData...), hash[:]...)
	// Step 22: sig verifies over authData || hash under the enrolled key.
	switch {
	case k.ec != nil:
		r, s, err := parseDERSignature(sig)
		if err != nil {
			return sigErr("signature", err.Error())
		}
		digest := sha256.Sum256(signed)
		if !ecdsa.Verify(k.ec, digest[:], r, s) {
			return sigErr("signature", fmt.Sprintf("ES256 signature does not verify under passkey %s over the %s payload", short16(keyID), payloadType))
		}
	case k.ed != nil:
		if len(sig) != ed25519.SignatureSize {
			return sigErr("signature", fmt.Sprintf("an Ed25519 passkey signature is %d raw bytes, got %d", ed25519.SignatureSize, len(sig)))
		}
		if !ed25519.Verify(k.ed, signed, sig) {
			return sigErr("signature", fmt.Sprintf("Ed25519 signature does not verify under passkey %s over the %s payload", short16(keyID), payloadType))
		}
	default:
		return sigErr("signature", "no key")
	}
	// Step 23: the signature counter is not checked: synced passkeys send 0.
	// Step 25: nothing is stored: verification is offline and repeatable.
	return nil
}

// subtleKeyID reports whether keyID does NOT name spki.
func subtleKeyID(spki []byte, keyID string) bool {
	h := sha256.Sum256(spki)
	return hex.EncodeToString(h[:]) != keyID
}

func short16(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// p256N is the order of P-256's base point.
var p256N = elliptic.P256().Params().N

// parseDERSignature reads an ES256 signature: strict ASN.1 DER
// SEQUENCE { INTEGER r, INTEGER s }, minimal, nothing after it, with
// 0 < r, s < n. High s is accepted (WebAuthn does not normalise it); a
// repeat is recognised by payload and keyid, not by signature bytes.
func parseDERSignature(b []byte) (r, s *big.Int, err error) {
	var v struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(b, &v)
	if err != nil {
		return nil, nil, fmt.Errorf("ES256 signature is not ASN.1 DER: %v", err)
	}
	if len(rest) != 0 {
		return nil, nil, fmt.Errorf("ES256 signature has %d bytes after its DER", len(rest))
	}
	if again, err := asn1.Marshal(v); err != nil || !bytes.Equal(again, b) {
		return nil, nil, errors.New("ES256 signature is not strict DER")
	}
	if v.R.Sign() <= 0 || v.S.Sign() <= 0 || v.R.Cmp(p256N) >= 0 || v.S.Cmp(p256N) >= 0 {
		return nil, nil, errors.New("ES256 signature's r or s is out of range 1..n-1")
	}
	return v.R, v.S, nil
}

// clientData is what custody reads of the client data; other members are
// ignored (WebAuthn L3 §5.8.1.2 lets browsers add some).
type clientData struct {
	typ, challenge, origin string
	crossOrigin            bool
	topOrigin              bool // present
}

// parseClientData reads client data JSON: exactly one object, no
// duplicate keys in any object, `type`, `challenge` and `origin` strings,
// `crossOrigin` a boolean when present.
func parseClientData(b []byte) (*clientData, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	c := &clientData{}
	seen := map[string]bool{}
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errors.New("is not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("is not valid JSON: %v", err)
		}
		key := tok.(string)
		if seen[key] {
			return nil, fmt.Errorf("has the key %q twice", key)
		}
		seen[key] = true
		var str *string
		switch key {
		case "type":
			str = &c.typ
		case "challenge":
			str = &c.challenge
		case "origin":
			str = &c.origin
		case "topOrigin":
			c.topOrigin = true
		}
		v, err := readValue(dec, 1)
		if err != nil {
			return nil, err
		}
		switch {
		case str != nil:
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("member %q is not a string", key)
			}
			*str = s
		case key == "crossOrigin":
			bv, ok := v.(bool)
			if !ok {
				return nil, errors.New("member \"crossOrigin\" is not a boolean")
			}
			c.crossOrigin = bv
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("is not valid JSON: unterminated object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("has data after its JSON object")
	}
	for _, k := range []string{"type", "challenge", "origin"} {
		if !seen[k] {
			return nil, fmt.Errorf("has no %q member", k)
		}
	}
	return c, nil
}

// readValue reads one JSON value from dec, refusing duplicate keys in any
// object inside it. Scalars are returned (strings, bools, json.Number,
// nil); containers return nil.
func readValue(dec *json.Decoder, depth int) (any, error) {
	if depth > 32 {
		return nil, errors.New("nests too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("is not valid JSON: %v", err)
			}
			key := k.(string)
			if seen[key] {
				return nil, fmt.Errorf("has the key %q twice", key)
			}
			seen[key] = true
			if _, err := readValue(dec, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("is not valid JSON: %v", err)
		}
		return nil, nil
	case json.Delim('['):
		for dec.More() {
			if _, err := readValue(dec, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("is not valid JSON: %v", err)
		}
		return nil, nil
	}
	return tok, nil
}

// Key is a key the log bound, as a verifier needs it: an Ed25519 key, or
// a passkey. Exactly one is set.
type Key struct {
	Ed25519 ed25519.PublicKey
	Passkey *Passkey
}

// VerifyKey checks the envelope's signature under k, whichever kind of key
// it is (DESIGN §4 step 2): Parsed.Verify for an Ed25519 key,
// VerifyPasskey for a passkey. An Ed25519 signature never verifies under a
// passkey, nor a passkey assertion under an Ed25519 key.
func (p *Parsed) VerifyKey(k Key) error {
	switch {
	case k.Passkey != nil:
		if !IsPasskeySig(p.Sig) {
			return &Error{Code: CodeSignature, Field: "signatures[0].sig", Msg: fmt.Sprintf("key %s is a passkey, and the sig is not a passkey assertion", short16(p.KeyID))}
		}
		if p.assertion == nil {
			a, err := ParseAssertion(p.Sig)
			if err != nil {
				return err
			}
			p.assertion = a
		}
		return k.Passkey.verify(p.assertion, p.KeyID, p.PayloadType, p.Payload)
	case k.Ed25519 != nil:
		return p.Verify(k.Ed25519)
	}
	return &Error{Code: CodeSignature, Field: "signatures[0].keyid", Msg: "no key to verify with"}
}
