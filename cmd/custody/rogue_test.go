package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/testlog"
)

// rogueDir holds the forged logs of issue 15 as files an auditor can run
// the tools on: testdata/adversarial/rogue/<case>/ with case.json (what
// the attack is, the entry to reject, what each tool must say), bundle.json
// (the bundle of that entry), log.vkey and tiles/ (the whole log as
// `custody export` writes it).
const rogueDir = "../../testdata/adversarial/rogue"

// rogueCase is case.json.
type rogueCase struct {
	Name    string  `json:"name"`
	Attack  string  `json:"attack"`
	Defence string  `json:"defence"`
	Entry   *uint64 `json:"entry,omitempty"` // absent: the failure concerns no entry
	Verify  string  `json:"verify_says"`
	Audit   string  `json:"audit_says"`
	// AuditCheck is the check custody audit names ("denial" when absent).
	AuditCheck string `json:"audit_check,omitempty"`
}

// rogueFiles builds a case's files in memory, path -> bytes.
func rogueFiles(t *testing.T, tc testlog.RogueCase) map[string][]byte {
	f := tc.Build(t)
	r, bad := f.R, f.Bad
	tmp := t.TempDir()
	r.Export(filepath.Join(tmp, "tiles"), nil)
	files := map[string][]byte{}
	err := filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(tmp, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Bundle(bad, false).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	files["bundle.json"] = append(b, '\n')
	files["log.vkey"] = []byte(strings.TrimSuffix(f.VerifierKey(), "\n") + "\n")
	c := rogueCase{Name: tc.Name, Attack: tc.Attack, Defence: tc.Defence, Verify: tc.Verify, Audit: tc.Audit, AuditCheck: tc.AuditCheck}
	if !f.NoEntry {
		c.Entry = &bad
	}
	cj, err := canon.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	files["case.json"] = append(cj, '\n')
	return files
}

// TestRogueCases: for every forged log under testdata/adversarial/rogue,
// `custody verify` (on the bundle) and `custody audit` (on the export)
// exit 4 with a sentence naming the entry and the check that failed. The
// files are regenerated from internal/testlog and must match byte for byte
// (-update rewrites them).
func TestRogueCases(t *testing.T) {
	cases := testlog.RogueCases()
	var names []string
	for _, tc := range cases {
		names = append(names, tc.Name)
		t.Run(tc.Name, func(t *testing.T) {
			dir := filepath.Join(rogueDir, tc.Name)
			want := rogueFiles(t, tc)
			if *update {
				os.RemoveAll(dir)
				for p, data := range want {
					path := filepath.Join(dir, filepath.FromSlash(p))
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			for p, data := range want {
				got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%s/%s does not match what internal/testlog builds (go test ./cmd/custody -run TestRogueCases -update): %v", tc.Name, p, err)
				}
			}
			var c rogueCase
			if err := canon.UnmarshalRelaxed(want["case.json"], &c); err != nil {
				t.Fatal(err)
			}
			vkey := filepath.Join(dir, "log.vkey")
			v := custody(t, "", "verify", filepath.Join(dir, "bundle.json"), "--log-key", vkey)
			// Text verdicts wrap their lines; compare words.
			flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
			out := flat(v.stdout + v.stderr)
			entry, finding := "", "checkpoint: "
			if c.Entry != nil {
				check := "denial"
				if c.AuditCheck != "" {
					check = c.AuditCheck
				}
				entry, finding = fmt.Sprintf("#%d ", *c.Entry), fmt.Sprintf("%s at entry %d: ", check, *c.Entry)
			}
			if v.code != clikit.ExitVerify || !strings.Contains(out, entry) || !strings.Contains(out, c.Verify) {
				t.Errorf("custody verify: exit %d, want %d with a line naming %q and saying %q:\n%s", v.code, clikit.ExitVerify, entry, c.Verify, out)
			}
			a := custody(t, "", "audit", "--tiles", filepath.Join(dir, "tiles"), "--log-key", vkey)
			out = flat(a.stdout + a.stderr)
			if a.code != clikit.ExitVerify || !strings.Contains(out, finding) || !strings.Contains(out, c.Audit) {
				t.Errorf("custody audit: exit %d, want %d with a finding %q saying %q:\n%s", a.code, clikit.ExitVerify, finding, c.Audit, out)
			}
		})
	}
	// No stale case folder.
	entries, err := os.ReadDir(rogueDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(names, e.Name()) {
			t.Errorf("%s/%s is no case of testlog.RogueCases", rogueDir, e.Name())
		}
	}
}
