package keyfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/sign"
)

func TestNewInFolder(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := NewInFolder(dir, "checkpoint", false); err == nil || !strings.Contains(err.Error(), "no ledger in "+dir) {
		t.Fatalf("no ledger: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "custody.json"), []byte("{}"), 0o644)
	os.Mkdir(filepath.Join(dir, "keys"), 0o700)
	for _, want := range []string{"keys/checkpoint-2.key", "keys/checkpoint-3.key"} {
		rel, pass, err := NewInFolder(dir, "checkpoint", false)
		if err != nil || rel != want || pass != nil {
			t.Fatalf("NewInFolder = %q, %v, %v; want %s", rel, pass, err, want)
		}
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v", rel, fi, err)
		}
	}
	t.Setenv(sign.PassphraseEnv, "correct horse")
	rel, pass, err := NewInFolder(dir, "denial", true)
	if err != nil || rel != "keys/denial-2.key" || string(pass) != "correct horse" {
		t.Fatalf("encrypted: %q %q %v", rel, pass, err)
	}
	if _, err := sign.ReadPrivateKeyFile(filepath.Join(dir, rel), func() ([]byte, error) { return []byte("wrong"), nil }); err == nil {
		t.Fatal("the encrypted key opened with a wrong passphrase")
	}
	if _, err := ReadPrivate(filepath.Join(dir, rel)); err != nil {
		t.Fatalf("with $%s: %v", sign.PassphraseEnv, err)
	}
}

func TestPublic(t *testing.T) {
	dir := t.TempDir()
	pub, priv, _ := sign.GenerateKey()
	privFile, pubFile := filepath.Join(dir, "a.key"), filepath.Join(dir, "a.pub")
	if err := sign.WritePrivateKeyFile(privFile, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	pem, _ := sign.MarshalPublicKeyPEM(pub)
	os.WriteFile(pubFile, pem, 0o644)
	for arg, private := range map[string]bool{privFile: true, pubFile: false, sign.EncodePublicKey(pub): false} {
		got, p, err := Public(arg)
		if err != nil || !got.Equal(pub) || p != private {
			t.Errorf("Public(%s) = %v, %v, %v", arg, got, p, err)
		}
	}
	if _, err := ReadPrivate(""); err == nil {
		t.Error("no file given")
	}
}

func TestGenerate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.key")
	priv, err := Generate(path, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadPrivate(path)
	if err != nil || !got.Equal(priv) {
		t.Fatalf("read back: %v", err)
	}
	if _, err := Generate(path, nil, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing file: %v", err)
	}
	if again, err := Generate(path, nil, true); err != nil || again.Equal(priv) {
		t.Fatalf("overwrite: %v", err)
	}
}
