package main

import (
	"context"
	"github.com/custodylog/custody/internal/testenv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeSections are the README's sections a newcomer runs in order: the
// CLI, the server, and the incident responder's commands.
var readmeSections = []string{"## The CLI in five minutes", "## Run the server", "## For incident responders"}

// readmeShell returns the shell blocks of the README's readmeSections, in
// order.
func readmeShell(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	var b strings.Builder
	for _, h := range readmeSections {
		start := strings.Index(text, "\n"+h+"\n")
		if start < 0 {
			t.Fatalf("README: no section %q", h)
		}
		section := text[start+len(h)+2:]
		// The section ends at the next heading, of any level: a
		// subsection (### Witnesses) needs more than the newcomer has.
		if end := regexp.MustCompile(`\n##+ `).FindStringIndex(section); end != nil {
			section = section[:end[0]]
		}
		blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
		if len(blocks) == 0 {
			t.Fatalf("README: section %q has no shell block", h)
		}
		for _, m := range blocks {
			b.WriteString(m[1])
			b.WriteString("\n")
		}
	}
	return b.String()
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

// TestReadmeRunsInOneShell runs the README's CLI section as a newcomer
// would: every command in order, in one shell, with the exports it shows
// ($CUSTODY_DIR, then $CUSTODY_LEDGER once the server runs), with custody
// on PATH. The only change made to the text is the server's port, to a
// free one. Any command failing fails the test (set -e), so the README
// cannot drift from what works.
func TestReadmeRunsInOneShell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "%s is needed to run the README (apt-get install %s)", tool, tool)
		}
	}
	script := readmeShell(t)
	for _, want := range []string{"export CUSTODY_DIR=", "export CUSTODY_LEDGER=", "custody serve", "custody replay", "custody audit"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the README's CLI section lost %q", want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	script = strings.ReplaceAll(script, "127.0.0.1:8080", addr)

	bin := buildCustody(t)
	work := t.TempDir()
	full := "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nset -x\n" + script
	if err := os.WriteFile(filepath.Join(work, "readme.sh"), []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "readme.sh")
	cmd.Dir = work
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUSTODY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's CLI section failed in one shell: %v\n%s", err, out)
	}
	t.Logf("the README's CLI section, run in one shell:\n%s", out)
	for _, want := range []string{"accepted", `"verdict":"accepted"`, "STOPPED", "CLEAN"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README run printed no %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"trip.html", "wf_trip.bundle.json", "watch.state", "rcpt_1.bundle.json"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("the README run left no %s: %v", f, err)
		}
	}
}
