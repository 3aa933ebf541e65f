package main

import (
	"os"
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
