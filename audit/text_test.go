package audit

import (
	"strings"
	"testing"
	"time"
)

func TestReportText(t *testing.T) {
	idx := uint64(7)
	r := &Report{Origin: "example.com/log\u202e", Size: 1234567, Root: "abc=", CheckpointVerified: true, Entries: 1234567,
		TilesChecked: 9, RootChecked: true, Replayed: 1234567, Denials: 3, StateRecords: -1,
		Findings: []Finding{{Check: "bad_signature", Index: &idx, Detail: strings.Repeat("word ", 30) + "\u202e"}}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"custody audit: example.com/log\\u202e at size 1,234,567: 1 FINDING(S)\n",
		"  checkpoint  signature verified under the log key; root abc=\n",
		"  state       not compared (an export holds no state)\n",
		"\nFINDINGS\n  - bad_signature at entry 7",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("line over 80 columns: %q", line)
		}
	}
	if strings.ContainsRune(text, '\u202e') {
		t.Error("an override reached the terminal")
	}
	if r.Findings = nil; r.Clean() {
		b.Reset()
		r.WriteText(&b)
		if !strings.Contains(b.String(), ": CLEAN\n") {
			t.Errorf("clean report:\n%s", b.String())
		}
	}
}

func TestProgressLine(t *testing.T) {
	if got := ProgressLine(250, 1000, 10*time.Second); got != "auditing [#####...............] 250/1,000 entries  25.0%  25/s  ETA 30s" {
		t.Errorf("ProgressLine = %q", got)
	}
	if got := ProgressLine(1000, 1000, time.Second); !strings.HasSuffix(got, "ETA 0s") {
		t.Errorf("done: %q", got)
	}
}

func TestOpen(t *testing.T) {
	if h, ok := Open("https://log.example/x", "ua").(*HTTP); !ok || h.Base != "https://log.example/x" || h.UserAgent != "ua" {
		t.Errorf("URL: %#v", Open("https://log.example/x", "ua"))
	}
	if _, ok := Open("./export", "ua").(Dir); !ok {
		t.Error("a folder is not a Dir")
	}
}
