package main

import (
	"encoding/json"
	"strings"
	"testing"
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
		if r.code != exitUsage {
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
