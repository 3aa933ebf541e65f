package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// PEM block types.
const (
	pemPrivate   = "PRIVATE KEY"           // RFC 7468 §10, PKCS#8 PrivateKeyInfo
	pemEncrypted = "ENCRYPTED PRIVATE KEY" // RFC 7468 §11, PKCS#8 EncryptedPrivateKeyInfo
	pemPublic    = "PUBLIC KEY"            // RFC 7468 §13, PKIX SubjectPublicKeyInfo
)

// MarshalPrivateKeyPEM encodes priv as PKCS#8 PEM. With a nil or empty
// passphrase the result is "PRIVATE KEY" (what `openssl genpkey -algorithm
// ed25519` writes); otherwise "ENCRYPTED PRIVATE KEY" with PBES2(scrypt
// N=2^14 r=8 p=1, AES-256-CBC), which `openssl pkcs8` reads.
func MarshalPrivateKeyPEM(priv ed25519.PrivateKey, passphrase []byte) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, privErr(fmt.Sprintf("private key must be %d bytes, got %d", ed25519.PrivateKeySize, len(priv)), nil)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, privErr("cannot encode PKCS#8", err)
	}
	if len(passphrase) == 0 {
		return pem.EncodeToMemory(&pem.Block{Type: pemPrivate, Bytes: der}), nil
	}
	enc, err := encryptPKCS8(der, passphrase)
	clear(der)
	if err != nil {
		return nil, privErr("cannot encrypt PKCS#8", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemEncrypted, Bytes: enc}), nil
}

// ParsePrivateKeyPEM decodes a PKCS#8 PEM Ed25519 private key, plain or
// encrypted. passphrase is called only if the key is encrypted; it may be
// nil, in which case an encrypted key is an error wrapping ErrNoPassphrase.
// A wrong passphrase yields an error wrapping ErrWrongPassphrase.
func ParsePrivateKeyPEM(data []byte, passphrase func() ([]byte, error)) (ed25519.PrivateKey, error) {
	return parsePrivateKeyPEM(data, passphrase, defaultKDFLimits)
}

func parsePrivateKeyPEM(data []byte, passphrase func() ([]byte, error), lim kdfLimits) (ed25519.PrivateKey, error) {
	block, err := decodeOnePEM(data)
	if err != nil {
		return nil, privErr(err.Error(), nil)
	}
	der := block.Bytes
	switch block.Type {
	case pemPrivate:
	case pemEncrypted:
		if passphrase == nil {
			return nil, privErr("key is encrypted", ErrNoPassphrase)
		}
		pass, err := passphrase()
		if err != nil {
			return nil, privErr("key is encrypted", err)
		}
		der, err = decryptPKCS8(der, pass, lim)
		clear(pass)
		if err != nil {
			return nil, privErr("cannot decrypt key", err)
		}
		defer clear(der)
	default:
		return nil, privErr(fmt.Sprintf("PEM block is %q, want %q or %q", block.Type, pemPrivate, pemEncrypted), nil)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		if block.Type == pemEncrypted {
			// Valid padding by chance (about 1 in 256) under a wrong key.
			return nil, privErr("cannot decrypt key", ErrWrongPassphrase)
		}
		return nil, privErr("malformed PKCS#8", errors.New(stripX509(err)))
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, privErr(fmt.Sprintf("key is %T, want Ed25519", key), nil)
	}
	return priv, nil
}

// MarshalPublicKeyPEM encodes pub as PKIX "PUBLIC KEY" PEM.
func MarshalPublicKeyPEM(pub ed25519.PublicKey) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, keyErr("public_key", fmt.Sprintf("must be %d bytes, got %d", ed25519.PublicKeySize, len(pub)))
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, keyErr("public_key", err.Error())
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublic, Bytes: der}), nil
}

// ParsePublicKeyPEM decodes a PKIX "PUBLIC KEY" PEM Ed25519 key and checks
// it with CheckPublicKey.
func ParsePublicKeyPEM(data []byte) (ed25519.PublicKey, error) {
	block, err := decodeOnePEM(data)
	if err != nil {
		return nil, keyErr("public_key", err.Error())
	}
	if block.Type != pemPublic {
		return nil, keyErr("public_key", fmt.Sprintf("PEM block is %q, want %q", block.Type, pemPublic))
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, keyErr("public_key", "malformed PKIX: "+stripX509(err))
	}
	pub, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, keyErr("public_key", fmt.Sprintf("key is %T, want Ed25519", key))
	}
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// decodeOnePEM requires exactly one PEM block, with no headers, and nothing
// but whitespace around it.
func decodeOnePEM(data []byte) (*pem.Block, error) {
	start := bytes.Index(data, []byte("-----BEGIN "))
	if start < 0 {
		return nil, errors.New("no PEM block found")
	}
	if len(bytes.TrimSpace(data[:start])) != 0 {
		return nil, errors.New("unexpected data before the PEM block")
	}
	block, rest := pem.Decode(data[start:])
	if block == nil {
		return nil, errors.New("malformed PEM block")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("unexpected data after the PEM block")
	}
	if len(block.Headers) != 0 {
		return nil, errors.New("PEM headers are not supported (legacy encryption?)")
	}
	return block, nil
}

func stripX509(err error) string {
	return string(bytes.TrimPrefix([]byte(err.Error()), []byte("x509: ")))
}
