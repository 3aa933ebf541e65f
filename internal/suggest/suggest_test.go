package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"serve", "serve", 0}, {"sevre", "serve", 1}, {"serv", "serve", 1}, {"xerve", "serve", 1},
		{"eserv", "serve", 2}, {"", "abc", 3}, {"héllo", "hello", 1}} {
		if got := Distance(tc.a, tc.b); got != tc.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestClosest(t *testing.T) {
	cmds := []string{"serve", "append", "approve", "approvals", "get", "gate", "init"}
	for name, want := range map[string]string{
		"sevre":   "serve",   // a swap
		"appro":   "approve", // a prefix, the first that has it
		"apend":   "append",  // one deletion
		"ge":      "get",     // short: one edit at most (gate is two)
		"gat":     "gate",    // short: one edit
		"xyzzy":   "",        // nothing close
		"in":      "",        // short names never match two edits away ("init" is two)
		"initial": "",        // longer than every candidate, three edits from init
	} {
		if got := Closest(name, cmds); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
}
