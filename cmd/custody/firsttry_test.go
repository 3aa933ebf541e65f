package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyGenerateChecksTheName: a name principal enroll or --grantee
// would refuse is refused where it is first typed, and nothing is written.
func TestKeyGenerateChecksTheName(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.key")
	r := must(t, 2, "key", "generate", "--out", bad, "--name", "bad name")
	if !strings.Contains(r.stderr, `--name: non_canonical: identifier "bad name"`) || !strings.Contains(r.stderr, "nothing was written") {
		t.Errorf("key generate --name 'bad name': %q", r.stderr)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a key file was written for a refused name: %v", err)
	}
	must(t, 2, "key", "generate", "--out", bad, "--name", "")
	must(t, 0, "key", "generate", "--out", filepath.Join(dir, "ok.key"), "--name", "agent:planner/booker")
}

// TestReplayHTMLPrintsOneLine: replay --html FILE writes the page and says
// where, without printing the whole text report as well.
func TestReplayHTMLPrintsOneLine(t *testing.T) {
	dir := demoLedger(t)
	page := filepath.Join(t.TempDir(), "wf.html")
	r := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--html", page)
	if got := strings.TrimSpace(r.stdout); strings.Count(got, "\n") > 0 || !strings.HasPrefix(got, "wrote "+page+": ") {
		t.Errorf("replay --html printed more than where it wrote the page:\n%s", r.stdout)
	}
	text := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a").stdout
	if strings.Count(text, "\n") < 10 {
		t.Errorf("replay without --html printed no report:\n%s", text)
	}
	// --json with --html prints the JSON too.
	if j := must(t, 0, "replay", "--dir", dir, "--workflow", "wf_9f3a", "--html", page, "--json").stdout; !strings.HasPrefix(j, "{") {
		t.Errorf("replay --html --json: %q", j[:min(len(j), 80)])
	}
}

// TestCompletionListed: custody --help lists the completion command.
func TestCompletionListed(t *testing.T) {
	r := must(t, 0, "--help")
	if !strings.Contains(r.stdout, "\n   completion ") {
		t.Errorf("custody --help does not list completion:\n%s", r.stdout)
	}
}

// TestGitignoreCoversWhatTheReadmeLeaves: private keys anywhere, and what
// following the README or npm pack from the repository's root leaves, are
// ignored; the test data's keys and bundles are not.
func TestGitignoreCoversWhatTheReadmeLeaves(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is needed")
		}
		t.Skip("no git")
	}
	check := func(path string) bool {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", path)
		cmd.Dir = "../.."
		return cmd.Run() == nil
	}
	for _, p := range []string{"alice.key", "custody-admin.key", "custody-admin-payments.key", "some/dir/agent.key",
		"custody-data/keys/admin.key", "log.vkey", "rcpt_1.bundle.json", "wf_trip.bundle.json", "trip.html",
		"watch.state", "envelopes.jsonl", "confirm.json", "gate.json", "witnesses.policy",
		"sdk/typescript/custodylog-custody-0.1.0.tgz", "sdk/typescript/dist/index.js", "custody", "custody-verify"} {
		if !check(p) {
			t.Errorf(".gitignore does not cover %s", p)
		}
	}
	for _, p := range []string{"testdata/verify/log.vkey", "testdata/verify/receipt.bundle.json", "sdk/typescript/testdata/x/a.key", "README.md", "docs/replay-demo.png"} {
		if check(p) {
			t.Errorf(".gitignore covers %s, which is test data or a source", p)
		}
	}
}
