package console

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"

	"github.com/custodylog/custody/sign"
)

// COSE key parameters (RFC 9052 §7, RFC 9053): kty, alg, crv, x, y.
const (
	coseKty, coseAlg, coseCrv, coseX, coseY = 1, 3, -1, -2, -3
	coseKtyOKP, coseKtyEC2                  = 1, 2
	coseCrvP256, coseCrvEd25519             = 1, 6
)

// spkiFromCOSE turns the COSE public key a registration returned into the
// key type and SPKI DER a passkey file names (DESIGN §1): ES256 on P-256
// or EdDSA on Ed25519, nothing else.
func spkiFromCOSE(cose []byte) (keyType string, spki []byte, err error) {
	k, err := webauthncose.ParsePublicKey(cose)
	if err != nil {
		return "", nil, fmt.Errorf("the credential's public key is not a COSE key custody reads: %v", err)
	}
	switch k := k.(type) {
	case webauthncose.EC2PublicKeyData:
		if k.Algorithm != int64(webauthncose.AlgES256) || k.Curve != coseCrvP256 {
			return "", nil, fmt.Errorf("the credential's EC2 key has alg %d curve %d; custody takes ES256 on P-256 (alg -7, crv 1)", k.Algorithm, k.Curve)
		}
		pub, err := k.ToECDSA()
		if err != nil {
			return "", nil, fmt.Errorf("the credential's P-256 key: %v", err)
		}
		spki, err = x509.MarshalPKIXPublicKey(pub)
		return sign.KeyTypeWebAuthnES256, spki, err
	case webauthncose.OKPPublicKeyData:
		if k.Algorithm != int64(webauthncose.AlgEdDSA) || k.Curve != coseCrvEd25519 || len(k.XCoord) != ed25519.PublicKeySize {
			return "", nil, fmt.Errorf("the credential's OKP key has alg %d curve %d; custody takes EdDSA on Ed25519 (alg -8, crv 6)", k.Algorithm, k.Curve)
		}
		spki, err = x509.MarshalPKIXPublicKey(ed25519.PublicKey(k.XCoord))
		return sign.KeyTypeWebAuthnEd25519, spki, err
	}
	return "", nil, errors.New("the credential's key is neither ES256 nor EdDSA; custody takes those two (COSE alg -7, -8)")
}

// coseFromPasskey is the COSE form of an enrolled passkey's key, which
// go-webauthn checks a sign-in assertion with.
func coseFromPasskey(k *sign.Passkey) ([]byte, error) {
	pub, err := x509.ParsePKIXPublicKey(k.SPKI)
	if err != nil {
		return nil, err
	}
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		b, err := pub.Bytes() // 0x04 || x || y
		if err != nil || len(b) != 65 {
			return nil, fmt.Errorf("passkey %s: not an uncompressed P-256 point", k.KeyID())
		}
		return webauthncbor.Marshal(map[int]any{coseKty: coseKtyEC2, coseAlg: int(webauthncose.AlgES256), coseCrv: coseCrvP256,
			coseX: b[1:33], coseY: b[33:]})
	case ed25519.PublicKey:
		return webauthncbor.Marshal(map[int]any{coseKty: coseKtyOKP, coseAlg: int(webauthncose.AlgEdDSA), coseCrv: coseCrvEd25519,
			coseX: []byte(pub)})
	}
	return nil, fmt.Errorf("passkey %s: key type %T", k.KeyID(), pub)
}
