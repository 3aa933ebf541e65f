package sign

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/testenv"
	"golang.org/x/term"
)

func constPass(s string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(s), nil }
}

func TestPrivateKeyPEMRoundTrip(t *testing.T) {
	priv := seedKey(1)
	plain, err := MarshalPrivateKeyPEM(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(plain, []byte("-----BEGIN PRIVATE KEY-----\n")) {
		t.Fatalf("plain PEM header: %q", plain)
	}
	called := false
	got, err := ParsePrivateKeyPEM(plain, func() ([]byte, error) { called = true; return nil, nil })
	if err != nil || !got.Equal(priv) {
		t.Fatalf("round trip: %v", err)
	}
	if called {
		t.Error("passphrase source called for an unencrypted key")
	}

	enc, err := MarshalPrivateKeyPEM(priv, []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(enc, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")) {
		t.Fatalf("encrypted PEM header: %q", enc)
	}
	if bytes.Contains(enc, plain[28:60]) {
		t.Fatal("encrypted PEM contains the plain key")
	}
	got, err = ParsePrivateKeyPEM(enc, constPass("correct horse"))
	if err != nil || !got.Equal(priv) {
		t.Fatalf("encrypted round trip: %v", err)
	}
	_, err = ParsePrivateKeyPEM(enc, constPass("wrong horse"))
	if !errors.Is(err, ErrWrongPassphrase) || !errors.Is(err, ErrPrivateKey) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	_, err = ParsePrivateKeyPEM(enc, nil)
	if !errors.Is(err, ErrNoPassphrase) {
		t.Fatalf("nil passphrase: %v", err)
	}
	boom := errors.New("boom")
	_, err = ParsePrivateKeyPEM(enc, func() ([]byte, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("passphrase error not propagated: %v", err)
	}
	if strings.Contains(err.Error(), "correct") {
		t.Fatal("error mentions passphrase")
	}
}

// Many wrong passphrases: none panics and every one is ErrWrongPassphrase,
// including the ~1 in 256 whose decryption happens to end in valid padding
// (cheap scrypt parameters so that hundreds of tries are fast).
func TestWrongPassphraseNeverPanics(t *testing.T) {
	plain, _ := MarshalPrivateKeyPEM(seedKey(1), nil)
	block, _ := decodeOnePEM(plain)
	enc := pemEncode(pemEncrypted, cheapEncrypt(t, block.Bytes, []byte("right"), "scrypt"))
	for i := 0; i < 1000; i++ {
		_, err := parsePrivateKeyPEM(enc, constPass(fmt.Sprint("wrong", i)), fuzzKDFLimits)
		if !errors.Is(err, ErrWrongPassphrase) || !errors.Is(err, ErrPrivateKey) {
			t.Fatalf("passphrase %d: %v", i, err)
		}
	}
}

func TestParsePrivateKeyPEMRejects(t *testing.T) {
	plain, _ := MarshalPrivateKeyPEM(seedKey(1), nil)
	pubPEM, _ := MarshalPublicKeyPEM(seedKey(1).Public().(ed25519.PublicKey))
	for name, in := range map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("hello"),
		"public key":     pubPEM,
		"two blocks":     append(bytes.Clone(plain), plain...),
		"trailing junk":  append(bytes.Clone(plain), "junk"...),
		"leading junk":   append([]byte("junk\n"), plain...),
		"legacy headers": []byte("-----BEGIN PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nMC4CAQAwBQYDK2VwBCIEIEXxZu35mBAp2Vd88dypK+73r56Wm7EY/V7x5uQK8ahD\n-----END PRIVATE KEY-----\n"),
		"RSA":            []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"),
		"truncated DER":  []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIEXxZu35mBAp2Vd88dypK+73\n-----END PRIVATE KEY-----\n"),
	} {
		if _, err := ParsePrivateKeyPEM(in, constPass("x")); !errors.Is(err, ErrPrivateKey) {
			t.Errorf("%s: err = %v, want %s", name, err, CodePrivateKey)
		}
	}
}

func TestPublicKeyPEM(t *testing.T) {
	pub := seedKey(1).Public().(ed25519.PublicKey)
	p, err := MarshalPublicKeyPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(p, []byte("-----BEGIN PUBLIC KEY-----\n")) {
		t.Fatalf("header: %q", p)
	}
	got, err := ParsePublicKeyPEM(p)
	if err != nil || !got.Equal(pub) {
		t.Fatalf("round trip: %v", err)
	}
	// A small-order key wrapped in valid PKIX is still rejected.
	bad, _ := MarshalPublicKeyPEM(ed25519.PublicKey(bytes.Clone(smallOrder[1][:])))
	if _, err := ParsePublicKeyPEM(bad); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "small-order") {
		t.Fatalf("small-order PEM: %v", err)
	}
	priv, _ := MarshalPrivateKeyPEM(seedKey(1), nil)
	if _, err := ParsePublicKeyPEM(priv); !errors.Is(err, ErrKey) {
		t.Fatalf("private PEM as public: %v", err)
	}
}

func TestWritePrivateKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.pem")
	priv := seedKey(1)
	if err := WritePrivateKeyFile(path, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	before, _ := os.ReadFile(path)

	// Refuses to overwrite; the existing file is untouched.
	err = WritePrivateKeyFile(path, seedKey(2), nil, false)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second write: %v, want ErrExist", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("refused write changed the file")
	}

	// A symlink in place of the file is not followed.
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link.pem")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivateKeyFile(link, priv, nil, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("write through symlink: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("symlink target was created")
	}

	// Overwrite when asked: new content, still 0600, encrypted, no temp files.
	if err := WritePrivateKeyFile(path, seedKey(2), []byte("pw"), true); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after overwrite %v", fi.Mode().Perm())
	}
	got, err := ReadPrivateKeyFile(path, constPass("pw"))
	if err != nil || !got.Equal(seedKey(2)) {
		t.Fatalf("read back: %v", err)
	}
	if _, err := ReadPrivateKeyFile(path, constPass("nope")); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 { // k.pem, link.pem
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v", names)
	}

	// Under a permissive umask-free mode request, still exactly 0600 and a
	// missing directory is an error, not a panic.
	if err := WritePrivateKeyFile(filepath.Join(dir, "no", "k.pem"), priv, nil, false); err == nil {
		t.Fatal("write into missing dir succeeded")
	}
}

func TestPublicKeyFileAndLoad(t *testing.T) {
	dir := t.TempDir()
	pub := seedKey(1).Public().(ed25519.PublicKey)
	path := filepath.Join(dir, "k.pub")
	if err := WritePublicKeyFile(path, pub, false); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKeyFile(path, pub, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrite: %v", err)
	}
	for _, arg := range []string{path, EncodePublicKey(pub)} {
		got, err := LoadPublicKey(arg)
		if err != nil || !got.Equal(pub) {
			t.Fatalf("LoadPublicKey(%q): %v", arg, err)
		}
	}
	for _, arg := range []string{
		filepath.Join(dir, "missing"),
		"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", // identity
		"not base64 and not a file",
	} {
		if _, err := LoadPublicKey(arg); !errors.Is(err, ErrKey) {
			t.Errorf("LoadPublicKey(%q) = %v", arg, err)
		}
	}
}

func TestPassphraseEnv(t *testing.T) {
	t.Setenv(PassphraseEnv, "from-env")
	for _, f := range []func(string) func() ([]byte, error){Passphrase, NewPassphrase} {
		got, err := f("Passphrase: ")()
		if err != nil || string(got) != "from-env" {
			t.Fatalf("got %q, %v", got, err)
		}
	}
	if term.IsTerminal(int(os.Stdin.Fd())) {
		t.Skip("stdin is a terminal; not testing the no-source error")
	}
	t.Setenv(PassphraseEnv, "")
	if _, err := Passphrase("Passphrase: ")(); !errors.Is(err, ErrNoPassphrase) {
		t.Fatalf("no source: %v", err)
	}
}

// --- OpenSSL interoperability ---

func needOpenSSL(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("openssl")
	if err != nil {
		testenv.Need(t, "openssl is not installed: the interoperability test reads and writes key files with it (apt-get install openssl; .ci/run installs it)")
	}
	return p
}

func runOpenSSL(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

func TestOpenSSLReadsOurs(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	priv := seedKey(1)
	wantPub, _ := MarshalPublicKeyPEM(priv.Public().(ed25519.PublicKey))

	plain := filepath.Join(dir, "plain.pem")
	if err := WritePrivateKeyFile(plain, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if got := runOpenSSL(t, bin, "pkey", "-in", plain, "-pubout"); !bytes.Equal(got, wantPub) {
		t.Errorf("openssl pubkey of our key:\n%s\nwant\n%s", got, wantPub)
	}

	enc := filepath.Join(dir, "enc.pem")
	if err := WritePrivateKeyFile(enc, priv, []byte("s3cret pass"), false); err != nil {
		t.Fatal(err)
	}
	got := runOpenSSL(t, bin, "pkcs8", "-in", enc, "-passin", "pass:s3cret pass")
	ours, _ := os.ReadFile(plain)
	if !bytes.Equal(got, ours) {
		t.Errorf("openssl decryption of our encrypted key:\n%s\nwant\n%s", got, ours)
	}
	cmd := exec.Command(bin, "pkcs8", "-in", enc, "-passin", "pass:wrong")
	if err := cmd.Run(); err == nil {
		t.Error("openssl decrypted our key with a wrong passphrase")
	}

	// Our public PEM is read by openssl.
	pubPath := filepath.Join(dir, "pub.pem")
	if err := WritePublicKeyFile(pubPath, priv.Public().(ed25519.PublicKey), false); err != nil {
		t.Fatal(err)
	}
	if got := runOpenSSL(t, bin, "pkey", "-pubin", "-in", pubPath); !bytes.Equal(got, wantPub) {
		t.Errorf("openssl re-encoding of our public key differs:\n%s", got)
	}
}

func TestWeReadOpenSSL(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	runOpenSSL(t, bin, "genpkey", "-algorithm", "ed25519", "-out", key)
	pubPEM := runOpenSSL(t, bin, "pkey", "-in", key, "-pubout")

	priv, err := ReadPrivateKeyFile(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKeyPEM(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("public key from openssl does not match its private key")
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"pbkdf2-sha256", []string{"-v2", "aes-256-cbc"}},
		{"pbkdf2-sha256-iter", []string{"-v2", "aes-256-cbc", "-iter", "100000"}},
		{"scrypt", []string{"-v2", "aes-256-cbc", "-scrypt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".pem")
			args := append([]string{"pkcs8", "-topk8", "-in", key, "-out", out, "-passout", "pass:open sesame"}, tc.args...)
			runOpenSSL(t, bin, args...)
			got, err := ReadPrivateKeyFile(out, constPass("open sesame"))
			if err != nil || !got.Equal(priv) {
				t.Fatalf("read openssl %s key: %v", tc.name, err)
			}
			if _, err := ReadPrivateKeyFile(out, constPass("open sesame!")); !errors.Is(err, ErrWrongPassphrase) {
				t.Fatalf("wrong passphrase: %v", err)
			}
		})
	}

	// An openssl signature over PAE verifies with Verify.
	pt, _ := PayloadType("receipt")
	payload := []byte(`{"type":"RECEIPT"}`)
	msg := filepath.Join(dir, "msg")
	os.WriteFile(msg, PAE(pt, payload), 0o600)
	sig := runOpenSSL(t, bin, "pkeyutl", "-sign", "-inkey", key, "-rawin", "-in", msg)
	p := &Parsed{Kind: "receipt", PayloadType: pt, Payload: payload, KeyID: KeyID(pub), Sig: sig}
	if len(sig) != 64 {
		t.Fatalf("openssl signature is %d bytes", len(sig))
	}
	if err := p.Verify(pub); err != nil {
		t.Fatalf("openssl signature: %v", err)
	}
	// And openssl verifies ours.
	env, _ := Sign(priv, "receipt", payload)
	ourSig, _ := decodeBase64Strict(env.Signatures[0].Sig)
	sigPath := filepath.Join(dir, "sig")
	os.WriteFile(sigPath, ourSig, 0o600)
	runOpenSSL(t, bin, "pkeyutl", "-verify", "-pubin", "-inkey", writeTemp(t, dir, "pub.pem", pubPEM), "-rawin", "-in", msg, "-sigfile", sigPath)
}

func writeTemp(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
