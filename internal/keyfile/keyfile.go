// Package keyfile reads the key files custody's commands are given and
// makes the new key files a rotation writes into a ledger's folder.
//
// It promises that a private key is asked a passphrase for only when its
// file is encrypted (from $CUSTODY_PASSPHRASE or the terminal, package
// sign), that the private key bytes it reads only to derive a public key
// are cleared, and that a new key file never replaces one: it takes the
// next free name, mode 0600.
package keyfile

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/custodylog/custody/sign"
)

// ReadPrivate reads a PKCS#8 private key file, asking for its passphrase
// only if it is encrypted.
func ReadPrivate(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, errors.New("no key file given")
	}
	return sign.ReadPrivateKeyFile(path, sign.Passphrase("passphrase for "+path+": "))
}

// Public returns the public key of a private key file, a public key file,
// or a base64 public key; private reports which it was.
func Public(arg string) (pub ed25519.PublicKey, private bool, err error) {
	if data, err := os.ReadFile(arg); err == nil && bytes.Contains(data, []byte("PRIVATE KEY-----")) {
		clear(data)
		priv, err := ReadPrivate(arg)
		if err != nil {
			return nil, true, err
		}
		pub := priv.Public().(ed25519.PublicKey)
		clear(priv)
		return pub, true, nil
	}
	pub, err = sign.LoadPublicKey(arg)
	return pub, false, err
}

// NewInFolder generates a key and writes it into the ledger folder dir as
// keys/<prefix>-N.key, N the first free number from 2, passphrase-
// encrypted when encrypt (the passphrase asked for twice, or read from
// $CUSTODY_PASSPHRASE). It returns the file's path relative to dir, and the
// passphrase (nil when not encrypted), which the ledger needs to read the
// key: the caller clears it.
func NewInFolder(dir, prefix string, encrypt bool) (rel string, pass []byte, err error) {
	if _, err := os.Stat(filepath.Join(dir, "custody.json")); err != nil {
		return "", nil, fmt.Errorf("no ledger in %s: %w", dir, err)
	}
	for n := 2; ; n++ {
		rel = fmt.Sprintf("keys/%s-%d.key", prefix, n)
		if _, err := os.Lstat(filepath.Join(dir, rel)); errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	path := filepath.Join(dir, rel)
	if encrypt {
		if pass, err = sign.NewPassphrase("passphrase for " + path + ": ")(); err != nil {
			return "", nil, err
		}
	}
	priv, err := Generate(path, pass, false)
	clear(priv)
	if err != nil {
		clear(pass)
		return "", nil, fmt.Errorf("writing the new key: %w", err)
	}
	return rel, pass, nil
}

// Generate generates an Ed25519 key and writes it to path as PKCS#8 PEM,
// mode 0600, passphrase-encrypted when pass is not empty; an existing file
// is replaced only with overwrite (else the error is fs.ErrExist). The
// caller clears the key it returns.
func Generate(path string, pass []byte, overwrite bool) (ed25519.PrivateKey, error) {
	_, priv, err := sign.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := sign.WritePrivateKeyFile(path, priv, pass, overwrite); err != nil {
		clear(priv)
		return nil, err
	}
	return priv, nil
}
