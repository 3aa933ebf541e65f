package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's sections a newcomer pastes are its fenced blocks tagged
// "dayone" (```sh dayone): TestReadmeRunsInOneShell runs all of them, in
// order, in one shell. A new section joins by tagging its blocks so. The
// rules (readmeRules checks them): a section's first block starts by
// going to a folder of its own under ~ (mkdir -p ~/custody-NAME && cd
// ~/custody-NAME), or to the folder of the section it says it continues
// (cd ~/custody-NAME); every --origin and every served port appears in one
// section only; a server started in the background is waited for (until
// curl ...) and its pid kept in a file, and is stopped by that pid, never
// by a pattern.

// dayoneBlock is one tagged block and the heading it is under.
type dayoneBlock struct {
	heading string
	text    string
}

var (
	dayoneRE  = regexp.MustCompile("(?s)\n```sh dayone\n(.*?)```")
	headingRE = regexp.MustCompile(`(?m)^#{2,3} .*$`)
	portRE    = regexp.MustCompile(`127\.0\.0\.1:(\d{4,5})\b`)
)

// readmeDayone returns the README's dayone blocks, in order.
func readmeDayone(t *testing.T) []dayoneBlock {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	var out []dayoneBlock
	for _, m := range dayoneRE.FindAllStringSubmatchIndex(text, -1) {
		heading := ""
		for _, h := range headingRE.FindAllStringIndex(text[:m[0]], -1) {
			heading = text[h[0]:h[1]]
		}
		out = append(out, dayoneBlock{heading: heading, text: text[m[2]:m[3]]})
	}
	return out
}

// reporter is what readmeRules reports to: a *testing.T, or a recorder.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// readmeRules checks the rules above and returns the served ports.
func readmeRules(t reporter, blocks []dayoneBlock) []string {
	t.Helper()
	first := map[string]bool{}
	origins := map[string]string{}
	addrs := map[string]string{}
	var ports []string
	seenPort := map[string]bool{}
	for _, b := range blocks {
		if !first[b.heading] && !strings.HasPrefix(strings.TrimSpace(b.text), "export CUSTODY_SRC=") {
			first[b.heading] = true
			line := firstCommand(b.text)
			own := regexp.MustCompile(`^mkdir -p ~/(custody-[a-z0-9-]+) && cd ~/(custody-[a-z0-9-]+)$`).FindStringSubmatch(line)
			cont := regexp.MustCompile(`^cd ~/custody-[a-z0-9-]+( |$)`).MatchString(line)
			if (own == nil || own[1] != own[2]) && !cont {
				t.Errorf("README %s: its first command %q neither goes to a folder of its own (mkdir -p ~/custody-NAME && cd ~/custody-NAME) nor to the one of the section it continues (cd ~/custody-NAME)", b.heading, line)
			}
		}
		for _, m := range regexp.MustCompile(`--origin (\S+)`).FindAllStringSubmatch(b.text, -1) {
			if h, ok := origins[m[1]]; ok && h != b.heading {
				t.Errorf("README: origin %s is used in %s and %s: give each section its own", m[1], h, b.heading)
			}
			origins[m[1]] = b.heading
		}
		for _, m := range regexp.MustCompile(`--addr 127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(b.text, -1) {
			if h, ok := addrs[m[1]]; ok && h != b.heading {
				t.Errorf("README: port %s is served in %s and %s: give each section its own", m[1], h, b.heading)
			}
			addrs[m[1]] = b.heading
		}
		if strings.Contains(b.text, "pkill") || strings.Contains(b.text, "pgrep") || strings.Contains(b.text, "killall") {
			t.Errorf("README %s: stop a server by the pid it saved, not by a pattern", b.heading)
		}
		for _, m := range portRE.FindAllStringSubmatch(b.text, -1) {
			if !seenPort[m[1]] {
				seenPort[m[1]] = true
				ports = append(ports, m[1])
			}
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*custody serve .*&.*$`).FindAllString(b.text, -1) {
			if !strings.Contains(m, "echo $! >") {
				t.Errorf("README %s: %q: keep the server's pid in a file (& echo $! > server.pid) to stop it by", b.heading, m)
			}
		}
		if strings.Contains(b.text, "custody serve") && strings.Contains(b.text, "&") && !strings.Contains(b.text, "until curl") {
			t.Errorf("README %s: wait for the server it starts (until curl -sf ...; do sleep 0.2; done)", b.heading)
		}
	}
	return ports
}

// firstCommand is the first line of a block that is not a comment.
func firstCommand(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// buildCustody builds the custody binary into a temporary folder and
// returns that folder, to put first on PATH as the README's Install
// section does.
func buildCustody(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "custody"), ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// TestReadmeRules: the README's dayone sections follow the rules, and the
// checks catch a section that breaks them.
func TestReadmeRules(t *testing.T) {
	blocks := readmeDayone(t)
	if len(blocks) < 8 {
		t.Fatalf("the README has %d dayone blocks", len(blocks))
	}
	readmeRules(t, blocks)
	bad := []dayoneBlock{
		{"## A", "mkdir -p ~/custody-a && cd ~/custody-a\ncustody init --origin example.com/x\n"},
		{"## B", "export CUSTODY_DIR=./data\ncustody init --origin example.com/x\ncustody serve --addr 127.0.0.1:8080 &\nkill $(pgrep -f custody)\n"},
	}
	rec := &recorder{}
	readmeRules(rec, bad)
	errs := rec.errs
	for _, want := range []string{"neither goes to a folder", "origin example.com/x is used", "not by a pattern", "keep the server's pid", "wait for the server"} {
		if !strings.Contains(strings.Join(errs, "\n"), want) {
			t.Errorf("the rules let a section through without %q: %v", want, errs)
		}
	}
}

// TestReadmeRunsInOneShell runs the README's dayone blocks as a newcomer
// pastes them: in order, in one shell, from the repository's root, with a
// fresh home folder, custody on PATH, and nothing else changed but the
// ports (each one the README serves becomes a free one). The PostgreSQL
// section starts its own cluster with scripts/postgres.sh and the
// Witnesses section two omniwitness witnesses with
// scripts/local-witness.sh. Any command failing fails the test (set -e).
func TestReadmeRunsInOneShell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, starts PostgreSQL and witnesses, and runs the README")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed to run the README (apt-get install %s)", tool, tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	if exec.Command("bash", "-c", "command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl").Run() != nil && os.Getuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL is needed for the README's PostgreSQL sections (scripts/postgres.sh install, as root)")
		}
		t.Skip("no PostgreSQL, and not root to install it")
	}
	blocks := readmeDayone(t)
	ports := readmeRules(t, blocks)
	var b strings.Builder
	for _, bl := range blocks {
		fmt.Fprintf(&b, "\n# ---- %s\n%s", bl.heading, bl.text)
	}
	script := b.String()
	for _, want := range []string{"export CUSTODY_DIR=", "export CUSTODY_LEDGER=", "custody serve", "custody replay", "custody audit",
		"postgres.sh start", "local-witness.sh start", "custody append", "--log payments"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the README's dayone sections lost %q", want)
		}
	}
	// Each port the README serves becomes a free one, everywhere it is
	// named (127.0.0.1:8081, and the 8081 of a loop or a pid file).
	for _, p := range ports {
		script = regexp.MustCompile(`\b`+p+`\b`).ReplaceAllString(script, "@PORT"+p+"@")
	}
	for _, p := range ports {
		script = strings.ReplaceAll(script, "@PORT"+p+"@", freePort(t))
	}

	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildCustody(t)
	home := t.TempDir()
	// PostgreSQL runs as another user when this runs as root: it must
	// reach its folder under home.
	for d := home; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	stopServices := func() {
		// Whatever a failed run left running: witnesses, the cluster
		// (before the shell's process group is killed, so that witnessd
		// still stops its witnesses).
		filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Name() == "holder.pid" {
				exec.Command(filepath.Join(repo, "scripts", "local-witness.sh"), "stop", filepath.Dir(p)).Run()
			}
			if err == nil && fi.Name() == "postmaster.pid" {
				exec.Command(filepath.Join(repo, "scripts", "postgres.sh"), "stop", filepath.Dir(p)).Run()
			}
			return nil
		})
	}
	t.Cleanup(stopServices)
	full := "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nset -x\n" + script
	runner := filepath.Join(t.TempDir(), "readme.sh")
	if err := os.WriteFile(runner, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", runner)
	cmd.Dir = repo
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUSTODY_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PGPORT=") {
			env = append(env, kv)
		}
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		if out, err := exec.Command("go", "env", v).Output(); err == nil {
			env = append(env, v+"="+strings.TrimSpace(string(out)))
		}
	}
	if wb := os.Getenv("CUSTODY_WITNESS_BIN"); wb != "" {
		env = append(env, "CUSTODY_WITNESS_BIN="+wb)
	}
	cmd.Env = append(env, "HOME="+home, "PGPORT="+freePort(t),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	// The servers and witnesses the README starts in the background must
	// not outlive a failed or timed-out run: the shell gets a process
	// group of its own, killed whole on timeout, and output is not waited
	// for past the shell's own end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	logFile := filepath.Join(filepath.Dir(runner), "readme.log")
	if keep := os.Getenv("CUSTODY_DAYONE_KEEP"); keep != "" {
		// For a person debugging the README: the script and its output stay there.
		os.WriteFile(keep+".sh", []byte(full), 0o644)
		logFile = keep + ".log"
	}
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	err = cmd.Run()
	lf.Close()
	stopServices()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left behind
	out, _ := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("the README's sections failed in one shell: %v\n%s", err, out)
	}
	t.Logf("the README's sections, run in one shell:\n%s", out)
	for _, want := range []string{"accepted", `"verdict":"accepted"`, "STOPPED", "CLEAN", "custody verify: VALID", "role leader", "meets the quorum"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README run printed no %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"custody-tour/trip.html", "custody-tour/wf_trip.bundle.json", "custody-tour/watch.state",
		"custody-tour/rcpt_1.bundle.json", "custody-witnessed/watch.state", "custody-pg/envelopes.jsonl", "custody-gate/gate.json"} {
		if _, err := os.Stat(filepath.Join(home, f)); err != nil {
			t.Errorf("the README run left no ~/%s: %v", f, err)
		}
	}
}
