// Package softauthn is a software WebAuthn authenticator for tests: it
// holds a passkey's private key and signs custody statements the way a
// browser and an authenticator together would (DESIGN §1), producing the
// envelope sig {authenticator_data, client_data_json, signature}. Options
// break one field at a time, so tests can show that each rule of the
// passkey check is enforced. It is for tests and tools only: a real
// passkey never leaves its authenticator.
package softauthn

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/sign"
)

// Authenticator is one passkey: its private key and the relying party it
// was registered with.
type Authenticator struct {
	KeyType      string
	RPID         string
	Origins      []string
	CredentialID []byte

	ec *ecdsa.PrivateKey
	ed ed25519.PrivateKey
}

// New returns an authenticator with a fresh key of keyType
// (sign.KeyTypeWebAuthnES256 or sign.KeyTypeWebAuthnEd25519) for rpID,
// used from origin.
func New(keyType, rpID, origin string) (*Authenticator, error) {
	a := &Authenticator{KeyType: keyType, RPID: rpID, Origins: []string{origin}, CredentialID: make([]byte, 16)}
	rand.Read(a.CredentialID)
	var err error
	switch keyType {
	case sign.KeyTypeWebAuthnES256:
		a.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case sign.KeyTypeWebAuthnEd25519:
		_, a.ed, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("softauthn: unknown key type %q", keyType)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// SPKI returns the public key's SubjectPublicKeyInfo DER.
func (a *Authenticator) SPKI() []byte {
	var der []byte
	if a.ec != nil {
		der, _ = x509.MarshalPKIXPublicKey(&a.ec.PublicKey)
	} else {
		der, _ = x509.MarshalPKIXPublicKey(a.ed.Public())
	}
	return der
}

// PublicKey is the enrollment's `public_key`: standard base64 of the SPKI.
func (a *Authenticator) PublicKey() string { return base64.StdEncoding.EncodeToString(a.SPKI()) }

// KeyID is the passkey's key id.
func (a *Authenticator) KeyID() string {
	h := sha256.Sum256(a.SPKI())
	return fmt.Sprintf("%x", h)
}

// Enrollment is the passkey file `custody principal enroll --passkey` reads.
type Enrollment = sign.PasskeyFile

// Enrollment returns the passkey file for this authenticator.
func (a *Authenticator) Enrollment(allowed ...string) Enrollment {
	return Enrollment{KeyType: a.KeyType, PublicKey: a.PublicKey(),
		CredentialID: base64.StdEncoding.EncodeToString(a.CredentialID),
		RPID:         a.RPID, Origins: a.Origins, AllowedTypes: allowed}
}

// Passkey returns the verifier's view of this authenticator.
func (a *Authenticator) Passkey() *sign.Passkey {
	k, err := sign.NewPasskey(a.KeyType, a.PublicKey(), a.RPID, a.Origins)
	if err != nil {
		panic(err)
	}
	return k
}

// Options changes what the authenticator and client put into one
// assertion; the zero value makes an honest one.
type Options struct {
	Type        string // client data type; default "webauthn.get"
	Challenge   string // default: the statement's challenge
	Origin      string // default: the first origin
	CrossOrigin *bool  // default: false, written out as browsers do
	TopOrigin   string // added when set
	// ClientData, when set, replaces the client data JSON entirely.
	ClientData []byte
	// RPID, when set, is hashed into the authenticator data instead.
	RPID string
	// Flags, when set, replaces the flags byte (default UP|UV = 0x05).
	Flags *byte
	// Extra is appended to the authenticator data after signCount.
	Extra []byte
	// Corrupt flips a bit of the signature after signing.
	Corrupt bool
	// Mutate, when set, edits the finished assertion (as base64url
	// members) before it is encoded: for twins and encoding variants.
	Mutate func(m map[string]string)
}

// Sign signs payload as a statement of kind and returns the envelope.
func (a *Authenticator) Sign(kind string, payload []byte, o Options) (sign.Envelope, error) {
	pt, err := sign.PayloadType(kind)
	if err != nil {
		return sign.Envelope{}, err
	}
	cd := o.ClientData
	if cd == nil {
		typ, ch, origin := o.Type, o.Challenge, o.Origin
		if typ == "" {
			typ = "webauthn.get"
		}
		if ch == "" {
			ch = sign.Challenge(pt, payload)
		}
		if origin == "" {
			origin = a.Origins[0]
		}
		cross := false
		if o.CrossOrigin != nil {
			cross = *o.CrossOrigin
		}
		// Member order as browsers write it, not canonical.
		s := fmt.Sprintf(`{"type":%s,"challenge":%s,"origin":%s,"crossOrigin":%t`, q(typ), q(ch), q(origin), cross)
		if o.TopOrigin != "" {
			s += `,"topOrigin":` + q(o.TopOrigin)
		}
		cd = []byte(s + "}")
	}
	rp := a.RPID
	if o.RPID != "" {
		rp = o.RPID
	}
	rh := sha256.Sum256([]byte(rp))
	flags := byte(0x05)
	if o.Flags != nil {
		flags = *o.Flags
	}
	ad := append(append(rh[:], flags, 0, 0, 0, 0), o.Extra...)
	ch := sha256.Sum256(cd)
	signed := append(append([]byte{}, ad...), ch[:]...)
	var sig []byte
	if a.ec != nil {
		d := sha256.Sum256(signed)
		sig, err = ecdsa.SignASN1(rand.Reader, a.ec, d[:])
		if err != nil {
			return sign.Envelope{}, err
		}
	} else {
		sig = ed25519.Sign(a.ed, signed)
	}
	if o.Corrupt {
		sig[len(sig)-1] ^= 1
	}
	m := map[string]string{
		"authenticator_data": b64u(ad),
		"client_data_json":   b64u(cd),
		"signature":          b64u(sig),
	}
	if o.Mutate != nil {
		o.Mutate(m)
	}
	obj, err := canon.Marshal(m)
	if err != nil {
		return sign.Envelope{}, err
	}
	return sign.Envelope{PayloadType: pt, Payload: base64.StdEncoding.EncodeToString(payload),
		Signatures: []sign.Signature{{KeyID: a.KeyID(), Sig: base64.StdEncoding.EncodeToString(obj)}}}, nil
}

// Twin returns the (r, n−s) twin of an ES256 signature in base64url DER:
// it verifies as well as the original.
func Twin(sigB64u string) (string, error) {
	der, err := base64.RawURLEncoding.DecodeString(sigB64u)
	if err != nil {
		return "", err
	}
	r, s, err := parseDER(der)
	if err != nil {
		return "", err
	}
	s2 := new(big.Int).Sub(elliptic.P256().Params().N, s)
	out, err := marshalDER(r, s2)
	if err != nil {
		return "", err
	}
	return b64u(out), nil
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
