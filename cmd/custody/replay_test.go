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

	"github.com/custodylog/custody/internal/demo"
	"github.com/custodylog/custody/internal/testenv"
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
	if _, err := demo.RunAt(context.Background(), dir, nil, clock); err != nil {
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
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", dir, "--verifier-key").stdout)
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
	// Installing is the project's scripts' job, never a test's.
	testenv.Need(t, "chromium is not installed (bash scripts/chromium.sh installs Debian's; .ci/run runs it before the tests)")
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

// TestReplayHTMLShowsWhatHappened checks the page without a browser: a
// STOPPED banner at the top naming the STOP, its signer and takeover; each
// receipt's side effects, evidence, consumption and pending-to-outcome
// link; short times with the full one on hover; actor names that break
// only at / or :; a print stylesheet; and free text escaped.
func TestReplayHTMLShowsWhatHappened(t *testing.T) {
	dir := demoLedger(t)
	page := filepath.Join(t.TempDir(), "wf.html")
	must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--html", page)
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	banner := regexp.MustCompile(`<p class="banner stopped" id="stopped">STOPPED: <a href="#entry-10">stop_alice</a> \(chain wf_9f3a\) by <code>user:alice</code> \(owner\), takeover human, in force`)
	if !banner.MatchString(html) {
		t.Errorf("no STOPPED banner naming the STOP, its signer and takeover:\n%s", between(t, html, "<header>", "</header>"))
	}
	if strings.Index(html, `id="stopped"`) > strings.Index(html, `id="attention"`) {
		t.Error("the STOPPED banner is not at the top of the page")
	}
	for _, want := range []string{
		`<span class="label">side effects:</span> booking_ref=XK42-7Q`,
		`<span class="label">evidence:</span> airline_portal/confirmation/XK42-7Q`,
		`<span class="label">consumed:</span> budget_usd 742, max_side_effects 1`,
		`<span class="label">outcome of:</span> <a href="#entry-4">rcpt_1 (#4)</a>`,
		`<span class="label">outcome:</span> <a href="#entry-5">rcpt_1_done (#5)</a>`,
		`<code class="actor">agent:<wbr>planner/<wbr>booker</code>`,
		`@media print{`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if !regexp.MustCompile(`<time datetime="\d{4}-\d\d-\d\dT[0-9:.]+Z" title="\d{4}-[^"]+Z">\d\d:\d\d:\d\d\.\d{3}</time>`).MatchString(html) {
		t.Error("times are not short with the full one on hover")
	}
	// The same facts in text and JSON.
	text := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a").stdout
	for _, want := range []string{"side effects: booking_ref=XK42-7Q", "outcome of: rcpt_1 (#4)", "outcome: rcpt_1_done (#5)", "consumed: budget_usd 742"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	js := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--json").stdout
	for _, want := range []string{`"side_effects": {`, `"evidence_refs": [`, `"pending_ref": "rcpt_1"`, `"outcome_index": 5`, `"consumed": {`} {
		if !strings.Contains(js, want) {
			t.Errorf("the JSON lacks %q", want)
		}
	}
}

// TestReplayBundleEndsAtSubject: a bundle made for a pending receipt ends
// there; replay says its outcome may have been logged later instead of
// calling it lost.
func TestReplayBundleEndsAtSubject(t *testing.T) {
	dir := demoLedger(t)
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", dir, "--verifier-key").stdout)
	bundle := filepath.Join(t.TempDir(), "rcpt_1.bundle.json")
	must(t, 0, "prove", "--dir", dir, "--id", "rcpt_1", "--out", bundle)
	r := must(t, 0, "replay", "--bundle", bundle, "--log-key", vkey)
	text := strings.Join(strings.Fields(r.stdout), " ")
	if strings.Contains(text, "lost") || !strings.Contains(text, "has no outcome in this bundle, which ends at its subject #4") || !strings.Contains(text, "custody prove --workflow") {
		t.Errorf("replay of a bundle ending at its pending receipt:\n%s", r.stdout)
	}
}
