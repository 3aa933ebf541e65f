package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/cmd/ledgercmd"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
)

// Many logs in one database, from the command line: init --log creates
// one, logs lists them, and every command chooses one with --log or
// $CUSTODY_LOG (the flag wins).
func TestLogsCommand(t *testing.T) {
	base := storagetest.PostgresURL(t)
	t.Chdir(t.TempDir()) // init --store writes the admin key here
	t.Setenv(location.LogEnv, "")

	r := must(t, 0, "logs", "--store", base)
	if !strings.Contains(r.stderr, "holds no log yet") || r.stdout != "" {
		t.Fatalf("an empty database: %+v", r)
	}
	if r := must(t, 0, "logs", "--store", base, "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("an empty database, --json: %q", r.stdout)
	}

	must(t, 0, "init", "--store", base, "--origin", "example.com/default")
	r = must(t, 0, "init", "--store", base, "--log", "team-a", "--origin", "example.com/a", "--json")
	var info ledgercmd.InitInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.Log != "team-a" || info.AdminKeyFile != "custody-admin-team-a.key" {
		t.Fatalf("init --log team-a: %+v, %v", info, err)
	}
	if _, err := os.Stat("custody-admin-team-a.key"); err != nil {
		t.Fatal(err)
	}

	r = must(t, 1, "init", "--store", base, "--log", "b", "--origin", "example.com/a")
	if !strings.Contains(r.stderr, "already the origin of log team-a") {
		t.Fatalf("a second log with team-a's origin: %s", r.stderr)
	}
	t.Chdir(t.TempDir())
	r = must(t, 1, "init", "--store", base, "--log", "team-a", "--origin", "example.com/a2")
	if !strings.Contains(r.stderr, "already holds a ledger") {
		t.Fatalf("team-a again: %s", r.stderr)
	}
	r = must(t, 2, "init", "--store", base, "--log", "Team_A", "--origin", "example.com/x")
	if !strings.Contains(r.stderr, `--log: log name "Team_A": want a lower-case letter`) {
		t.Fatalf("a bad name: %s", r.stderr)
	}
	r = must(t, 2, "init", "--dir", filepath.Join(t.TempDir(), "d"), "--log", "a", "--origin", "example.com/x")
	if !strings.Contains(r.stderr, "--log a: a folder (--dir) holds one log") {
		t.Fatalf("--log on a data folder: %s", r.stderr)
	}

	r = must(t, 0, "logs", "--store", base)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "default ") || !strings.Contains(lines[1], "example.com/default") ||
		!strings.HasPrefix(lines[2], "team-a ") || !strings.Contains(lines[2], "example.com/a") {
		t.Fatalf("logs:\n%s", r.stdout)
	}
	var logs []pgstore.LogInfo
	if err := json.Unmarshal([]byte(must(t, 0, "logs", "--store", base, "--json").stdout), &logs); err != nil ||
		len(logs) != 2 || logs[1].Name != "team-a" || logs[1].Size != 1 || logs[1].Origin != "example.com/a" {
		t.Fatalf("logs --json: %+v, %v", logs, err)
	}
	if r := must(t, 1, "logs", "--store", base, "--log", "zzz"); !strings.Contains(r.stderr, `no log named "zzz"`) {
		t.Fatalf("logs --log zzz: %s", r.stderr)
	}
	if r := must(t, 5, "logs", "--store", "postgres://custody@127.0.0.1:1/custody"); !strings.Contains(r.stderr, "unavailable") {
		t.Fatalf("logs of a database that cannot be reached: %s", r.stderr)
	}

	origin := func(args ...string) string {
		t.Helper()
		var cp ledgercmd.CheckpointInfo
		r := must(t, 0, append([]string{"checkpoint", "--store", base, "--json"}, args...)...)
		if err := json.Unmarshal([]byte(r.stdout), &cp); err != nil {
			t.Fatal(err)
		}
		return cp.Origin
	}
	if o := origin("--log", "team-a"); o != "example.com/a" {
		t.Fatalf("--log team-a opens %s", o)
	}
	if o := origin(); o != "example.com/default" {
		t.Fatalf("no --log opens %s", o)
	}
	t.Setenv(location.LogEnv, "team-a")
	if o := origin(); o != "example.com/a" {
		t.Fatalf("$CUSTODY_LOG=team-a opens %s", o)
	}
	if o := origin("--log", "default"); o != "example.com/default" {
		t.Fatalf("--log default with $CUSTODY_LOG=team-a opens %s; the flag wins", o)
	}
	t.Setenv(location.LogEnv, "")
	r = must(t, 1, "checkpoint", "--store", base, "--log", "nope")
	if !strings.Contains(r.stderr, `no log named "nope"`) || !strings.Contains(r.stderr, "custody init --store URL --log nope") {
		t.Fatalf("a log that is not there: %s", r.stderr)
	}
}

// The rules serve's --log, --all-logs and --prefer follow, each broken
// once: a usage error naming the flag and the rule.
func TestServeLogsUsage(t *testing.T) {
	t.Setenv(location.LogEnv, "")
	dir := filepath.Join(t.TempDir(), "d")
	store := "postgres://custody@127.0.0.1:1/custody"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", dir, "--log", "a"}, "--log a: a data folder (--dir) holds one log"},
		{[]string{"--dir", dir, "--all-logs"}, "--all-logs: a data folder (--dir) holds one log"},
		{[]string{"--store", store, "--prefer", "a"}, "--prefer is for a server of several logs"},
		{[]string{"--store", store, "--log", "a", "--all-logs"}, "--all-logs and --log a: give one"},
		{[]string{"--store", store, "--log", "a", "--log", "a"}, "--log a is given twice"},
		{[]string{"--store", store, "--log", "a", "--prefer", "b"}, "--prefer b: this server does not serve log b (it serves a)"},
		{[]string{"--store", store, "--log", "A"}, `--log: log name "A": want a lower-case letter`},
		{[]string{"--store", store, "--log", "a", "--witness-policy", "w.policy"}, "--witness-policy serves one log's witnesses"},
	} {
		r := must(t, 2, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %s: %s; want %q", strings.Join(c.args, " "), r.stderr, c.want)
		}
	}
	t.Setenv(location.LogEnv, "a")
	if r := must(t, 2, "serve", "--addr", "127.0.0.1:0", "--dir", dir); !strings.Contains(r.stderr, "$CUSTODY_LOG=a: a data folder (--dir) holds one log") {
		t.Errorf("serve --dir with $CUSTODY_LOG=a: %s", r.stderr)
	}
}
