package reliability

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/sign"
)

// Bounds that hold on a slow, heavily loaded machine. They bound waiting,
// not work: a healthy run takes a fraction of each.
const (
	buildTimeout = 5 * time.Minute  // go build of cmd/custody
	cliTimeout   = 2 * time.Minute  // one custody CLI command
	readyTimeout = 2 * time.Minute  // custody serve answering /readyz
	stopTimeout  = 60 * time.Second // custody serve exiting after SIGTERM
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// custodyBinary builds cmd/custody once per test run and returns its path.
func custodyBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		buildDir, buildErr = os.MkdirTemp("", "custody-reliability-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		start := time.Now()
		cmd := exec.CommandContext(ctx, goBin, "build", "-o", filepath.Join(buildDir, "custody"), "github.com/custodylog/custody/cmd/custody")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/custody: %v\n%s", err, out)
			return
		}
		t.Logf("built custody in %v", time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "custody")
}

// childEnv is the test's environment without CUSTODY_* variables, so that
// a developer's settings never point the binary elsewhere.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUSTODY_") {
			env = append(env, kv)
		}
	}
	return env
}

// runCLI runs the custody binary and returns its standard output.
func runCLI(t testing.TB, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("custody %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// logInfo is what `custody init --json` prints.
type logInfo struct {
	Dir          string `json:"dir"`
	Origin       string `json:"origin"`
	VerifierKey  string `json:"verifier_key"`
	AdminName    string `json:"admin_name"`
	AdminKeyFile string `json:"admin_key_file"`
}

// initLedger runs `custody init` into dir.
func initLedger(t testing.TB, bin, dir, origin string) logInfo {
	t.Helper()
	out := runCLI(t, bin, "init", "--dir", dir, "--origin", origin, "--json")
	var li logInfo
	if err := json.Unmarshal(out, &li); err != nil || li.VerifierKey == "" {
		t.Fatalf("custody init --json printed %q (%v)", out, err)
	}
	return li
}

// freeAddr returns a loopback address with a port that was free a moment ago.
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

// serverProc is `custody serve` running as a child process.
type serverProc struct {
	cmd     *exec.Cmd
	addr    string
	url     string
	logPath string
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
}

// startServer starts `custody serve --dir dir --addr addr` and waits until
// it answers /readyz. The process is killed when the test ends, if it is
// still running.
func startServer(t testing.TB, bin, dir, addr string, extra ...string) *serverProc {
	t.Helper()
	sp, err := tryStartServer(t, bin, dir, addr, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

var logSeq struct {
	sync.Mutex
	n int
}

func tryStartServer(t testing.TB, bin, dir, addr string, extra ...string) (*serverProc, error) {
	t.Helper()
	return tryStartServerEnv(t, bin, dir, addr, nil, extra...)
}

// startServerEnv is startServer with env (KEY=VALUE) added to the
// server's environment.
func startServerEnv(t testing.TB, bin, dir, addr string, env []string, extra ...string) *serverProc {
	t.Helper()
	sp, err := tryStartServerEnv(t, bin, dir, addr, env, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func tryStartServerEnv(t testing.TB, bin, dir, addr string, env []string, extra ...string) (*serverProc, error) {
	t.Helper()
	logSeq.Lock()
	logSeq.n++
	n := logSeq.n
	logSeq.Unlock()
	// Not beside the data folder: on a disk a test fills, the server's
	// last words (a panic's trace) would be lost.
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("serve-%d.log", n))
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--dir", dir, "--addr", addr}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(childEnv(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	sp := &serverProc{cmd: cmd, addr: addr, url: "http://" + addr, logPath: logPath, exited: make(chan struct{})}
	go func() {
		sp.waitErr = cmd.Wait()
		lf.Close()
		close(sp.exited)
	}()
	t.Cleanup(func() { sp.kill() })
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-sp.exited:
			return nil, fmt.Errorf("custody serve exited before it was ready (%v):\n%s", sp.waitErr, sp.logTail())
		default:
		}
		resp, err := hc.Get(sp.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return sp, nil
			}
		}
		if time.Now().After(deadline) {
			sp.kill()
			return nil, fmt.Errorf("custody serve not ready after %v:\n%s", readyTimeout, sp.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (sp *serverProc) pid() int { return sp.cmd.Process.Pid }

// alive reports whether the process is still running.
func (sp *serverProc) alive() bool {
	select {
	case <-sp.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL (if the process still runs) and waits for it.
func (sp *serverProc) kill() {
	if sp.alive() {
		sp.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-sp.exited
}

// terminate sends SIGTERM and waits for a graceful exit; it returns the
// process's exit error (nil for status 0).
func (sp *serverProc) terminate() error {
	if !sp.alive() {
		return fmt.Errorf("custody serve had already exited: %v", sp.waitErr)
	}
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sp.exited:
		return sp.waitErr
	case <-time.After(stopTimeout):
		sp.kill()
		return fmt.Errorf("custody serve did not exit within %v of SIGTERM", stopTimeout)
	}
}

// logTail is the end of the server's log, for failure messages.
func (sp *serverProc) logTail() string {
	b, _ := os.ReadFile(sp.logPath)
	// A crash's trace, from its first line, rather than its last frames.
	for _, mark := range []string{"\nfatal error:", "\npanic:", "\nunexpected fault address"} {
		if i := bytes.Index(b, []byte(mark)); i >= 0 {
			b = b[i+1:]
			if len(b) > 6000 {
				b = b[:6000]
			}
			return string(b)
		}
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// rssKB reads VmRSS (or another /proc/<pid>/status field) in kB; 0 if it
// cannot be read.
func procStatusKB(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				n, _ := strconv.ParseInt(fs[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// openFDs counts the open file descriptors of a process (-1 if unknown).
func openFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// healthy asks /healthz and reports an error unless it answers 200 "ok".
func healthy(url string) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(url + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("/healthz answered %d %q", resp.StatusCode, body)
	}
	return nil
}

// newClient returns a verifying client of the server, with its own
// connection pool.
func newClient(t testing.TB, url, vkey string, retries int) *client.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	c, err := client.New(url, vkey, &client.Options{HTTPClient: &http.Client{Timeout: 60 * time.Second, Transport: tr}, Retries: retries})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newKey returns a fresh Ed25519 key pair.
func newKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// enrollPrincipal has the admin enroll a fresh principal through the
// binary's own authoring command, over HTTP, and returns its key.
func enrollPrincipal(t testing.TB, bin string, li logInfo, url, name string) ed25519.PrivateKey {
	t.Helper()
	pub, priv := newKey(t)
	runCLI(t, bin, "principal", "enroll", "--ledger", url, "--log-key", li.VerifierKey,
		"--admin-key", li.AdminKeyFile, "--name", name, "--public-key", sign.EncodePublicKey(pub), "--json")
	return priv
}

// needAttackRoom is the start of an attack test: skipped in -short mode,
// and it needs 8,000 open files (the attacker's connections and the
// server's), which CI, running as root, can always raise to: there a
// lower limit fails the test instead of skipping it.
func needAttackRoom(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("abuse test: skipped in -short mode")
	}
	if lim, err := raiseNoFile(8000); err != nil || lim < 8000 {
		testenv.Need(t, "8,000 open files (have %d: %v)", lim, err)
	}
}

// raiseNoFile makes sure the process may open at least n files, raising
// the soft limit (up to the hard one) if needed. It returns the limit now
// in force and an error when n cannot be reached.
func raiseNoFile(n uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= n {
		return lim.Cur, nil
	}
	if lim.Max < n {
		return lim.Cur, fmt.Errorf("RLIMIT_NOFILE hard limit is %d, below %d", lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return n, nil
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
