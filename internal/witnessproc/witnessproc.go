// Package witnessproc runs real C2SP tlog-witness witnesses on loopback,
// for tests (internal/witnesstest) and benchmarks (custody bench
// witness): omniwitness (github.com/transparency-dev/witness) and
// litewitness (filippo.io/torchwood), built from the Go module proxy by
// scripts/witness.sh into .cache/bin. Nothing here answers for a witness:
// each Witness is the witness's own binary, with its own database and key.
package witnessproc

import (
	"bytes"
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
	"strings"
	"sync"
	"syscall"
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

	args    []string
	bin     string
	mu      sync.Mutex
	cmd     *exec.Cmd // guarded by mu; nil when stopped
	cleanup []func()
}

// DefaultBin is the folder scripts/witness.sh builds into, under the
// repository root: $CUSTODY_WITNESS_BIN, else <root>/.cache/bin.
func DefaultBin(root string) string {
	if d := os.Getenv("CUSTODY_WITNESS_BIN"); d != "" {
		return d
	}
	return filepath.Join(root, ".cache", "bin")
}

// Missing returns an error naming the first witness binary or tool
// missing from bin and PATH, or nil.
func Missing(bin string) error {
	for _, b := range []string{"omniwitness", "litewitness"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("witness binary %s missing in %s: run scripts/witness.sh", b, bin)
		}
	}
	for _, tool := range []string{"ssh-agent", "ssh-add", "sqlite3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("litewitness needs %s (scripts/witness.sh installs it)", tool)
		}
	}
	return nil
}

// PolicyLine is the witness's line in a policy file, under the given name.
func (w *Witness) PolicyLine(name string) string {
	return fmt.Sprintf("witness %s %s %s", name, w.VKey, w.URL)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// StartOmniwitness runs omniwitness from bin with a fresh key and a SQLite
// database in dir, knowing the given logs.
func StartOmniwitness(bin, dir, name string, logs ...Log) (*Witness, error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return nil, err
	}
	k, err := witness.ParseKey(vkey)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "witness.key")
	if err := os.WriteFile(keyFile, []byte(skey), 0o600); err != nil {
		return nil, err
	}
	var y strings.Builder
	y.WriteString("Logs:\n")
	for _, l := range logs {
		fmt.Fprintf(&y, "  - Origin: %q\n    PublicKey: %q\n    URL: \"http://127.0.0.1:1/unused\"\n", l.Origin, l.VKey)
	}
	logsFile := filepath.Join(dir, "logs.yaml")
	if err := os.WriteFile(logsFile, []byte(y.String()), 0o644); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	w := &Witness{Kind: "omniwitness", Name: name, VKey: k.VerifierKey(), URL: "http://" + addr, Addr: addr, Dir: dir,
		bin: filepath.Join(bin, "omniwitness"),
		args: []string{"--listen=" + addr, "--metrics_listen=", "--private_key_path=" + keyFile,
			"--db_file=" + filepath.Join(dir, "witness.db"), "--additional_logs=" + logsFile}}
	if err := w.Start(); err != nil {
		return nil, err
	}
	return w, nil
}

// StartLitewitness runs litewitness from bin with a fresh key held by its
// own ssh-agent, and a SQLite database in dir that knows the given logs.
func StartLitewitness(bin, dir, name string, logs ...Log) (w *Witness, err error) {
	w = &Witness{Kind: "litewitness", Name: name, Dir: dir, bin: filepath.Join(bin, "litewitness")}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "litewitness key")
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "witness.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	// A Unix socket path must be short: not under a test's TempDir.
	sockDir, err := os.MkdirTemp("", "lw")
	if err != nil {
		return nil, err
	}
	w.cleanup = append(w.cleanup, func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		return nil, fmt.Errorf("ssh-agent: %w", err)
	}
	w.cleanup = append(w.cleanup, func() { agent.Process.Kill(); agent.Wait() })
	// The socket exists a moment before the agent listens on it.
	for i := 0; ; i++ {
		add := exec.Command("ssh-add", keyFile)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		out, err := add.CombinedOutput()
		if err == nil {
			break
		}
		if i == 250 {
			return nil, fmt.Errorf("ssh-add: %v: %s", err, bytes.TrimSpace(out))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The database, with the tables litewitness makes, and the logs (what
	// witnessctl add-log and add-key write).
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
		return nil, fmt.Errorf("sqlite3: %v: %s", err, bytes.TrimSpace(out))
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	w.VKey = fmt.Sprintf("%s+%08x+%s", name, witness.KeyID(name, pub), base64.StdEncoding.EncodeToString(append([]byte{0x04}, pub...)))
	w.URL, w.Addr = "http://"+addr, addr
	w.args = []string{"-name", name, "-db", db, "-ssh-agent", sock, "-key", ssh.FingerprintSHA256(sshPub), "-listen", addr}
	if err := w.Start(); err != nil {
		return nil, err
	}
	return w, nil
}

func sqlQuote(s string) string { return strings.ReplaceAll(s, "'", "''") }

// Start starts the witness (again, after Stop) and waits until it accepts
// connections.
func (w *Witness) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return nil
	}
	out, err := os.OpenFile(filepath.Join(w.Dir, "output.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(w.bin, w.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", w.Addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s did not listen on %s: %v\n%s", w.Kind, w.Name, w.Addr, err, w.Output())
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

// Close stops the witness and whatever runs beside it (ssh-agent).
func (w *Witness) Close() {
	w.Stop()
	for i := len(w.cleanup) - 1; i >= 0; i-- {
		w.cleanup[i]()
	}
	w.cleanup = nil
}

// Output is what the witness wrote to its standard output and error.
func (w *Witness) Output() string {
	b, _ := os.ReadFile(filepath.Join(w.Dir, "output.log"))
	return string(bytes.TrimSpace(b))
}
