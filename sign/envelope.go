package sign

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/custodylog/custody/canon"
)

// Envelope is a DSSE v1 envelope as it appears on the wire (DESIGN §1).
// Payload and Sig are standard base64.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     string      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one entry of Envelope.Signatures. KeyID is the lowercase hex
// SHA-256 of the signer's public key (see KeyID).
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// Kinds lists the statement kinds, in DESIGN §2 order. A kind is the
// statement's `type` in lower case.
var Kinds = []string{"genesis", "principal", "confirm", "delegate", "revoke", "receipt", "stop", "resume", "approval", "denial"}

const (
	payloadTypePrefix = "application/vnd.custody."
	payloadTypeSuffix = ".v1+json"
)

func isKind(k string) bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// PayloadType returns "application/vnd.custody.<kind>.v1+json" for a kind
// given in either case ("CONFIRM" or "confirm"), or an error for anything
// that is not one of Kinds.
func PayloadType(kind string) (string, error) {
	k := strings.ToLower(kind)
	if !isKind(k) {
		return "", envErr("payloadType", fmt.Sprintf("unknown statement kind %q", kind))
	}
	return payloadTypePrefix + k + payloadTypeSuffix, nil
}

// KindFromPayloadType is the inverse of PayloadType: it returns the lower-case
// kind, and rejects any payload type that PayloadType would not produce
// (exact bytes, lower case).
func KindFromPayloadType(pt string) (string, error) {
	k, ok := strings.CutPrefix(pt, payloadTypePrefix)
	if ok {
		k, ok = strings.CutSuffix(k, payloadTypeSuffix)
	}
	if !ok || !isKind(k) {
		return "", envErr("payloadType", fmt.Sprintf("%q is not application/vnd.custody.<kind>.v1+json for a custody statement kind", pt))
	}
	return k, nil
}

// PAE returns the DSSE v1 pre-authentication encoding that is signed:
//
//	"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
//
// where LEN is the byte length in ASCII decimal with no leading zeros.
func PAE(payloadType string, body []byte) []byte {
	b := make([]byte, 0, 6+1+20+1+len(payloadType)+1+20+1+len(body))
	return appendPAE(b, payloadType, body)
}

func appendPAE(b []byte, payloadType string, body []byte) []byte {
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, ' ')
	return append(b, body...)
}

// Sign signs payload as a statement of the given kind and returns the
// envelope. It does not check the payload: the caller signs canonical bytes
// of a statement whose `type` matches kind.
func Sign(priv ed25519.PrivateKey, kind string, payload []byte) (Envelope, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return Envelope{}, privErr(fmt.Sprintf("private key must be %d bytes, got %d", ed25519.PrivateKeySize, len(priv)), nil)
	}
	pt, err := PayloadType(kind)
	if err != nil {
		return Envelope{}, err
	}
	sig := ed25519.Sign(priv, PAE(pt, payload))
	return Envelope{
		PayloadType: pt,
		Payload:     base64.StdEncoding.EncodeToString(payload),
		Signatures: []Signature{{
			KeyID: KeyID(priv.Public().(ed25519.PublicKey)),
			Sig:   base64.StdEncoding.EncodeToString(sig),
		}},
	}, nil
}

// Canonical returns the envelope's canonical JSON (RFC 8785), the form in
// which the ledger stores it.
func (e Envelope) Canonical() ([]byte, error) {
	n := len(`{"payload":"","payloadType":"","signatures":[]}`) + len(e.Payload) + len(e.PayloadType)
	for _, s := range e.Signatures {
		n += len(`{"keyid":"","sig":""},`) + len(s.KeyID) + len(s.Sig)
	}
	if b, ok := e.appendCanonical(make([]byte, 0, n+8)); ok {
		return b, nil
	}
	return canon.Marshal(e)
}

// Parsed is an envelope that passed ParseEnvelope: well formed, but its
// signature not yet verified. Payload is the decoded payload: after Verify,
// parse exactly these bytes (DESIGN §1), never another copy.
type Parsed struct {
	Envelope    Envelope // as decoded from JSON
	Kind        string   // lower-case statement kind named by PayloadType
	PayloadType string
	Payload     []byte
	KeyID       string // 64 lowercase hex digits
	// Sig is the decoded signature: 64 bytes of Ed25519, or (longer) a
	// passkey assertion object (DESIGN §1, IsPasskeySig).
	Sig []byte

	sigBuf    [ed25519.SignatureSize]byte // Sig's storage for Ed25519
	assertion *Assertion                  // the parsed passkey sig, if any
}

// Assertion returns the passkey assertion the sig holds, or nil for an
// Ed25519 signature.
func (p *Parsed) Assertion() *Assertion { return p.assertion }

// ParseEnvelope decodes a submitted envelope and checks its shape (DESIGN §4
// step 1): strict JSON with the closed schema {payloadType, payload,
// signatures} (canon.UnmarshalRelaxed: no unknown, duplicate, wrong-case or
// null fields); a known payload type; exactly one signature; canonical
// standard base64 for payload and sig; a non-empty payload; a sig of 64
// bytes (Ed25519) or a passkey assertion object (ParseAssertion); a keyid
// of 64 lowercase hex digits. Every failure is an *Error with
// CodeEnvelope naming the field.
func ParseEnvelope(data []byte) (*Parsed, error) {
	if env, ok := readEnvelope(data); ok {
		return parseFields(env)
	}
	return parseEnvelopeReflect(data)
}

// ParseEnvelopeValue applies the checks of ParseEnvelope to an already
// decoded envelope (for example one embedded in a log leaf).
func ParseEnvelopeValue(env Envelope) (*Parsed, error) { return parseFields(env) }

func parseFields(env Envelope) (*Parsed, error) {
	kind, err := KindFromPayloadType(env.PayloadType)
	if err != nil {
		return nil, err
	}
	if len(env.Signatures) != 1 {
		return nil, envErr("signatures", fmt.Sprintf("must hold exactly one signature, got %d", len(env.Signatures)))
	}
	payload, err := decodeBase64Strict(env.Payload)
	if err != nil {
		return nil, envErr("payload", err.Error())
	}
	if len(payload) == 0 {
		return nil, envErr("payload", "must not be empty")
	}
	s := env.Signatures[0]
	if !isLowerHex64(s.KeyID) {
		return nil, envErr("signatures[0].keyid", "must be 64 lowercase hex digits (SHA-256 of the public key)")
	}
	sig, err := decodeBase64Strict(s.Sig)
	if err != nil {
		return nil, envErr("signatures[0].sig", err.Error())
	}
	p := &Parsed{Envelope: env, Kind: kind, PayloadType: env.PayloadType, Payload: payload, KeyID: s.KeyID}
	switch {
	case len(sig) == ed25519.SignatureSize:
		p.Sig = p.sigBuf[:]
		copy(p.Sig, sig)
	case IsPasskeySig(sig):
		if p.assertion, err = ParseAssertion(sig); err != nil {
			return nil, err
		}
		p.Sig = sig
	default:
		return nil, envErr("signatures[0].sig", fmt.Sprintf("must decode to %d bytes (Ed25519) or to a passkey assertion object, got %d bytes", ed25519.SignatureSize, len(sig)))
	}
	return p, nil
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Verify checks the envelope's signature under pub (DESIGN §4 step 2): pub
// must be the key the keyid names, and the Ed25519 signature must verify
// over PAE(payloadType, payload) of the raw decoded payload bytes. Non-
// canonical signatures (S >= L) are rejected, as crypto/ed25519 does.
// pub should come from ParsePublicKey/CheckPublicKey when it was bound;
// Verify repeats only the cheap small-order blocklist. Failures are *Error
// with CodeSignature.
func (p *Parsed) Verify(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return &Error{Code: CodeSignature, Field: "signatures[0].keyid", Msg: fmt.Sprintf("public key must be %d bytes, got %d", ed25519.PublicKeySize, len(pub))}
	}
	if len(p.Sig) != ed25519.SignatureSize {
		return &Error{Code: CodeSignature, Field: "signatures[0].sig", Msg: fmt.Sprintf("key %s is an Ed25519 key, and the sig is not a 64-byte Ed25519 signature", short16(p.KeyID))}
	}
	if hasSmallOrderEncoding(pub) {
		return &Error{Code: CodeSignature, Field: "signatures[0].keyid", Msg: "public key is a small-order point"}
	}
	if !keyIDMatches(pub, p.KeyID) {
		return &Error{Code: CodeSignature, Field: "signatures[0].keyid", Msg: fmt.Sprintf("keyid %s does not name the given key %s", p.KeyID, KeyID(pub))}
	}
	if !ed25519.Verify(pub, PAE(p.PayloadType, p.Payload), p.Sig[:]) {
		return &Error{Code: CodeSignature, Field: "signatures[0].sig", Msg: fmt.Sprintf("Ed25519 signature does not verify under key %s over the %s payload", p.KeyID, p.PayloadType)}
	}
	return nil
}

func keyIDMatches(pub ed25519.PublicKey, id string) bool {
	h := sha256.Sum256(pub)
	var want [64]byte
	const hexdig = "0123456789abcdef"
	for i, b := range h {
		want[2*i], want[2*i+1] = hexdig[b>>4], hexdig[b&0xf]
	}
	return subtle.ConstantTimeCompare(want[:], []byte(id)) == 1
}

// DedupHash is the submission identity the ledger deduplicates on (DESIGN
// §4 "Denials"): SHA-256 over (payloadType, payload bytes, signature bytes),
// each length-prefixed so that no two different triples share an encoding:
//
//	SHA-256("custody/submission/v1\x00" ||
//	        u64be(len(type)) || type || u64be(len(payload)) || payload ||
//	        u64be(len(sig)) || sig)
//
// The key id is not included: it only names the key, and the same
// signature under a different key id cannot verify.
func DedupHash(payloadType string, payload, sig []byte) [32]byte {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte("custody/submission/v1\x00"))
	binary.BigEndian.PutUint64(n[:], uint64(len(payloadType)))
	h.Write(n[:])
	h.Write([]byte(payloadType))
	binary.BigEndian.PutUint64(n[:], uint64(len(payload)))
	h.Write(n[:])
	h.Write(payload)
	binary.BigEndian.PutUint64(n[:], uint64(len(sig)))
	h.Write(n[:])
	h.Write(sig)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// DedupHash returns the submission identity of p: DedupHash(p.PayloadType,
// p.Payload, p.Sig) for an Ed25519 signature, and PasskeyDedupHash for a
// passkey assertion, whose signature bytes are malleable and randomised
// (DESIGN §1): every signature over the same payload by the same key is
// then one submission.
func (p *Parsed) DedupHash() [32]byte {
	if IsPasskeySig(p.Sig) {
		return PasskeyDedupHash(p.PayloadType, p.Payload, p.KeyID)
	}
	return DedupHash(p.PayloadType, p.Payload, p.Sig)
}

// PasskeyDedupHash is the submission identity of a passkey-signed envelope
// (DESIGN §1): (payloadType, payload, keyid), not its signature bytes, so
// that the (r, n−s) twin of an ES256 signature, or a second assertion over
// the same statement, is a repeat and gets the first decision:
//
//	SHA-256("custody/submission-passkey/v1\x00" ||
//	        u64be(len(type)) || type || u64be(len(payload)) || payload ||
//	        u64be(len(keyid)) || keyid)
//
// Its domain differs from DedupHash's, so the two never collide.
func PasskeyDedupHash(payloadType string, payload []byte, keyID string) [32]byte {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte("custody/submission-passkey/v1\x00"))
	binary.BigEndian.PutUint64(n[:], uint64(len(payloadType)))
	h.Write(n[:])
	h.Write([]byte(payloadType))
	binary.BigEndian.PutUint64(n[:], uint64(len(payload)))
	h.Write(n[:])
	h.Write(payload)
	binary.BigEndian.PutUint64(n[:], uint64(len(keyID)))
	h.Write(n[:])
	h.Write([]byte(keyID))
	var out [32]byte
	h.Sum(out[:0])
	return out
}
