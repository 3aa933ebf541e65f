package failover

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/storage/storagetest"
)

// The probes of the SDKs' clients: each is given the servers' URLs (the
// faulty leader first), the log key and one signed envelope, prints
// "ready", waits for a line on stdin, appends the envelope and prints
// "ok INDEX" once it is verified as accepted (or "err MESSAGE").
const (
	tsProbe = `import { Client } from %q;
import readline from "node:readline";
const [urls, logKey, env] = process.argv.slice(2);
const c = new Client(urls, { logKey });
process.stdout.write("ready\n");
const rl = readline.createInterface({ input: process.stdin });
for await (const _ of rl) break;
try {
  const r = await c.append(env);
  process.stdout.write(r.accepted ? "ok " + r.index + "\n" : "err not accepted: " + r.verdict + "\n");
} catch (e) {
  process.stdout.write("err " + String(e && e.message).replace(/\n/g, " ") + "\n");
}
process.exit(0);
`
	pyProbe = `import sys
from custody import Client
urls, log_key, env = sys.argv[1:4]
c = Client(urls, log_key)
print("ready", flush=True)
sys.stdin.readline()
try:
    r = c.append(env.encode())
    print(("ok %d" % r.index) if r.accepted else ("err not accepted: " + r.verdict), flush=True)
except Exception as e:
    print("err " + str(e).replace("\n", " "), flush=True)
`
)

// sdkProbe is one client waiting to append.
type sdkProbe struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startProbe runs a probe and waits for its "ready".
func startProbe(t *testing.T, name string, cmd *exec.Cmd) *sdkProbe {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the %s probe: %v", name, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &sdkProbe{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	select {
	case l, ok := <-p.lines:
		if !ok || l != "ready" {
			t.Fatalf("the %s probe: %q\n%s", name, l, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s probe did not start in 30 s\n%s", name, stderr.String())
	}
	return p
}

// sdkTools finds node with the built TypeScript SDK and a Python with
// the Python SDK's dependencies; need says whether their absence fails
// the test (CUSTODY_SDK_FAILOVER set) rather than skips it.
func sdkTools(t *testing.T) (node, tsDist, python, pySrc string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	tsDist = filepath.Join(root, "sdk", "typescript", "dist", "index.js")
	pySrc = filepath.Join(root, "sdk", "python", "src")
	python = filepath.Join(root, ".cache", "python", "venv", "bin", "python")
	node, _ = exec.LookPath("node")
	var missing []string
	if node == "" {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(tsDist); err != nil {
		missing = append(missing, "the built TypeScript SDK (scripts/ts.sh, or npm ci && npm run build in sdk/typescript)")
	}
	if err := exec.Command(python, "-c", "import httpx").Run(); err != nil {
		missing = append(missing, "the Python venv (scripts/python.sh)")
	}
	if len(missing) > 0 {
		msg := "the SDK failover test needs " + strings.Join(missing, ", ")
		if os.Getenv("CUSTODY_SDK_FAILOVER") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (CUSTODY_SDK_FAILOVER=1 makes it fail instead)")
	}
	return node, tsDist, python, pySrc
}

// TestClientsMoveOn: the Go, TypeScript and Python clients, each given
// the leader's URL first, each append once after the leader is frozen
// between its batch and COMMIT: cut off from PostgreSQL with its sockets
// open (it then steps down and answers 503 not_leader), or paused
// (SIGSTOP: it answers nothing). Each client's append must be accepted,
// by the server that took over, within a few lease times of the fault,
// not after its own request timeout (30 s).
//
// It runs when node, the built TypeScript SDK and the Python venv are
// there (scripts/ts.sh, scripts/python.sh), and skips otherwise;
// CUSTODY_SDK_FAILOVER=1 makes their absence a failure.
func TestClientsMoveOn(t *testing.T) {
	for _, kind := range []string{"partitioned", "paused"} {
		t.Run(kind, func(t *testing.T) { clientsMoveOn(t, kind) })
	}
}

func clientsMoveOn(t *testing.T, kind string) {
	node, tsDist, python, pySrc := sdkTools(t)
	store := storagetest.PostgresURL(t)
	ttl := time.Duration(envInt("CUSTODY_FAILOVER_TTL_MS", 1000)) * time.Millisecond
	within := 4 * ttl
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	px, viaProxy := newPGProxy(t, store)
	s1 := newServer(t, viaProxy, ttl)
	if r, _, _ := s1.role(); r != "leader" {
		t.Fatalf("the first server is %s, want the leader", r)
	}
	s2 := newServer(t, store, ttl)
	urls := s1.URL + "," + s2.URL
	setup, err := client.New(s1.URL, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, setup, admin, 4)

	dir := t.TempDir()
	tsFile := filepath.Join(dir, "probe.mjs")
	if err := os.WriteFile(tsFile, []byte(fmt.Sprintf(tsProbe, "file://"+tsDist)), 0o644); err != nil {
		t.Fatal(err)
	}
	pyFile := filepath.Join(dir, "probe.py")
	if err := os.WriteFile(pyFile, []byte(pyProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	type sent struct {
		id  string
		env []byte
	}
	var envs []sent
	for i := range 3 {
		id, env := cs.pending(t, i, 0)
		envs = append(envs, sent{id, env})
	}
	ts := startProbe(t, "TypeScript", exec.Command(node, tsFile, urls, vkey, string(envs[1].env)))
	py := exec.Command(python, pyFile, urls, vkey, string(envs[2].env))
	py.Env = append(os.Environ(), "PYTHONPATH="+pySrc)
	pyp := startProbe(t, "Python", py)
	gc, err := client.New(urls, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The leader is caught between its batch and COMMIT.
	held := px.arm()
	_, envHeld := cs.pending(t, 3, 0)
	postRaw(s1.URL, envHeld, 20*ttl)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the leader sent no COMMIT in 20 s")
	}
	if kind == "paused" {
		s1.signal(syscall.SIGSTOP)
		defer s1.signal(syscall.SIGCONT)
	} else {
		px.freeze()
	}
	defer px.thaw()
	fault := time.Now()

	type result struct {
		name string
		line string
		at   time.Time
	}
	results := make(chan result, 3)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := gc.Append(ctx, envs[0].env)
		switch {
		case err != nil:
			results <- result{"Go", "err " + err.Error(), time.Now()}
		case !r.Accepted():
			results <- result{"Go", "err not accepted", time.Now()}
		default:
			results <- result{"Go", fmt.Sprintf("ok %d", r.Index), time.Now()}
		}
	}()
	for _, p := range []*sdkProbe{ts, pyp} {
		fmt.Fprintln(p.stdin, "go")
		go func() {
			select {
			case l, ok := <-p.lines:
				if !ok {
					l = "err the probe exited"
				}
				results <- result{p.name, l, time.Now()}
			case <-time.After(60 * time.Second):
				results <- result{p.name, "err no answer in 60 s", time.Now()}
			}
		}()
	}
	for range 3 {
		r := <-results
		d := r.at.Sub(fault)
		switch {
		case !strings.HasPrefix(r.line, "ok "):
			t.Errorf("the %s client, the leader %s: %s (%s after the fault)", r.name, kind, r.line, d.Round(time.Millisecond))
		case d > within:
			t.Errorf("the %s client's append was accepted %s after the leader was %s, want within %s", r.name, d.Round(time.Millisecond), kind, within)
		default:
			t.Logf("the %s client's append was accepted %s after the leader was %s (lease %s)", r.name, d.Round(time.Millisecond), kind, ttl)
		}
	}
}
