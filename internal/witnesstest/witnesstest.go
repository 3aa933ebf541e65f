// Package witnesstest runs real C2SP tlog-witness witnesses on loopback
// for tests: omniwitness (github.com/transparency-dev/witness) and
// litewitness (filippo.io/torchwood), built from the Go module proxy by
// scripts/witness.sh into .cache/bin. Nothing here answers for a witness:
// each Witness is the witness's own binary, with its own database and key.
//
// A test that needs them skips when the binaries are missing on a
// developer's machine, and fails when CI is set.
package witnesstest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/witness"
)

// A Log is a log a witness is told about: its origin and checkpoint
// verifier key.
type Log struct {
	Origin string
	VKey   string
}

// A Witness is a witness process on loopback.
type Witness struct {
	Kind string // "omniwitness" or "litewitness"
	Name string // its key name
	// VKey is its cosignature/v1 verifier key (type 0x04).
	VKey string
	URL  string // its base URL (add-checkpoint is under it)
	Addr string // host:port
	Dir  string // its files: key, database, output

	t     testing.TB
	args  []string
	env   []string
	bin   string
	mu    sync.Mutex
	cmd   *exec.Cmd // guarded by mu; nil when stopped
	agent *exec.Cmd // litewitness's ssh-agent
}

// Bin returns the folder holding the witness binaries, skipping the test
// (failing it under CI) when they are missing.
func Bin(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CUSTODY_WITNESS_BIN")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".cache", "bin")
	}
	for _, b := range []string{"omniwitness", "litewitness"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			msg := fmt.Sprintf("witness binary %s missing in %s: run scripts/witness.sh", b, dir)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return dir
}

// PolicyLine is the witness's line in a policy file, under the given name.
func (w *Witness) PolicyLine(name string) string {
	return fmt.Sprintf("witness %s %s %s", name, w.VKey, w.URL)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// StartOmniwitness runs omniwitness with a fresh key and SQLite database,
// knowing the given logs.
func StartOmniwitness(t testing.TB, name string, logs ...Log) *Witness {
	t.Helper()
	bin := filepath.Join(Bin(t), "omniwitness")
	dir := t.TempDir()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := witness.ParseKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "witness.key")
	must(t, os.WriteFile(keyFile, []byte(skey), 0o600))
	var y strings.Builder
	y.WriteString("Logs:\n")
	for _, l := range logs {
		fmt.Fprintf(&y, "  - Origin: %q\n    PublicKey: %q\n    URL: \"http://127.0.0.1:1/unused\"\n", l.Origin, l.VKey)
	}
	logsFile := filepath.Join(dir, "logs.yaml")
	must(t, os.WriteFile(logsFile, []byte(y.String()), 0o644))
	addr := freeAddr(t)
	w := &Witness{Kind: "omniwitness", Name: name, VKey: k.VerifierKey(), URL: "http://" + addr, Addr: addr, Dir: dir, t: t, bin: bin,
		args: []string{"--listen=" + addr, "--metrics_listen=", "--private_key_path=" + keyFile,
			"--db_file=" + filepath.Join(dir, "witness.db"), "--additional_logs=" + logsFile}}
	w.Start()
	t.Cleanup(w.Stop)
	return w
}

// StartLitewitness runs litewitness with a fresh key held by its own
// ssh-agent, and a SQLite database that knows the given logs.
func StartLitewitness(t testing.TB, name string, logs ...Log) *Witness {
	t.Helper()
	bin := filepath.Join(Bin(t), "litewitness")
	for _, tool := range []string{"ssh-agent", "ssh-add", "sqlite3"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := "litewitness needs " + tool + " (scripts/witness.sh installs it)"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "litewitness test key")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "witness.pem")
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600))
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	// A Unix socket path must be short: not under t.TempDir().
	sockDir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	agent.Stdout, agent.Stderr = nil, nil
	must(t, agent.Start())
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 200 {
			t.Fatal("ssh-agent did not create its socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The socket exists a moment before the agent listens on it.
	for i := 0; ; i++ {
		add := exec.Command("ssh-add", keyFile)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		out, err := add.CombinedOutput()
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("ssh-add: %v\n%s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The database, with the tables litewitness makes and the logs.
	empty := sha256.Sum256(nil)
	var sql strings.Builder
	sql.WriteString(`PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS log (origin TEXT PRIMARY KEY, tree_size INTEGER NOT NULL, tree_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS key (origin TEXT NOT NULL, key TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));
CREATE TABLE IF NOT EXISTS bastion (origin TEXT NOT NULL, bastion TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));
`)
	for _, l := range logs {
		fmt.Fprintf(&sql, "INSERT INTO log (origin, tree_size, tree_hash) VALUES ('%s', 0, '%s');\n", sqlQuote(l.Origin), base64.StdEncoding.EncodeToString(empty[:]))
		fmt.Fprintf(&sql, "INSERT INTO key (origin, key) VALUES ('%s', '%s');\n", sqlQuote(l.Origin), sqlQuote(l.VKey))
	}
	db := filepath.Join(dir, "litewitness.db")
	sq := exec.Command("sqlite3", db)
	sq.Stdin = strings.NewReader(sql.String())
	if out, err := sq.CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	w := &Witness{Kind: "litewitness", Name: name, VKey: (&keyOf{name, pub}).vkey(), URL: "http://" + addr, Addr: addr, Dir: dir, t: t, bin: bin, agent: agent,
		args: []string{"-name", name, "-db", db, "-ssh-agent", sock, "-key", ssh.FingerprintSHA256(sshPub), "-listen", addr}}
	w.Start()
	t.Cleanup(w.Stop)
	return w
}

type keyOf struct {
	name string
	pub  ed25519.PublicKey
}

func (k *keyOf) vkey() string {
	return fmt.Sprintf("%s+%08x+%s", k.name, witness.KeyID(k.name, k.pub), base64.StdEncoding.EncodeToString(append([]byte{0x04}, k.pub...)))
}

func sqlQuote(s string) string { return strings.ReplaceAll(s, "'", "''") }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Start starts the witness (again, after Stop), and waits until it
// accepts connections.
func (w *Witness) Start() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return
	}
	out, err := os.OpenFile(filepath.Join(w.Dir, "output.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(w.t, err)
	cmd := exec.Command(w.bin, w.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must(w.t, cmd.Start())
	w.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", w.Addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			out.Close()
			logText, _ := os.ReadFile(filepath.Join(w.Dir, "output.log"))
			w.t.Fatalf("%s %s did not listen on %s: %v\n%s", w.Kind, w.Name, w.Addr, err, logText)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the witness (a witness that is down). Start brings it back
// with its database.
func (w *Witness) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return
	}
	w.cmd.Process.Kill()
	w.cmd.Wait()
	w.cmd = nil
}

// Output is what the witness wrote to its standard output and error.
func (w *Witness) Output() string {
	b, _ := os.ReadFile(filepath.Join(w.Dir, "output.log"))
	return string(bytes.TrimSpace(b))
}

// WaitDown waits until the witness refuses connections.
func (w *Witness) WaitDown(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", w.Addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}
