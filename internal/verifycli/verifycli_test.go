package verifycli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/internal/verifycli"
)

// The evidence in testdata/verify is made by verify's TestTestdata.
var td = filepath.Join("..", "..", "testdata", "verify")

func f(name string) string { return filepath.Join(td, name) }

type result struct {
	code           int
	stdout, stderr string
}

// run runs the standalone command as main does.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := verifycli.Standalone()
	var out, errw bytes.Buffer
	cmd.Writer, cmd.ErrWriter, cmd.Reader = &out, &errw, strings.NewReader(stdin)
	err := cmd.Run(context.Background(), append([]string{"custody-verify"}, args...))
	code := verifycli.Exit(err, cmd.Name, &errw)
	return result{code, out.String(), errw.String()}
}

// runSub runs it as `custody verify ...` under a root like the custody CLI's.
func runSub(t *testing.T, args ...string) result {
	t.Helper()
	root := &cli.Command{Name: "custody", Commands: []*cli.Command{verifycli.Command()},
		ExitErrHandler: func(context.Context, *cli.Command, error) {}}
	var out, errw bytes.Buffer
	root.Writer, root.ErrWriter = &out, &errw
	err := root.Run(context.Background(), append([]string{"custody", "verify"}, args...))
	return result{verifycli.Exit(err, "custody", &errw), out.String(), errw.String()}
}

func TestCommand(t *testing.T) {
	vkey, err := os.ReadFile(f("log.vkey"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(vkey))
	otherKey := testlog.NewActorSeed(testlog.Origin, "another log").VerifierKey(testlog.Origin)
	receipt, err := os.ReadFile(f("receipt.bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   []string // substrings of stdout
		err   []string // substrings of stderr
	}{
		{"valid bundle, key file", "", []string{f("receipt.bundle.json"), "--log-key", f("log.vkey")}, 0,
			[]string{"custody verify: VALID", "subject    #6 RECEIPT r1 in workflow wf_9f3a", "ok   decisions re-run",
				"witness cosignatures not checked (no --policy): the checkpoint carries none"}, nil},
		{"valid bundle, key string, flags first", "", []string{"--log-key", key, f("workflow.bundle.json")}, 0, []string{"VALID"}, nil},
		{"key with surrounding space", "", []string{f("outcome.bundle.json"), "--log-key", " " + key + "\n"}, 0, []string{"VALID"}, nil},
		{"denial bundle", "", []string{f("denial.bundle.json"), "--log-key", key}, 0, []string{"denial of RECEIPT r2 re-derived: limit_exceeded"}, nil},
		{"stdin", string(receipt), []string{"-", "--log-key", key}, 0, []string{"VALID"}, nil},
		{"tlog-proof", "", []string{f("receipt.tlog-proof"), "--log-key", key}, 0, []string{"VALID", "inclusion proof: entry 6"}, nil},
		{"rogue decision", "", []string{f("rogue-widening.invalid.bundle.json"), "--log-key", key}, 4,
			[]string{"INVALID", "FAIL decisions re-run", "FAIL #3 DELEGATE d2w", "widening"}, []string{"does not verify", "widening"}},
		{"tampered proof", "", []string{f("tampered-proof.invalid.bundle.json"), "--log-key", key}, 4,
			[]string{"INVALID", "FAIL inclusion proofs", "entry 3"}, nil},
		{"another log's key", "", []string{f("receipt.bundle.json"), "--log-key", otherKey}, 4, []string{"FAIL checkpoint signature"}, nil},
		{"consistency", "", []string{"consistency", f("checkpoint.old"), f("checkpoint.new"), "--proof", f("consistency.proof"), "--log-key", key}, 0,
			[]string{"VALID", "ok   consistency: size 10 is a prefix of size 11"}, nil},
		{"consistency, key before the subcommand", "", []string{"--log-key", key, "consistency", f("checkpoint.old"), f("checkpoint.new"), "--proof", f("consistency.proof")}, 0,
			[]string{"VALID"}, nil},
		{"rollback", "", []string{"consistency", f("checkpoint.new"), f("checkpoint.old"), "--proof", f("consistency.proof"), "--log-key", key}, 4,
			[]string{"FAIL consistency", "rollback"}, nil},
		{"wrong consistency proof", "", []string{"consistency", f("checkpoint.old"), f("checkpoint.new"), "--proof", f("log.vkey"), "--log-key", key}, 1,
			nil, []string{"not a base64 SHA-256 hash"}},
		{"consistency without --proof", "", []string{"consistency", f("checkpoint.old"), f("checkpoint.new"), "--log-key", key}, 2, nil, []string{"--proof FILE is required"}},
		{"consistency with one checkpoint", "", []string{"consistency", f("checkpoint.old"), "--proof", f("consistency.proof"), "--log-key", key}, 2, nil, []string{"want OLD and NEW"}},
		{"missing file", "", []string{f("nope.json"), "--log-key", key}, 1, nil, []string{"nope.json"}},
		{"not a bundle", "", []string{f("checkpoint.old"), "--log-key", key}, 1, nil, []string{"bundle:"}},
		{"bad key", "", []string{f("receipt.bundle.json"), "--log-key", "not-a-key"}, 1, nil, []string{"neither a verifier key nor a readable file"}},
		{"key file without a key", "", []string{f("receipt.bundle.json"), "--log-key", f("consistency.proof")}, 1, nil, []string{"does not hold a signed-note verifier key"}},
		{"no key", "", []string{f("receipt.bundle.json")}, 2, nil, []string{"--log-key VKEY is required"}},
		{"no bundle", "", []string{"--log-key", key}, 2, nil, []string{"want one BUNDLE argument, got 0"}},
		{"two bundles", "", []string{f("receipt.bundle.json"), f("outcome.bundle.json"), "--log-key", key}, 2, nil, []string{"got 2"}},
		{"unknown flag", "", []string{f("receipt.bundle.json"), "--log-key", key, "--frobnicate"}, 2, nil, []string{"frobnicate"}},
		{"help", "", []string{"--help"}, 0, []string{"Example:", "Exit codes: 0 ok (valid), 4 verification failed (invalid)", "consistency"}, nil},
		{"consistency help", "", []string{"consistency", "--help"}, 0, []string{"--proof FILE", "Example:"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.stdin, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, s := range tc.out {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tc.err {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	for _, tc := range []struct {
		file  string
		code  int
		valid bool
	}{{"receipt.bundle.json", 0, true}, {"rogue-widening.invalid.bundle.json", 4, false}} {
		r := run(t, "", f(tc.file), "--log-key", f("log.vkey"), "--json")
		if r.code != tc.code {
			t.Fatalf("%s: exit %d, want %d: %s", tc.file, r.code, tc.code, r.stderr)
		}
		var v struct {
			Valid  bool `json:"valid"`
			Checks []struct {
				Name string `json:"name"`
				OK   bool   `json:"ok"`
			} `json:"checks"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%s: stdout is not JSON: %v\n%s", tc.file, err, r.stdout)
		}
		if v.Valid != tc.valid || len(v.Checks) != 4 {
			t.Errorf("%s: valid %v with %d checks", tc.file, v.Valid, len(v.Checks))
		}
	}
	r := run(t, "", f("nope.json"), "--log-key", f("log.vkey"), "--json")
	var u struct {
		Error    string `json:"error"`
		Unusable bool   `json:"unusable"`
	}
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &u) != nil || !u.Unusable || u.Error == "" {
		t.Errorf("unusable input with --json: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestUnderCustody runs the command as a subcommand of another root, as
// the custody CLI carries it.
func TestUnderCustody(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{f("receipt.bundle.json"), "--log-key", f("log.vkey")}, 0},
		{[]string{f("rogue-widening.invalid.bundle.json"), "--log-key", f("log.vkey")}, 4},
		{[]string{f("nope"), "--log-key", f("log.vkey")}, 1},
		{[]string{f("receipt.bundle.json")}, 2},
		{[]string{"consistency", f("checkpoint.old"), f("checkpoint.new"), "--proof", f("consistency.proof"), "--log-key", f("log.vkey")}, 0},
	} {
		if r := runSub(t, tc.args...); r.code != tc.code {
			t.Errorf("custody verify %q: exit %d, want %d\n%s%s", tc.args, r.code, tc.code, r.stdout, r.stderr)
		}
	}
}

// TestUnwitnessedNote: without --policy the verdict says the checkpoint's
// cosignature lines were not checked, and counts them (the log's own
// signature is not one).
func TestUnwitnessedNote(t *testing.T) {
	cp := "example.com/custody\n7\nAAAA\n\n\u2014 example.com/custody abc\n\u2014 witness.example/w1 def\n\u2014 witness.example/w2 ghi\n"
	if got := verifycli.UnwitnessedNote([]byte(cp), "example.com/custody"); !strings.Contains(got, "carries 2 signature line(s) besides the log's") {
		t.Errorf("two cosignatures: %q", got)
	}
	if got := verifycli.UnwitnessedNote([]byte("example.com/custody\n7\nAAAA\n\n\u2014 example.com/custody abc\n"), "example.com/custody"); !strings.Contains(got, "carries none") {
		t.Errorf("none: %q", got)
	}
}
