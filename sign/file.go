package sign

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/custodylog/custody/internal/durable"
)

// PassphraseEnv is the environment variable Passphrase and NewPassphrase read
// before falling back to a terminal prompt.
const PassphraseEnv = "CUSTODY_PASSPHRASE"

// WritePrivateKeyFile writes priv to path as PKCS#8 PEM with mode 0600,
// encrypted if passphrase is non-empty (see MarshalPrivateKeyPEM). It
// refuses to replace an existing file unless overwrite is set; the new file
// is durable (file and parent directory fsynced) when it returns nil.
func WritePrivateKeyFile(path string, priv ed25519.PrivateKey, passphrase []byte, overwrite bool) error {
	data, err := MarshalPrivateKeyPEM(priv, passphrase)
	if err != nil {
		return err
	}
	defer clear(data)
	return writeFileDurable(path, data, 0o600, overwrite)
}

// ReadPrivateKeyFile reads a key written by WritePrivateKeyFile or by
// openssl (see ParsePrivateKeyPEM). passphrase is called only if the file is
// encrypted.
func ReadPrivateKeyFile(path string, passphrase func() ([]byte, error)) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, privErr("cannot read key file", err)
	}
	defer clear(data)
	priv, err := ParsePrivateKeyPEM(data, passphrase)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return priv, nil
}

// WritePublicKeyFile writes pub to path as PKIX PEM with mode 0644, with the
// same overwrite and durability rules as WritePrivateKeyFile.
func WritePublicKeyFile(path string, pub ed25519.PublicKey, overwrite bool) error {
	data, err := MarshalPublicKeyPEM(pub)
	if err != nil {
		return err
	}
	return writeFileDurable(path, data, 0o644, overwrite)
}

// LoadPublicKey accepts a public key given either as the statement form
// (standard base64 of the 32 raw bytes) or as the path of a PKIX PEM file,
// and checks it with CheckPublicKey. A string that decodes as base64 to
// exactly 32 bytes is taken as a key, never as a file name.
func LoadPublicKey(arg string) (ed25519.PublicKey, error) {
	if len(arg) == 44 && strings.HasSuffix(arg, "=") {
		if b, err := decodeBase64Strict(arg); err == nil && len(b) == ed25519.PublicKeySize {
			return ParsePublicKey(arg)
		}
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, keyErr("public_key", fmt.Sprintf("%q is neither a base64 Ed25519 public key nor a readable file", arg))
		}
		return nil, &Error{Code: CodeKey, Field: "public_key", Msg: "cannot read key file", Err: err}
	}
	pub, err := ParsePublicKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	return pub, nil
}

// Passphrase returns a passphrase source for reading an encrypted key: the
// value of $CUSTODY_PASSPHRASE if set and non-empty, otherwise a prompt on
// standard error with an unechoed read from standard input if it is a
// terminal, otherwise an error wrapping ErrNoPassphrase. The prompt is shown
// only when the source is called (keys that are not encrypted never ask).
func Passphrase(prompt string) func() ([]byte, error) {
	return func() ([]byte, error) { return readPassphrase(prompt, false) }
}

// NewPassphrase is Passphrase for choosing a passphrase: on a terminal it
// asks twice and requires both answers to match.
func NewPassphrase(prompt string) func() ([]byte, error) {
	return func() ([]byte, error) { return readPassphrase(prompt, true) }
}

func readPassphrase(prompt string, confirm bool) ([]byte, error) {
	if v := os.Getenv(PassphraseEnv); v != "" {
		return []byte(v), nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return nil, fmt.Errorf("%w: set %s or run on a terminal", ErrNoPassphrase, PassphraseEnv)
	}
	ask := func(p string) ([]byte, error) {
		fmt.Fprint(os.Stderr, p)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return nil, fmt.Errorf("cannot read passphrase: %w", err)
		}
		return b, nil
	}
	pass, err := ask(prompt)
	if err != nil {
		return nil, err
	}
	if len(pass) == 0 {
		return nil, fmt.Errorf("%w: empty passphrase", ErrNoPassphrase)
	}
	if confirm {
		again, err := ask("Repeat: ")
		if err != nil {
			clear(pass)
			return nil, err
		}
		same := bytes.Equal(pass, again)
		clear(again)
		if !same {
			clear(pass)
			return nil, errors.New("passphrases do not match")
		}
	}
	return pass, nil
}

// writeFileDurable creates path with perm and data. Without overwrite it
// uses O_EXCL, so an existing file (or a symlink planted in its place) is
// never touched. With overwrite it writes a temporary file in the same
// directory and renames it over path, so a crash leaves the old or the new
// key, never a torn one. Either way the file is fsynced before it is
// renamed/closed, and then the parent directory is fsynced so the directory
// entry itself survives a power loss.
func writeFileDurable(path string, data []byte, perm os.FileMode, overwrite bool) error {
	dir := filepath.Dir(path)
	target := path
	if overwrite {
		target = filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d", filepath.Base(path), os.Getpid()))
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) && !overwrite {
			return fmt.Errorf("%s already exists (refusing to overwrite): %w", path, fs.ErrExist)
		}
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(target)
		}
	}()
	// O_CREATE applies the umask; make the mode exact.
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if overwrite {
		if err := os.Rename(target, path); err != nil {
			return err
		}
	}
	ok = true
	return syncDir(dir)
}

func syncDir(dir string) error { return durable.SyncDir(dir) }
