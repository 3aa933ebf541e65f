package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/clikit"
)

// TestDidYouMean: a mistyped command exits 2 and names the command meant;
// a word like no command names none.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for no suggestion
	}{
		{[]string{"reciept"}, `did you mean "receipt"?`},
		{[]string{"replya"}, `did you mean "replay"?`},
		{[]string{"chekpoint"}, `did you mean "checkpoint"?`},
		{[]string{"serv"}, `did you mean "serve"?`},
		{[]string{"key", "genrate"}, `did you mean "generate"?`},
		{[]string{"principal", "enrol"}, `did you mean "enroll"?`},
		{[]string{"frobnicate"}, ""},
	} {
		r := custody(t, "", tc.args...)
		if r.code != clikit.ExitUsage {
			t.Errorf("%v: exit %d, want 2", tc.args, r.code)
		}
		if tc.want == "" && strings.Contains(r.stderr, "did you mean") || tc.want != "" && !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %q; want %q", tc.args, r.stderr, tc.want)
		}
	}
}

// TestJSONErrors: with --json, an error a command did not print itself is
// also one JSON object on standard output, with the exit code.
func TestJSONErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		kind string
	}{
		{[]string{"get", "--dir", dir + "/none", "--index", "0", "--json"}, 1, "error"},
		{[]string{"get", "--dir", dir, "--json"}, 2, "usage"},
		{[]string{"get", "--json", "--dir", dir, "--ledger", "http://127.0.0.1:1", "--index", "0"}, 2, "usage"},
		// A file that cannot be opened is an error, not "unavailable"
		// (its errno is no network's), and a server that cannot be
		// reached is unavailable.
		{[]string{"append", "--json", "--ledger", "http://127.0.0.1:1", dir + "/absent.jsonl"}, 1, "error"},
		{[]string{"get", "--json", "--ledger", "http://127.0.0.1:1", "--index", "0"}, 5, "unavailable"},
	} {
		r := custody(t, "", tc.args...)
		var e jsonError
		if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
			t.Errorf("%v: stdout is not a JSON object: %v\n%s", tc.args, err, r.stdout)
			continue
		}
		if r.code != tc.code || e.ExitCode != tc.code || e.Kind != tc.kind || e.Error == "" {
			t.Errorf("%v: exit %d, %+v; want exit %d kind %s", tc.args, r.code, e, tc.code, tc.kind)
		}
	}
	// Without --json, standard output stays empty.
	if r := custody(t, "", "get", "--dir", dir+"/none", "--index", "0"); r.stdout != "" {
		t.Errorf("error without --json printed %q on stdout", r.stdout)
	}
}

// TestChecksBeforeSigning: a bad enum value is a usage error, and a ttl
// above the log's max_ttl_seconds is refused before signing, so that no
// DENIAL is logged for a typo.
func TestChecksBeforeSigning(t *testing.T) {
	e := newLedgerEnv(t)
	alice := e.key("user:alice")
	e.run(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:alice", "--public-key", alice)
	size := mustCheckpointSize(t, e)
	grant := []string{"confirm", "--key", alice, "--grantee", "agent:planner", "--grantee-key", e.key("agent:planner"),
		"--workflow", "wf_1", "--target", "t/1", "--capability", "buy"}
	r := e.run(2, append(grant, "--ttl", "15m", "--risk", "extreme")...)
	if !strings.Contains(r.stderr, `--risk "extreme": want low, medium, high`) {
		t.Errorf("--risk extreme: %s", r.stderr)
	}
	r = e.run(2, append(grant, "--ttl", "800h")...)
	if !strings.Contains(r.stderr, "max_ttl_seconds 2592000") || !strings.Contains(r.stderr, "nothing was signed") {
		t.Errorf("--ttl 800h: %s", r.stderr)
	}
	e.run(2, "stop", "--key", alice, "--workflow", "wf_1", "--scope", "everything", "--reason", "x")
	e.run(2, "stop", "--key", alice, "--workflow", "wf_1", "--scope", "chain", "--takeover", "robot", "--reason", "x")
	if n := mustCheckpointSize(t, e); n != size {
		t.Errorf("the log grew from %d to %d entries: a typo was logged", size, n)
	}
	e.run(0, append(grant, "--ttl", "720h")...)
	if r := custody(t, "", "confirm", "--help"); !strings.Contains(r.stdout, "(default: true;") {
		t.Errorf("confirm --help does not show --revocable's default:\n%s", r.stdout)
	}
}

// TestBenchSubcommandHelp: custody bench serve/log --help list their own
// flags, not bench's.
func TestBenchSubcommandHelp(t *testing.T) {
	for _, sub := range []string{"serve", "log"} {
		r := must(t, 0, "bench", sub, "--help")
		_, options, _ := strings.Cut(r.stdout, "OPTIONS:")
		for _, bad := range []string{"--size", "--peer-dir", "GLOBAL OPTIONS"} {
			if strings.Contains(options, bad) {
				t.Errorf("bench %s --help shows %s:\n%s", sub, bad, r.stdout)
			}
		}
	}
	if r := must(t, 0, "bench", "--help"); !strings.Contains(r.stdout, "--size") {
		t.Errorf("bench --help lost its own flags:\n%s", r.stdout)
	}
}

// TestServeHelpListsEveryEndpoint: every route the server registers is in
// custody serve --help.
func TestServeHelpListsEveryEndpoint(t *testing.T) {
	src, err := os.ReadFile("../../server/server.go")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile(`m\.Handle(?:Func)?\("(?:GET|POST) (/[^"]*)"`).FindAllStringSubmatch(string(src), -1)
	if len(routes) < 15 {
		t.Fatalf("found %d routes in server.go", len(routes))
	}
	help := must(t, 0, "serve", "--help").stdout
	for _, r := range routes {
		if !strings.Contains(help, r[1]) {
			t.Errorf("serve --help does not list %s", r[1])
		}
	}
}

// TestCompletion: custody completion bash|zsh|fish print their scripts,
// and the completions the scripts ask custody for name its commands and
// a command's flags.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o bashdefault -o default -F __custody_bash_autocomplete custody",
		"zsh":  "compdef _custody custody",
		"fish": "complete -c custody",
	} {
		if r := must(t, 0, "completion", shell); !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}
	// (The root's own list reads os.Args, so it is checked on a subcommand.)
	if r := must(t, 0, "key", "--generate-shell-completion"); !strings.Contains(r.stdout, "generate:") || !strings.Contains(r.stdout, "rotate-log:") {
		t.Errorf("command completions of key:\n%s", r.stdout)
	}
	if r := must(t, 0, "replay", "--wor", "--generate-shell-completion"); !strings.HasPrefix(r.stdout, "--workflow:") {
		t.Errorf("flag completions of replay --wor:\n%s", r.stdout)
	}
}
