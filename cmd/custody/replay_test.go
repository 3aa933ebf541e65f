package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/verify"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/replay")

// goldenDir holds the replay goldens, at the module root.
const goldenDir = "../../testdata/replay"

// demoLedger plays the demo scenario into a fresh folder, at 10:00 UTC
// on the day of the test (then on as the wall clock runs), so that its
// 15-minute grants expire the same day whenever the test runs.
func demoLedger(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	start, t0 := time.Now().UTC().Truncate(24*time.Hour).Add(10*time.Hour), time.Now()
	clock := func() time.Time { return start.Add(time.Since(t0)) }
	if _, err := runDemoAt(context.Background(), dir, nil, clock); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The demo runs on the wall clock with fresh keys: times, hashes and keys
// differ from run to run. normalise replaces them with placeholders of
// the same length where the text aligns on them.
var normalisers = []struct {
	re   *regexp.Regexp
	with func(string) string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), func(string) string { return "<time>" }},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d\d\d\b`), func(string) string { return "hh:mm:ss.sss" }},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\b`), func(string) string { return "hh:mm:ss" }},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), func(string) string { return "<hex64>" }},
	{regexp.MustCompile(`demo\.custody\.example/log\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+…?`), func(string) string { return "<vkey>" }},
	{regexp.MustCompile(`(?m)^\s*-- \d{4}-\d\d-\d\d --\n`), func(string) string { return "" }},
}

func normalise(s string) string {
	for _, n := range normalisers {
		s = n.re.ReplaceAllStringFunc(s, n.with)
	}
	return s
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/custody -run %s -update)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./cmd/custody -run %s -update to accept):\n--- got\n%s", name, t.Name(), got)
	}
}

func TestReplayDemoGolden(t *testing.T) {
	dir := demoLedger(t)
	text := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a")
	golden(t, "demo.txt", normalise(text.stdout))
	for _, l := range strings.Split(text.stdout, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if strings.Contains(text.stdout, "\033[") {
		t.Error("colour written to a non-terminal")
	}
	js := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--json")
	var rep struct {
		Verified bool `json:"verified"`
		Timeline []struct {
			Index  uint64   `json:"index"`
			Status string   `json:"status"`
			Path   []string `json:"authority_path"`
		} `json:"timeline"`
		Attention []struct {
			Kind string `json:"kind"`
			Code string `json:"reason_code"`
		} `json:"attention"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Verified || len(rep.Timeline) != 12 {
		t.Fatalf("verified %v, %d rows", rep.Verified, len(rep.Timeline))
	}
	for _, r := range rep.Timeline {
		if r.Status != "verified" {
			t.Errorf("row %d: %s", r.Index, r.Status)
		}
	}
	// Attempted escalations come first.
	if len(rep.Attention) < 2 || rep.Attention[0].Code != "depth_exceeded" || rep.Attention[1].Code != "widening" {
		t.Errorf("attention order: %+v", rep.Attention)
	}
	golden(t, "demo.json", normalise(js.stdout))

	dot := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--dot")
	for _, want := range []string{"digraph authority {", `"g:confirm_42c1" -> "g:del_booker"`, "DENIED depth_exceeded", `"p:user:alice" -> "g:confirm_42c1"`} {
		if !strings.Contains(dot.stdout, want) {
			t.Errorf("--dot lacks %q:\n%s", want, dot.stdout)
		}
	}
}

// TestReplayBundleFile replays offline from a bundle file and a key, and
// shows a tampered bundle as failed, with exit 4.
func TestReplayBundleFile(t *testing.T) {
	dir := demoLedger(t)
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", dir, "--key").stdout)
	bundle := filepath.Join(t.TempDir(), "wf.bundle.json")
	must(t, 0, "prove", "--dir", dir, "--id", "stop_alice", "--workflow", "--out", bundle)
	r := must(t, 0, "replay", "--bundle", bundle, "--log-key", vkey, "--workflow", "wf_9f3a")
	if !strings.Contains(r.stdout, "verified against checkpoint size 12") {
		t.Errorf("offline replay:\n%s", r.stdout)
	}
	must(t, 1, "replay", "--bundle", bundle, "--log-key", vkey, "--workflow", "wf_other")
	must(t, 2, "replay", "--bundle", bundle, "--workflow", "wf_9f3a")

	// Corrupt the first hash of the inclusion proof of entry 5 (the outcome).
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	b, err := verify.ParseBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Entries {
		if b.Entries[i].Index == 5 {
			b.Entries[i].Proof[0] = flipBase64(b.Entries[i].Proof[0])
		}
	}
	bad, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	r = must(t, 4, "replay", "--bundle", bundle, "--log-key", vkey, "--workflow", "wf_9f3a")
	for _, want := range []string{"VERIFICATION FAILED at entry 5: inclusion proofs", "!! FAILED verification: inclusion proofs", "?? unverified"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tampered replay lacks %q:\n%s", want, r.stdout)
		}
	}
}

// flipBase64 changes the first character of a base64 string to another
// valid one.
func flipBase64(s string) string {
	c := byte('A')
	if s[0] == 'A' {
		c = 'B'
	}
	return string(c) + s[1:]
}

// chromium finds Debian's chromium, installing it when missing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CUSTODY_NO_INSTALL") == "" {
		t.Log("chromium is missing: apt-get update && apt-get install -y chromium")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); err != nil {
			t.Skipf("chromium is not installed and apt-get update failed: %v\n%s", err, tail(out))
		}
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("chromium is not installed and could not be: %v\n%s", err, tail(out))
		}
		if p, err := exec.LookPath("chromium"); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed and could not be installed")
	return ""
}

func tail(b []byte) []byte {
	if len(b) > 2000 {
		return b[len(b)-2000:]
	}
	return b
}

// TestReplayHTMLRendersInChromium writes the demo's page and has headless
// Chromium load it: every timeline row must be in the DOM. The screenshot
// is left in $CUSTODY_SCREENSHOT when set, for a person to look at.
func TestReplayHTMLRendersInChromium(t *testing.T) {
	dir := demoLedger(t)
	page := filepath.Join(t.TempDir(), "wf.html")
	must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--html", page)
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"<script", "http://", "https://", "src=", "@import"} {
		if bytes.Contains(html, []byte(banned)) && !(banned == "http://" && bytes.Count(html, []byte(banned)) == bytes.Count(html, []byte("http://www.w3.org/2000/svg"))) {
			t.Errorf("the page contains %q: it must be self-contained", banned)
		}
	}
	bin := chromium(t)
	profile := t.TempDir()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + profile}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(flags, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	dom := string(out)
	for i := 0; i < 12; i++ {
		if !strings.Contains(dom, `id="entry-`+itoa(uint64(i))+`"`) {
			t.Errorf("the DOM lacks timeline row %d", i)
		}
	}
	for _, want := range []string{`id="tree"`, `id="grant-del_booker"`, "depth_exceeded", "Needs attention (4)"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM lacks %q", want)
		}
	}
	shot := os.Getenv("CUSTODY_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "replay.png")
	}
	shotCtx, cancel2 := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel2()
	if out, err := exec.CommandContext(shotCtx, bin, append(flags, "--screenshot="+shot, "--window-size=1280,2400", "--hide-scrollbars", "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, tail(out))
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (too small to show anything?)", shot, err)
	}
}
