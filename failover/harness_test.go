package failover

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "custody-failover-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "custody")
	// A log on a database keeps its signed head under the user's
	// configuration folder, named for the URL and origin. The test
	// clusters' ports are reused from run to run with new logs of the same
	// origin, whose keys differ: each run keeps its own folder, so that a
	// signed head left by an earlier run is not taken for this log's.
	if err := os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")); err != nil {
		panic(err)
	}
	out, err := exec.Command("go", "build", "-o", binary, "github.com/custodylog/custody/cmd/custody").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building custody: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const origin = "failover.test/log"

// custody runs the binary and returns its output.
func custody(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "CUSTODY_STORE=", "CUSTODY_DIR=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// initLog creates the log at store with the test's admin key and returns
// its verifier key.
func initLog(t *testing.T, store string, admin *testlog.Actor) string {
	t.Helper()
	return initLogAt(t, store, origin, admin)
}

// initLogAt is initLog with an origin, and more init flags (--log NAME).
func initLogAt(t *testing.T, store, origin string, admin *testlog.Actor, args ...string) string {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	if err := sign.WritePrivateKeyFile(keyFile, admin.Priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if out, code := custody(t, append([]string{"init", "--store", store, "--origin", origin, "--admin-key", keyFile}, args...)...); code != 0 {
		t.Fatalf("custody init: exit %d\n%s", code, out)
	}
	out, code := custody(t, append([]string{"checkpoint", "--store", store, "--verifier-key"}, args...)...)
	if code != 0 {
		t.Fatalf("custody checkpoint --verifier-key: exit %d\n%s", code, out)
	}
	return strings.TrimSpace(out)
}

// server is one `custody serve` process.
type server struct {
	t     *testing.T
	store string
	addr  string
	URL   string
	ttl   time.Duration
	log   string
	args  []string // more flags for custody serve
	// home is the server's own machine-local folder: its configuration
	// folder (XDG_CONFIG_HOME, where a log on a database keeps its signed
	// head), data and cache folders and HOME are under it, as on a
	// machine of its own. Servers share one only when a test sets it.
	home string
	cmd  *exec.Cmd
	done chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newServer(t *testing.T, store string, ttl time.Duration, args ...string) *server {
	s := makeServer(t, store, ttl, args...)
	s.start()
	return s
}

// makeServer is newServer without starting the process.
func makeServer(t *testing.T, store string, ttl time.Duration, args ...string) *server {
	addr := freeAddr(t)
	s := &server{t: t, store: store, addr: addr, URL: "http://" + addr, ttl: ttl,
		log: filepath.Join(t.TempDir(), "serve.log"), args: args, home: t.TempDir()}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("log of the server at %s:\n%s", s.URL, s.logText())
		}
	})
	return s
}

// startTogether starts the servers' processes at once, then waits until
// each is ready.
func startTogether(servers ...*server) {
	for _, s := range servers {
		s.spawn()
	}
	for _, s := range servers {
		s.waitReady()
	}
}

func (s *server) start() {
	s.t.Helper()
	s.spawn()
	s.waitReady()
}

// spawn starts the process.
func (s *server) spawn() {
	s.t.Helper()
	f, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd = exec.Command(binary, append([]string{"serve", "--store", s.store, "--addr", s.addr, "--lease-ttl", s.ttl.String()}, s.args...)...)
	s.cmd.Env = append(os.Environ(), s.env()...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); f.Close(); close(s.done) }()
}

// env is the server's machine-local folders, as environment variables.
func (s *server) env() []string {
	return []string{
		"HOME=" + s.home,
		"XDG_CONFIG_HOME=" + filepath.Join(s.home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(s.home, "data"),
		"XDG_CACHE_HOME=" + filepath.Join(s.home, "cache"),
		"XDG_STATE_HOME=" + filepath.Join(s.home, "state"),
	}
}

// signedHeadFiles lists the signed-head files in the server's
// configuration folder.
func (s *server) signedHeadFiles() []string {
	m, _ := filepath.Glob(filepath.Join(s.home, "config", "custody", "signed-heads", "*"))
	return m
}

// waitReady waits until the process answers /readyz.
func (s *server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, err := s.role(); err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("custody serve on %s exited at start:\n%s", s.addr, s.logText())
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.t.Fatalf("custody serve on %s did not become ready:\n%s", s.addr, s.logText())
}

func (s *server) logText() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 200000 {
		b = b[len(b)-200000:]
	}
	return string(b)
}

// kill SIGKILLs the process (if running) and waits for it.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	<-s.done
}

func (s *server) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	if sig == syscall.SIGSTOP {
		s.waitStopped()
	}
}

// waitStopped returns once every thread of the server is stopped. A
// signal's delivery is asynchronous: on a loaded machine a thread can
// still run for a while after kill returns, and a request sent "to a
// paused server" could then be decided before the pause.
func (s *server) waitStopped() {
	dir := fmt.Sprintf("/proc/%d/task", s.cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped := true
		tasks, err := os.ReadDir(dir)
		if err != nil {
			s.t.Fatalf("reading %s: %v", dir, err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				continue // the thread has gone
			}
			// The state follows the command's closing parenthesis.
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the server (pid %d) did not stop within 10 s of SIGSTOP", s.cmd.Process.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var readyClient = &http.Client{Timeout: time.Second}

// role asks /readyz: "leader" or "follower", and the leader's URL.
func (s *server) role() (string, string, error) {
	return s.roleAt(s.URL)
}

// logRole is role for the log name of a server of several.
func (s *server) logRole(name string) (string, string, error) {
	return s.roleAt(s.URL + "/logs/" + name)
}

func (s *server) roleAt(base string) (string, string, error) {
	resp, err := readyClient.Get(base + "/readyz")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("readyz: %d %s", resp.StatusCode, body)
	}
	var role, leader string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "role "); ok {
			role = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "leader "); ok {
			leader = v
		}
	}
	return role, leader, nil
}

// waitLeader waits until one of servers says it leads and returns it.
func waitLeader(t *testing.T, within time.Duration, servers ...*server) *server {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, s := range servers {
			if r, _, err := s.role(); err == nil && r == "leader" {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no server leads after %s", within)
	return nil
}

// realClock keeps a testlog clock on the wall clock.
func realClock(t *testing.T) *testlog.Clock {
	c := testlog.NewClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				c.Set(time.Now())
			}
		}
	}()
	return c
}

// cast is an admin, a person and agents each holding a grant over its
// own workflow, enrolled and confirmed in the log.
type cast struct {
	au     *testlog.Author
	admin  *testlog.Actor
	alice  *testlog.Actor
	agents []*testlog.Actor
	mu     sync.Mutex // guards au (its maps) across goroutines
}

func newCast(t *testing.T, c *client.Client, admin *testlog.Actor, n int) *cast {
	t.Helper()
	return newCastAt(t, c, origin, admin, n)
}

// newCastAt is newCast on the log of another origin.
func newCastAt(t *testing.T, c *client.Client, origin string, admin *testlog.Actor, n int) *cast {
	t.Helper()
	cs := &cast{au: testlog.NewAuthor(origin, realClock(t)), admin: admin, alice: testlog.NewActor("user:alice")}
	admin.Seq = 1 // GENESIS
	ctx := context.Background()
	mustAppend(t, c, admin, cs.au.Enroll(admin, cs.alice, "p_alice"))
	for i := range n {
		a := testlog.NewActor(fmt.Sprintf("agent:a%d", i))
		g := testlog.NewGrant(a, fmt.Sprintf("wf_%d", i), []string{"t/x"}, []string{"pay"}, []string{"s1"}, nil, 3600)
		mustAppend(t, c, cs.alice, cs.au.Confirm(cs.alice, fmt.Sprintf("c_%d", i), g))
		cs.agents = append(cs.agents, a)
	}
	_ = ctx
	return cs
}

func mustAppend(t *testing.T, c *client.Client, a *testlog.Actor, st statement.Statement) *client.Receipt {
	t.Helper()
	_, raw, err := a.Sign(st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Append(context.Background(), raw)
	if err != nil {
		t.Fatalf("appending %s %s: %v", st.Head().Type, st.ID(), err)
	}
	return r
}

// pending signs agent i's next pending receipt.
func (cs *cast) pending(t *testing.T, i, n int) (string, []byte) {
	cs.mu.Lock()
	id := fmt.Sprintf("r_%d_%d", i, n)
	st := cs.au.Pending(cs.agents[i], id, fmt.Sprintf("c_%d", i), "s1", "pay", "t/x", nil)
	cs.mu.Unlock()
	_, raw, err := cs.agents[i].Sign(st)
	if err != nil {
		t.Error(err)
	}
	return id, raw
}

var _ = ed25519.PublicKeySize
