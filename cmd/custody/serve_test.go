package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/bench"
	"github.com/custodylog/custody/internal/author"
	"github.com/custodylog/custody/internal/cmd/ledgercmd"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/verify"
)

func init() {
	// Tests choose local or remote mode with flags.
	os.Unsetenv("CUSTODY_LEDGER")
	os.Unsetenv("CUSTODY_LOG_KEY")
}

// served initialises a ledger in a temporary folder with three keys and
// serves it on a loopback port. stop shuts the server down and closes the
// ledger, so that --dir commands can open it.
func served(t *testing.T) (dir, data, url string, stop func()) {
	t.Helper()
	dir = t.TempDir()
	data = filepath.Join(dir, "data")
	must(t, 0, "init", "--dir", data, "--origin", "example.com/custody")
	for _, k := range []string{"alice", "planner", "booker"} {
		must(t, 0, "key", "generate", "--out", filepath.Join(dir, k+".key"))
	}
	l, err := ledger.Open(data, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(server.New(l, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs.Listener = ln
	hs.Start()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			hs.Close()
			l.Close()
		})
	}
	t.Cleanup(stop)
	return dir, data, hs.URL, stop
}

// TestRemoteMode runs the README's flow against a server with --ledger,
// then compares every read with the same read through --dir.
func TestRemoteMode(t *testing.T) {
	dir, data, url, stop := served(t)
	k := func(name string) string { return filepath.Join(dir, name+".key") }
	L := []string{"--ledger", url}
	run := func(code int, args ...string) result {
		t.Helper()
		return must(t, code, append(args, L...)...)
	}
	accepted := regexp.MustCompile(`^accepted: [A-Z]+ \S+ at index \d+ \(checkpoint size \d+\)\n`)

	r := run(0, "principal", "enroll", "--admin-key", filepath.Join(data, "keys", "admin.key"), "--name", "user:alice", "--public-key", k("alice"))
	if !accepted.MatchString(r.stdout) {
		t.Fatalf("enroll: %q", r.stdout)
	}
	run(0, "confirm", "--key", k("alice"), "--id", "confirm_1", "--workflow", "wf_trip", "--grantee", "agent:planner",
		"--grantee-key", k("planner"), "--target", "airline_portal/account_123", "--capability", "purchase",
		"--step", "step_3", "--limit", "budget_usd=800", "--ttl", "15m")
	run(0, "delegate", "--key", k("planner"), "--id", "del_1", "--parent", "confirm_1", "--grantee", "agent:planner/booker",
		"--grantee-key", k("booker"), "--target", "airline_portal/account_123", "--capability", "purchase",
		"--step", "step_3", "--limit", "budget_usd=742", "--ttl", "10m")
	r = run(0, "receipt", "--key", k("booker"), "--id", "rcpt_1", "--auth", "del_1", "--step", "step_3", "--action", "purchase",
		"--target", "airline_portal/account_123", "--reserve", "budget_usd=742", "--json")
	var d author.Outcome
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Verdict != "accepted" || d.Checkpoint == "" || len(d.InclusionProof) == 0 {
		t.Fatalf("receipt --json: %v %q", err, r.stdout)
	}
	run(0, "receipt", "--key", k("booker"), "--result", "success", "--pending-ref", "rcpt_1", "--consumed", "budget_usd=742")
	// A denial prints as locally and exits 3.
	r = run(3, "receipt", "--key", k("booker"), "--id", "rcpt_2", "--auth", "del_1", "--step", "step_3", "--action", "purchase",
		"--target", "airline_portal/account_123", "--reserve", "budget_usd=1")
	if !regexp.MustCompile(`^denied: limit_exceeded: .+ \(DENIAL at index \d+\)\n$`).MatchString(r.stderr) {
		t.Fatalf("denial: %q", r.stderr)
	}
	// --out with --ledger reads seq and origin from the server.
	r = run(0, "stop", "--key", k("alice"), "--workflow", "wf_trip", "--scope", "chain", "--reason", "review", "--id", "stop_1", "--out", "-")
	r = custody(t, r.stdout, append([]string{"append", "-"}, L...)...)
	if r.code != 0 || !regexp.MustCompile(`^accepted \d+\n$`).MatchString(r.stdout) {
		t.Fatalf("append: %+v", r)
	}
	r = custody(t, "{}\n", append([]string{"append", "-"}, L...)...)
	if r.code != 3 || !strings.HasPrefix(r.stdout, "refused: line 1: bad_envelope: ") {
		t.Fatalf("append refused: %+v", r)
	}
	// A wrong verifier key is caught.
	if r := must(t, 1, "get", "--id", "rcpt_1", "--ledger", url, "--log-key", "example.com/custody+00000000+AXt4cBn7mK1VJWzzN8qJxm1FS0fJ5k6nL7dQ0N3H2e8W"); !strings.Contains(r.stderr, "custody:") {
		t.Fatalf("wrong key: %q", r.stderr)
	}

	// Reads: remote, then the same through the data folder.
	reads := [][]string{
		{"get", "--id", "rcpt_1"},
		{"get", "--id", "rcpt_1", "--json"},
		{"get", "--index", "0"},
		{"get", "--index", "999"},
		{"get", "--id", "nope"},
		{"checkpoint"},
		{"checkpoint", "--verifier-key"},
		{"checkpoint", "--json"},
		{"proof", "inclusion", "--index", "3"},
		{"proof", "inclusion", "--index", "3", "--size", "5", "--json"},
		{"proof", "inclusion", "--index", "3", "--json"},
		{"proof", "consistency", "--from", "2", "--json"},
		{"proof", "consistency", "--from", "2", "--to", "4"},
		{"prove", "--id", "rcpt_1", "--out", "-"},
		{"prove", "--id", "rcpt_1", "--workflow", "--out", "-"},
		{"replay", "--workflow", "wf_trip", "--json"},
		{"replay", "--workflow", "wf_trip"},
		{"prove", "--index", "4", "--format", "tlog-proof", "--out", "-"},
	}
	remote := make([]result, len(reads))
	for i, a := range reads {
		remote[i] = custody(t, "", append(a, L...)...)
	}
	b, err := verify.ParseBundle([]byte(remote[13].stdout))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyBundle(b, strings.TrimSpace(remote[6].stdout)); err != nil || !v.Valid {
		t.Fatalf("remote bundle: %v %+v", err, v)
	}
	if testing.Verbose() {
		for i, a := range reads {
			t.Logf("custody %s: exit %d\n%.300s%.300s", strings.Join(a, " "), remote[i].code, remote[i].stdout, remote[i].stderr)
		}
	}
	stop()
	for i, a := range reads {
		local := custody(t, "", append(a, "--dir", data)...)
		if local != remote[i] {
			t.Errorf("custody %s:\n--ledger: %+v\n--dir:    %+v", strings.Join(a, " "), remote[i], local)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestServeCommand runs custody serve in-process, appends through it,
// drives it with bench serve, and stops it as SIGTERM would.
func TestServeCommand(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	must(t, 0, "init", "--dir", data, "--origin", "example.com/custody")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runIO(ctx, []string{"custody", "serve", "--dir", data, "--addr", "127.0.0.1:0", "--log-format", "json"}, strings.NewReader(""), &stdout, &stderr)
	}()
	addr := regexp.MustCompile(`"addr":"(127\.0\.0\.1:\d+)"`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
		}
	}
	if url == "" {
		t.Fatalf("the server did not start: %s", stderr.String())
	}
	resp, err := http.Get(url + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()

	r := must(t, 0, "bench", "serve", "--ledger", url, "--admin-key", filepath.Join(data, "keys", "admin.key"),
		"--clients", "4", "--duration", "300ms", "--json")
	var res bench.ServeResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Appends == 0 || res.Errors != 0 || res.P99ms <= 0 {
		t.Fatalf("bench serve: %v %s", err, r.stdout)
	}
	if r := must(t, 0, "bench", "serve", "--ledger", url, "--admin-key", filepath.Join(data, "keys", "admin.key"),
		"--clients", "2", "--duration", "100ms"); !strings.Contains(r.stdout, "appends/s") || !strings.Contains(r.stdout, "p99") {
		t.Fatalf("bench serve text: %s", r.stdout)
	}

	cancel() // as SIGTERM does
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
	if !strings.Contains(stderr.String(), "ledger closed") {
		t.Fatalf("logs: %s", stderr.String())
	}
	// One access log line per append decision, at info.
	access := regexp.MustCompile(`"level":"INFO","msg":"append","verdict":"accepted","index":\d+,"latency_ms":[0-9.]+`)
	if n := len(access.FindAllString(stderr.String(), -1)); int64(n) < res.Appends {
		t.Errorf("%d access log lines for %d appends", n, res.Appends)
	}
	// The ledger is closed and whole: it opens, and holds what bench wrote.
	r = must(t, 0, "checkpoint", "--dir", data, "--json")
	var cp ledgercmd.CheckpointInfo
	if err := json.Unmarshal([]byte(r.stdout), &cp); err != nil || cp.Size < uint64(res.Appends) {
		t.Fatalf("after serve: %v %s", err, r.stdout)
	}
	if r := must(t, 2, "serve", "--dir", data, "--tls-cert", "x.pem"); !strings.Contains(r.stderr, "--tls-key") {
		t.Fatalf("tls usage: %q", r.stderr)
	}
}
