package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/exitcode"
)

// walkFlags calls f for every flag of every command of the tree, with the
// command's full path.
func walkFlags(c *cli.Command, path string, f func(path string, fl cli.Flag)) {
	for _, fl := range c.Flags {
		f(path, fl)
	}
	for _, sub := range c.Commands {
		walkFlags(sub, path+" "+sub.Name, f)
	}
}

func flagUsage(fl cli.Flag) string {
	if d, ok := fl.(cli.DocGenerationFlag); ok {
		return d.GetUsage()
	}
	return ""
}

func flagHidden(fl cli.Flag) bool {
	if v, ok := fl.(cli.VisibleFlag); ok {
		return !v.IsVisible()
	}
	return false
}

// TestFlagMeanings holds every command to one meaning per flag name:
// --log-key the log's public verifier key (string or file), --key a
// private key file, --target a target identifier, --grant a grant id.
// The old spellings (clikit.RenamedFlags) are hidden.
func TestFlagMeanings(t *testing.T) {
	renamed := map[string]bool{}
	for _, r := range clikit.RenamedFlags {
		renamed[r.Command+" --"+r.Old] = true
	}
	seen := map[string]int{}
	walkFlags(newApp(nil, nil, nil), "custody", func(path string, fl cli.Flag) {
		name := fl.Names()[0]
		u := flagUsage(fl)
		if renamed[path+" --"+name] {
			if !flagHidden(fl) {
				t.Errorf("%s --%s: an old spelling kept for one release must be hidden", path, name)
			}
			return
		}
		seen[name]++
		_, isString := fl.(*cli.StringFlag)
		switch name {
		case "log-key":
			if !isString || !strings.Contains(u, "verifier key") || strings.Contains(u, "private") {
				t.Errorf("%s --log-key is %T %q: want the log's verifier key (a key string or a file)", path, fl, u)
			}
		case "key":
			if !isString || !strings.Contains(u, "private key") {
				t.Errorf("%s --key is %T %q: want a private key file", path, fl, u)
			}
		case "target":
			if strings.Contains(u, "grant") || strings.Contains(u, " id ") {
				t.Errorf("%s --target is %q: want a target identifier (a grant id is --grant)", path, u)
			}
		case "grant":
			if !strings.Contains(u, "CONFIRM or DELEGATE") {
				t.Errorf("%s --grant is %q: want the id of a CONFIRM or DELEGATE", path, u)
			}
		}
		if strings.HasSuffix(name, "-key") && name != "log-key" && isString && strings.Contains(u, "verifier key") {
			t.Errorf("%s --%s takes a verifier key: that is --log-key", path, name)
		}
	})
	if seen["log-key"] < 15 || seen["key"] < 5 {
		t.Fatalf("walked too few flags: %v", seen)
	}
}

// TestRenamedFlagsStillWork: each old spelling does what the new one does,
// with a deprecation warning on standard error; giving both is a usage
// error.
func TestRenamedFlagsStillWork(t *testing.T) {
	dir := t.TempDir()
	logKey := filepath.Join(dir, "log.key")
	must(t, 0, "key", "generate", "--out", logKey)
	r := must(t, 0, "init", "--dir", filepath.Join(dir, "a"), "--origin", "a.example/log", "--log-key", logKey)
	if !strings.Contains(r.stderr, "init --log-key is deprecated") || !strings.Contains(r.stderr, "--log-private-key") {
		t.Errorf("init --log-key: no deprecation warning: %q", r.stderr)
	}
	must(t, 0, "init", "--dir", filepath.Join(dir, "b"), "--origin", "b.example/log", "--log-private-key", logKey)
	va := must(t, 0, "checkpoint", "--dir", filepath.Join(dir, "a"), "--verifier-key").stdout
	vb := must(t, 0, "checkpoint", "--dir", filepath.Join(dir, "b"), "--key")
	if !strings.Contains(vb.stderr, "checkpoint --key is deprecated") {
		t.Errorf("checkpoint --key: no deprecation warning: %q", vb.stderr)
	}
	// The same private log key signed both logs' checkpoints.
	hashKey := func(v string) string { return v[strings.LastIndex(v, "+"):] }
	if hashKey(va) != hashKey(vb.stdout) || !strings.HasPrefix(va, "a.example/log+") {
		t.Errorf("--log-key and --log-private-key gave different keys: %q %q", va, vb.stdout)
	}
	must(t, 2, "init", "--dir", filepath.Join(dir, "c"), "--origin", "c.example/log", "--log-key", logKey, "--log-private-key", logKey)

	e := newLedgerEnv(t)
	alice, planner := e.key("user:alice"), e.key("agent:planner")
	e.run(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:alice", "--public-key", alice)
	for _, id := range []string{"c1", "c2"} {
		e.run(0, "confirm", "--key", alice, "--id", id, "--workflow", "wf_"+id, "--grantee", "agent:planner",
			"--grantee-key", planner, "--target", "portal/x", "--capability", "book", "--ttl", "15m", "--revocable")
	}
	e.decision(0, "revoke", "--key", alice, "--grant", "c1", "--reason", "done")
	r = e.run(0, "revoke", "--key", alice, "--target", "c2", "--reason", "done")
	if !strings.Contains(r.stderr, "revoke --target is deprecated") {
		t.Errorf("revoke --target: no deprecation warning: %q", r.stderr)
	}
	if got := mustEntry(t, e, itoa(mustCheckpointSize(t, e)-1)); !strings.Contains(string(got.Statement), `"target_ref": "c2"`) {
		t.Errorf("revoke --target c2 logged %s", got.Statement)
	}
}

// TestLogKeyFileEverywhere: --log-key takes a file in every command that
// talks to a server, as in gate (confirm --log-key FILE failed before);
// the wrong log's key is verification failed (4), and an unreachable
// server is unavailable (5), with --json's kind set.
func TestLogKeyFileEverywhere(t *testing.T) {
	dir, data, url, _ := served(t)
	other := filepath.Join(dir, "other")
	must(t, 0, "init", "--dir", other, "--origin", "other.example/log")
	own := filepath.Join(dir, "log.vkey")
	wrong := filepath.Join(dir, "other.vkey")
	for f, d := range map[string]string{own: data, wrong: other} {
		if err := os.WriteFile(f, []byte(must(t, 0, "checkpoint", "--dir", d, "--verifier-key").stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	alice, planner := filepath.Join(dir, "alice.key"), filepath.Join(dir, "planner.key")
	must(t, 0, "principal", "enroll", "--ledger", url, "--log-key", own, "--admin-key", filepath.Join(data, "keys", "admin.key"),
		"--name", "user:alice", "--public-key", alice)
	must(t, 0, "confirm", "--ledger", url, "--log-key", own, "--key", alice, "--id", "c1", "--workflow", "wf",
		"--grantee", "agent:planner", "--grantee-key", planner, "--target", "portal/x", "--capability", "book", "--ttl", "15m")
	must(t, 0, "checkpoint", "--ledger", url, "--log-key", own)
	must(t, 0, "get", "--ledger", url, "--log-key", own, "--index", "0")

	r := must(t, 4, "checkpoint", "--ledger", url, "--log-key", wrong)
	if !strings.Contains(r.stderr, "does not verify") {
		t.Errorf("checkpoint with another log's key: %q", r.stderr)
	}
	r = must(t, 4, "checkpoint", "--ledger", url, "--log-key", wrong, "--json")
	var je jsonError
	if err := json.Unmarshal([]byte(r.stdout), &je); err != nil || je.Kind != "verification" || je.ExitCode != 4 {
		t.Errorf("--json: %q (%v)", r.stdout, err)
	}
	must(t, 1, "checkpoint", "--ledger", url, "--log-key", filepath.Join(dir, "no-such.vkey"))

	r = must(t, 5, "checkpoint", "--ledger", "http://127.0.0.1:1", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &je); err != nil || je.Kind != "unavailable" || je.ExitCode != 5 {
		t.Errorf("unreachable server, --json: %q (%v)", r.stdout, err)
	}
}

// exitCodeList finds "Exit codes: N word, N word..." (or "Exit status:")
// in text and returns each code with the word after it.
func exitCodeList(text string) map[int]string {
	out := map[int]string{}
	flat := strings.Join(strings.Fields(text), " ")
	for _, m := range regexp.MustCompile(`(?i)exit (?:codes|status)(?: are)?:? ((?:\d [a-z]+[^.;]*?(?:, |\.|;|$))+)`).FindAllStringSubmatch(flat, -1) {
		for _, p := range regexp.MustCompile(`(?:^|, )(\d) ([a-z]+)`).FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(p[1])
			out[n] = p[2]
		}
	}
	return out
}

// TestOneExitCodeTable fails when a --help, custody-verify's help or the
// README lists exit codes other than package exitcode's table, or when the
// root --help and the README do not list all of them.
func TestOneExitCodeTable(t *testing.T) {
	check := func(where, text string, all bool) {
		t.Helper()
		got := exitCodeList(text)
		for n, word := range got {
			if n >= len(exitcode.Table) || word != exitcode.Kind(n) {
				t.Errorf("%s lists exit code %d as %q; the table says %d is %q", where, n, word, n, exitcode.Kind(n))
			}
		}
		if all && len(got) != len(exitcode.Table) {
			t.Errorf("%s lists exit codes %v; want all of %v", where, got, exitcode.Table)
		}
	}
	app := newApp(nil, nil, nil)
	found := 0
	for _, p := range append(commandPaths(app, nil), nil) {
		r := custody(t, "", append(p, "--help")...)
		if len(exitCodeList(r.stdout)) > 0 {
			found++
		}
		check("custody "+strings.Join(p, " ")+" --help", r.stdout, p == nil)
	}
	if found < 4 {
		t.Errorf("only %d --help texts list exit codes", found)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The README's table: | N | meaning |.
	rows := regexp.MustCompile(`(?m)^\| (\d) \| ([a-z]+)`).FindAllStringSubmatch(string(readme), -1)
	table := map[int]string{}
	for _, m := range rows {
		n, _ := strconv.Atoi(m[1])
		table[n] = m[2]
	}
	if len(table) != len(exitcode.Table) {
		t.Errorf("the README's exit-code table has %v; want every code of %v", table, exitcode.Table)
	}
	for n, word := range table {
		if word != exitcode.Kind(n) {
			t.Errorf("README: exit code %d is %q; the table says %q", n, word, exitcode.Kind(n))
		}
	}
	check("README.md", string(readme), false)
}

// TestExitCodeList tests the parser the table test relies on, so that the
// table test cannot pass by finding nothing.
func TestExitCodeList(t *testing.T) {
	got := exitCodeList("blah.\n\nExit codes: 0 ok (clean), 4 verification\nfailed (findings), 1 error.\n")
	if len(got) != 3 || got[0] != "ok" || got[4] != "verification" || got[1] != "error" {
		t.Errorf("got %v", got)
	}
	if got := exitCodeList("Exit codes: 0 clean, 4 findings."); got[0] != "clean" || got[4] != "findings" {
		t.Errorf("got %v", got)
	}
}
