// Package servertest runs a custody ledger server on a loopback port for
// tests: a fresh ledger in a temporary folder, the server in front of it,
// and helpers to enroll principals and grant agents through the client.
package servertest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Origin is the test log's origin.
const Origin = "test.example/custody"

// Log is a ledger served on a loopback port.
type Log struct {
	T      testing.TB
	Dir    string
	Ledger *ledger.Ledger
	Server *server.Server
	HTTP   *httptest.Server
	URL    string
	VKey   string
	Admin  *client.Runtime
	// AdminKey is the admin's private key.
	AdminKey ed25519.PrivateKey
	Client   *client.Client
	n        atomic.Int64
	stop     sync.Once
	stopFn   func()

	mu   sync.Mutex
	keys map[*client.Runtime]ed25519.PrivateKey // guarded by mu
}

// Start creates a ledger in t.TempDir() and serves it on 127.0.0.1 (a
// random port). Everything is closed when the test ends.
func Start(t testing.TB, opts server.Options) *Log {
	t.Helper()
	dir, l, adminPriv := initLog(t, nil)
	return serve(t, dir, l, adminPriv, opts)
}

// StartKeyed is Start with the given log key, so that a test can tell
// witnesses the log's verifier key before the server starts.
func StartKeyed(t testing.TB, logKey ed25519.PrivateKey, opts server.Options) *Log {
	t.Helper()
	dir, l, adminPriv := initLog(t, logKey)
	return serve(t, dir, l, adminPriv, opts)
}

// StartKeyedAt is StartKeyed with the log in loc: a data folder, or a
// postgres:// URL (storagetest.PostgresURL makes one per test). Dir is loc.
func StartKeyedAt(t testing.TB, loc string, logKey ed25519.PrivateKey, opts server.Options) *Log {
	t.Helper()
	dir, l, adminPriv := initLogAt(t, loc, logKey)
	return serve(t, dir, l, adminPriv, opts)
}

// initLog creates a ledger with a fresh admin key in t.TempDir(), and a
// fresh log key unless one is given.
func initLog(t testing.TB, logKey ed25519.PrivateKey) (string, *ledger.Ledger, ed25519.PrivateKey) {
	t.Helper()
	return initLogAt(t, t.TempDir(), logKey)
}

func initLogAt(t testing.TB, dir string, logKey ed25519.PrivateKey) (string, *ledger.Ledger, ed25519.PrivateKey) {
	t.Helper()
	_, adminPriv, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Init(dir, Origin, ledger.InitOptions{AdminKey: adminPriv, LogKey: logKey})
	if err != nil {
		t.Fatal(err)
	}
	return dir, l, adminPriv
}

// StartRotated is Start for a log whose checkpoint key was rotated right
// after GENESIS: the log key, bound in GENESIS, is retired at size 1 and a
// new key signs checkpoints. VKey is the log's key set.
func StartRotated(t testing.TB, opts server.Options) *Log {
	t.Helper()
	dir, l, adminPriv := initLog(t, nil)
	l.Close()
	_, priv, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WritePrivateKeyFile(filepath.Join(dir, "keys", "checkpoint-2.key"), priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.RotateCheckpointKey(dir, "keys/checkpoint-2.key", ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.FinishRotation(dir, ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	if l, err = ledger.Open(dir, ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	return serve(t, dir, l, adminPriv, opts)
}

// StartDenialRotated is Start for a log whose DENIAL key the admin rotated
// right after GENESIS (ledger.RotateDenialKey): DENIALs are signed by a
// key the log's trust chain names, not by a checkpoint key.
func StartDenialRotated(t testing.TB, opts server.Options) *Log {
	t.Helper()
	dir, l, adminPriv := initLog(t, nil)
	l.Close()
	_, priv, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.WritePrivateKeyFile(filepath.Join(dir, "keys", "denial-2.key"), priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.RotateDenialKey(dir, "keys/denial-2.key", adminPriv, ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	if l, err = ledger.Open(dir, ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	return serve(t, dir, l, adminPriv, opts)
}

func serve(t testing.TB, dir string, l *ledger.Ledger, adminPriv ed25519.PrivateKey, opts server.Options) *Log {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := server.New(l, opts)
	hs := httptest.NewUnstartedServer(s.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.Listener = ln
	hs.Start()
	lg := &Log{T: t, Dir: dir, Ledger: l, Server: s, HTTP: hs, URL: hs.URL, VKey: l.VerifierKey()}
	wctx, wstop := context.WithCancel(context.Background())
	wdone := make(chan struct{})
	go func() { defer close(wdone); s.RunWitnesses(wctx) }()
	lg.stopFn = func() {
		hs.CloseClientConnections()
		hs.Close()
		wstop()
		<-wdone
		l.Close()
	}
	t.Cleanup(lg.Close)
	lg.Client = lg.NewClient()
	lg.AdminKey = adminPriv
	lg.Admin = lg.runtime(adminPriv, "admin")
	return lg
}

func (lg *Log) runtime(priv ed25519.PrivateKey, name string) *client.Runtime {
	r := client.NewRuntime(lg.Client, priv, name, nil)
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.keys == nil {
		lg.keys = map[*client.Runtime]ed25519.PrivateKey{}
	}
	lg.keys[r] = priv
	return r
}

// KeyOf returns the private key of a runtime the harness made.
func (lg *Log) KeyOf(r *client.Runtime) ed25519.PrivateKey {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.keys[r]
}

// NewClient returns a client of the server.
func (lg *Log) NewClient() *client.Client {
	c, err := client.New(lg.URL, lg.VKey, nil)
	if err != nil {
		lg.T.Fatal(err)
	}
	return c
}

// Key returns a fresh key pair.
func Key(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// ID returns a fresh id with the prefix.
func (lg *Log) ID(prefix string) string { return fmt.Sprintf("%s_%d", prefix, lg.n.Add(1)) }

// Principal enrolls a fresh principal named name and returns its runtime.
func (lg *Log) Principal(name string) *client.Runtime {
	lg.T.Helper()
	pub, priv := Key(lg.T)
	_, err := lg.Admin.Append(context.Background(), &statement.PrincipalDoc{PrincipalID: lg.ID("principal"),
		Op: statement.OpEnroll, Name: name, PublicKey: sign.EncodePublicKey(pub)})
	if err != nil {
		lg.T.Fatalf("enrolling %s: %v", name, err)
	}
	return lg.runtime(priv, name)
}

// Agent confirms a fresh agent named name in workflow wf, by principal p,
// over targets t/* and capability act, and returns its runtime and the
// grant's id.
func (lg *Log) Agent(p *client.Runtime, name, wf string, limits map[string]int64) (*client.Runtime, string) {
	lg.T.Helper()
	pub, priv := Key(lg.T)
	id := lg.ID("confirm")
	_, err := p.Confirm(context.Background(), client.Grant{ID: id, Workflow: wf, Grantee: name, GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: limits, TTL: time.Hour, Revocable: true})
	if err != nil {
		lg.T.Fatalf("confirming %s: %v", name, err)
	}
	return lg.runtime(priv, name), id
}

// Pending returns a pending receipt of agent step step under grant auth.
func Pending(auth, step string, reserve map[string]int64) *statement.ReceiptDoc {
	return &statement.ReceiptDoc{StepID: step, Action: "act", Target: "t/x", AuthorizationRef: auth,
		Result: statement.ResultPending, Reserve: reserve}
}

// Get fetches a path and returns the status, headers and body.
func (lg *Log) Get(path string) (int, http.Header, []byte) {
	lg.T.Helper()
	resp, err := http.Get(lg.URL + path)
	if err != nil {
		lg.T.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		lg.T.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// Close stops the server, its witness loop and the ledger (the test's end
// does it too).
func (lg *Log) Close() { lg.stop.Do(lg.stopFn) }

// Restart closes the log and serves its data folder again with opts, as
// a restarted `custody serve` would: a new ledger and a new server on
// another port. The runtimes the harness made keep signing for the new
// server's client (Admin, Principal and Agent make new ones).
func (lg *Log) Restart(opts server.Options) *Log {
	lg.T.Helper()
	lg.Close()
	l, err := ledger.Open(lg.Dir, ledger.Options{})
	if err != nil {
		lg.T.Fatal(err)
	}
	return serve(lg.T, lg.Dir, l, lg.AdminKey, opts)
}
