package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
)

// wantLocations is every command that reads or writes a log, with the
// kinds of location it takes, in its flags' order. A new command that
// opens a log joins this list; TestEveryCommandLocation fails until it
// does.
var wantLocations = map[string][]location.Kind{
	"init":              {location.Dir, location.Store},
	"append":            {location.Dir, location.Store, location.Ledger},
	"get":               {location.Dir, location.Store, location.Ledger},
	"checkpoint":        {location.Dir, location.Store, location.Ledger},
	"proof inclusion":   {location.Dir, location.Store, location.Ledger},
	"proof consistency": {location.Dir, location.Store, location.Ledger},
	"export":            {location.Dir, location.Store},
	"prove":             {location.Dir, location.Store, location.Ledger},
	"principal enroll":  {location.Dir, location.Store, location.Ledger},
	"principal add-key": {location.Dir, location.Store, location.Ledger},
	"principal retire":  {location.Dir, location.Store, location.Ledger},
	"confirm":           {location.Dir, location.Store, location.Ledger},
	"delegate":          {location.Dir, location.Store, location.Ledger},
	"receipt":           {location.Dir, location.Store, location.Ledger},
	"stop":              {location.Dir, location.Store, location.Ledger},
	"resume":            {location.Dir, location.Store, location.Ledger},
	"revoke":            {location.Dir, location.Store, location.Ledger},
	"approve":           {location.Dir, location.Store, location.Ledger},
	"approvals":         {location.Dir, location.Store, location.Ledger},
	"demo":              {location.Dir},
	"audit":             {location.Dir, location.Store, location.Tiles, location.Ledger},
	"replay":            {location.Dir, location.Store, location.Ledger, location.Bundle},
	"serve":             {location.Dir, location.Store},
	"key rotate-log":    {location.Dir, location.Store},
	"key rotate-denial": {location.Dir, location.Store},
	"gate":              {location.Ledger},
	"watch":             {location.Ledger},
	"bench serve":       {location.Ledger},
	"logs":              {location.Store},
}

// notLocations are flags named like a location that are something else:
// export's --tiles is where it writes, not a log to read; bench
// witness --dir is where its temporary folder goes; verify --tiles is a
// published log the proof is checked against, beside the proof it reads;
// bench --store is a database to measure on (in schemas of its own), not
// a log to read.
var notLocations = map[string]bool{"export --tiles": true, "bench witness --dir": true, "verify --tiles": true, "bench --store": true}

var locEnvNames = []string{"CUSTODY_LEDGER", "CUSTODY_STORE", "CUSTODY_DIR"}

// locValue is the value the test gives a location of kind k from src
// ("flag" or "env"): a store needs a postgres:// URL.
func locValue(src string, k location.Kind) string {
	if k == location.Store {
		return "postgres://" + src + "@localhost/custody"
	}
	return src + "-" + string(k)
}

// expectLocation is the rule, written out as the README and --help say
// it, for the test to hold clikit.ResolveLocation to.
func expectLocation(kinds []location.Kind, typed []location.Kind, env map[string]string) (location.Location, bool) {
	if len(typed) > 1 {
		return location.Location{}, false
	}
	if len(typed) == 1 {
		return location.Location{Kind: typed[0], Value: locValue("flag", typed[0]), From: "--" + string(typed[0])}, true
	}
	for _, e := range []struct {
		k location.Kind
		n string
	}{{location.Ledger, "CUSTODY_LEDGER"}, {location.Store, "CUSTODY_STORE"}, {location.Dir, "CUSTODY_DIR"}} {
		if v := env[e.n]; v != "" && slices.Contains(kinds, e.k) {
			return location.Location{Kind: e.k, Value: v, From: "$" + e.n}, true
		}
	}
	if slices.Contains(kinds, location.Dir) {
		return location.Location{Kind: location.Dir, Value: "./custody-data", From: "default"}, true
	}
	return location.Location{}, false
}

// findCommand returns the command at path in the tree.
func findCommand(root *cli.Command, path []string) *cli.Command {
	c := root
	for _, name := range path {
		c = c.Command(name)
		if c == nil {
			return nil
		}
	}
	return c
}

// subsets returns every subset of kinds of size at most 2 (three typed
// flags fail as two do).
func subsets(kinds []location.Kind) [][]location.Kind {
	out := [][]location.Kind{nil}
	for i := range kinds {
		out = append(out, []location.Kind{kinds[i]})
		for j := i + 1; j < len(kinds); j++ {
			out = append(out, []location.Kind{kinds[i], kinds[j]})
		}
	}
	return out
}

// envCombos is every combination of the three variables, set or not.
func envCombos() []map[string]string {
	var out []map[string]string
	for mask := 0; mask < 1<<len(locEnvNames); mask++ {
		m := map[string]string{}
		for i, n := range locEnvNames {
			if mask&(1<<i) != 0 {
				m[n] = locValue("env", location.Kind(strings.ToLower(strings.TrimPrefix(n, "CUSTODY_"))))
			}
		}
		out = append(out, m)
	}
	return out
}

// TestEveryCommandLocation runs every command of the tree, with each
// combination of typed location flags and of the three variables, and
// checks that where it would read and write is what the rule says. The
// command's own action is replaced by one that records the resolved
// location (and its required flags are relaxed), so that the test covers
// every command's flags without needing a ledger for each.
func TestEveryCommandLocation(t *testing.T) {
	root := newApp(nil, nil, nil)
	seen := map[string]bool{}
	for _, p := range commandPaths(root, nil) {
		name := strings.Join(p, " ")
		c := findCommand(root, p)
		for _, f := range c.Flags {
			n := f.Names()[0]
			if src := reflect.ValueOf(f).Elem().FieldByName("Sources"); src.IsValid() {
				keys := src.Addr().Interface().(*cli.ValueSourceChain).EnvKeys()
				for _, k := range keys {
					if slices.Contains(locEnvNames, k) || k == location.LogKeyEnv {
						t.Errorf("%s --%s reads $%s itself: location flags leave the environment to resolveLocation", name, n, k)
					}
				}
			}
			switch location.Kind(n) {
			case location.Dir, location.Ledger, location.Store, location.Bundle, location.Tiles:
				if !slices.Contains(clikit.LocationKinds(c), location.Kind(n)) && !notLocations[name+" --"+n] {
					t.Errorf("%s --%s is not a location flag (make it with locFlag)", name, n)
				}
			}
		}
		got := clikit.LocationKinds(c)
		want, listed := wantLocations[name]
		if len(got) == 0 && !listed {
			continue
		}
		seen[name] = true
		if !slices.Equal(got, want) {
			t.Errorf("%s takes locations %v, want %v (a new command joins wantLocations)", name, got, want)
			continue
		}
	}
	for name := range wantLocations {
		if !seen[name] {
			t.Errorf("wantLocations names %q, which is not a command that takes a location", name)
		}
	}

	cases := 0
	for name, kinds := range wantLocations {
		for _, typed := range subsets(kinds) {
			for _, env := range envCombos() {
				for _, n := range append(locEnvNames, location.LogKeyEnv) {
					t.Setenv(n, env[n])
				}
				var got *location.Location
				var gotErr error
				var stderr strings.Builder
				app := newApp(strings.NewReader(""), &strings.Builder{}, &stderr)
				c := findCommand(app, strings.Split(name, " "))
				relaxRequired(c)
				c.Action = func(_ context.Context, c *cli.Command) error {
					loc, err := clikit.ResolveLocation(c)
					got, gotErr = &loc, err
					return err
				}
				args := append([]string{"custody"}, strings.Split(name, " ")...)
				for _, k := range typed {
					args = append(args, "--"+string(k), locValue("flag", k))
				}
				code := runApp(context.Background(), app, args)
				want, ok := expectLocation(kinds, typed, env)
				label := fmt.Sprintf("%s with env %v", strings.Join(args[1:], " "), env)
				cases++
				switch {
				case got == nil:
					t.Errorf("%s: the command did not run (exit %d): %s", label, code, stderr.String())
				case !ok:
					if gotErr == nil || code != clikit.ExitUsage {
						t.Errorf("%s: resolved %v, exit %d; want a usage error (exit 2)", label, *got, code)
					}
				case gotErr != nil:
					t.Errorf("%s: %v; want %v", label, gotErr, want)
				case *got != want:
					t.Errorf("%s: resolved %v, want %v", label, *got, want)
				}
			}
		}
	}
	t.Logf("%d commands, %d combinations", len(wantLocations), cases)
}

// relaxRequired clears Required on c's flags, so that the probe action
// runs without the command's other inputs.
func relaxRequired(c *cli.Command) {
	for _, f := range c.Flags {
		if r := reflect.ValueOf(f).Elem().FieldByName("Required"); r.IsValid() && r.CanSet() {
			r.SetBool(false)
		}
	}
}

// TestHelpSaysTheLocationRule: every command that takes a location says
// the rule in its --help.
func TestHelpSaysTheLocationRule(t *testing.T) {
	for name := range wantLocations {
		r := custody(t, "", append(strings.Split(name, " "), "--help")...)
		if !strings.Contains(r.stdout, clikit.WhereCategory(wantLocations[name])) || !strings.Contains(r.stdout, "a typed flag wins") {
			t.Errorf("%s --help does not say where it reads and writes:\n%s", name, r.stdout)
		}
	}
}

// TestLocationPrecedenceEndToEnd runs the commands the issue named, for
// real, with the variables a README reader has exported pointing
// elsewhere: the typed flag must decide where each reads and writes.
func TestLocationPrecedenceEndToEnd(t *testing.T) {
	a := newLedgerEnv(t) // the ledger the flags name
	b := newLedgerEnv(t) // the ledger $CUSTODY_DIR names
	vkeyA := strings.TrimSpace(a.run(0, "checkpoint", "--verifier-key").stdout)
	vkeyB := strings.TrimSpace(b.run(0, "checkpoint", "--verifier-key").stdout)
	if vkeyA == vkeyB {
		t.Fatal("two ledgers share a key")
	}
	dead := "http://127.0.0.1:1" // nothing listens: using it fails
	t.Setenv("CUSTODY_LEDGER", dead)
	t.Setenv("CUSTODY_DIR", b.dir)

	// checkpoint --verifier-key and get read the typed --dir, not $CUSTODY_LEDGER.
	if got := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", a.dir, "--verifier-key").stdout); got != vkeyA {
		t.Errorf("checkpoint --dir A --verifier-key with $CUSTODY_LEDGER set: %q, want A's %q", got, vkeyA)
	}
	if r := must(t, 0, "get", "--dir", a.dir, "--index", "0"); !strings.Contains(r.stdout, "GENESIS") {
		t.Errorf("get --dir A:\n%s", r.stdout)
	}
	// principal enroll writes to the typed --dir.
	must(t, 0, "principal", "enroll", "--dir", a.dir, "--admin-key", a.keys["admin"], "--name", "user:alice", "--public-key", a.key("user:alice"))
	if n := mustCheckpointSize(t, a); n != 2 {
		t.Errorf("ledger A has %d entries after enroll, want 2", n)
	}
	os.Unsetenv("CUSTODY_LEDGER")
	if n := mustCheckpointSize(t, b); n != 1 {
		t.Errorf("ledger B ($CUSTODY_DIR) has %d entries, want 1: the enroll went there", n)
	}
	t.Setenv("CUSTODY_LEDGER", dead)

	// With no flag, $CUSTODY_LEDGER (first in order) is used: and fails (unavailable, 5),
	// naming it.
	if r := must(t, 5, "get", "--index", "0"); !strings.Contains(r.stderr, dead) {
		t.Errorf("get with $CUSTODY_LEDGER set: %s", r.stderr)
	}

	// $CUSTODY_DIR no longer clashes with --tiles or --bundle.
	tiles := filepath.Join(t.TempDir(), "tiles")
	must(t, 0, "export", "--dir", a.dir, "--tiles", tiles)
	must(t, 0, "audit", "--tiles", tiles, "--log-key", vkeyA)
	bundle := filepath.Join(t.TempDir(), "enroll.bundle.json")
	must(t, 0, "prove", "--dir", a.dir, "--index", "1", "--out", bundle)
	if r := must(t, 1, "replay", "--bundle", bundle, "--log-key", vkeyA, "--workflow", "wf_none"); strings.Contains(r.stderr, "not both") {
		t.Errorf("replay --bundle with $CUSTODY_DIR set: %s", r.stderr)
	}
	// $CUSTODY_LOG_KEY stands in for --log-key where one is needed.
	t.Setenv("CUSTODY_LOG_KEY", vkeyA)
	must(t, 0, "audit", "--tiles", tiles)
	os.Unsetenv("CUSTODY_LOG_KEY")

	// Two typed locations are a usage error, whatever the environment.
	if r := must(t, 2, "get", "--dir", a.dir, "--ledger", dead, "--index", "0"); !strings.Contains(r.stderr, `--dir "`) || !strings.Contains(r.stderr, `--ledger "`) {
		t.Errorf("two locations: %s", r.stderr)
	}
	must(t, 2, "audit", "--dir", a.dir, "--tiles", tiles)

	// A store that is not a store URL is a usage error naming its source.
	t.Setenv("CUSTODY_STORE", a.dir)
	os.Unsetenv("CUSTODY_LEDGER")
	if r := must(t, 2, "get", "--index", "0"); !strings.Contains(r.stderr, "$CUSTODY_STORE") {
		t.Errorf("$CUSTODY_STORE a folder: %s", r.stderr)
	}
	// ... but a typed --dir beats it.
	must(t, 0, "get", "--dir", a.dir, "--index", "0")
}

// TestReplayLedgerWithBothVariables: replay --ledger URL works when both
// $CUSTODY_DIR and $CUSTODY_LEDGER are set (it used to fail).
func TestReplayLedgerWithBothVariables(t *testing.T) {
	dir := demoLedger(t)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.New(l, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer func() { hs.Close(); l.Close() }()
	t.Setenv("CUSTODY_DIR", filepath.Join(t.TempDir(), "elsewhere"))
	t.Setenv("CUSTODY_LEDGER", "http://127.0.0.1:1")
	r := must(t, 0, "replay", "--ledger", hs.URL, "--workflow", "wf_9f3a")
	if !strings.Contains(r.stdout, "verified against checkpoint size 12") {
		t.Errorf("replay --ledger:\n%s", r.stdout)
	}
	// And with no flag, $CUSTODY_LEDGER comes before $CUSTODY_DIR.
	t.Setenv("CUSTODY_LEDGER", hs.URL)
	must(t, 0, "replay", "--workflow", "wf_9f3a")
}
