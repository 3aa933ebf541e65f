package clikit

import "testing"

func TestSafeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"a\u202eb":          `a\u202eb`,
		"line\nbreak\ttab":  `line\nbreak\ttab`,
		"\x1b[31mred":       `\u001b[31mred`,
		"bad \xff utf8":     `bad \xff utf8`,
		"zero\u200bwidth":   `zero\u200bwidth`,
		"emoji 🙂 stays":     "emoji 🙂 stays",
		"tag \U000E0041 ch": `tag \U000e0041 ch`,
	} {
		if got := SafeText(in); got != want {
			t.Errorf("SafeText(%q) = %q, want %q", in, got, want)
		}
	}
}
