package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneVersionString builds custody and custody-verify stamped as
// scripts/build.sh does, and checks that custody version, custody
// --version and custody-verify --version print the same version and
// commit. In a plain git checkout (CI's fresh clone) it also checks the
// toolchain's own VCS stamp, with -buildvcs=true overriding a
// GOFLAGS=-buildvcs=false.
func TestOneVersionString(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	bin := t.TempDir()
	const pkg = "github.com/custodylog/custody/internal/version"
	rev := "0123456789abcdef0123456789abcdef01234567"
	ldflags := "-X " + pkg + ".Version=v9.9.9-test -X " + pkg + ".Revision=" + rev + " -X " + pkg + ".Modified=true"
	for _, c := range []string{"custody", "custody-verify"} {
		out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", filepath.Join(bin, c), "../"+c).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", c, err, out)
		}
	}
	want := "v9.9.9-test 0123456789ab+dirty"
	for _, args := range [][]string{{"custody", "version"}, {"custody", "--version"}, {"custody-verify", "--version"}} {
		out, err := exec.Command(filepath.Join(bin, args[0]), args[1:]...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%v: %q (%v); want %q", args, out, err, want)
		}
	}
	out, _ := exec.Command(filepath.Join(bin, "custody"), "version", "--json").Output()
	if !strings.Contains(string(out), `"revision": "`+rev+`"`) {
		t.Errorf("custody version --json: %s", out)
	}

	// The toolchain's stamp, where it can stamp: a .git folder (a git
	// worktree has a .git file, which the go command does not follow).
	if fi, err := os.Stat("../../.git"); err != nil || !fi.IsDir() {
		t.Log("not a plain git checkout: the toolchain's VCS stamp is not checked here")
		return
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("git: %v", err)
	}
	out, err = exec.Command("go", "build", "-buildvcs=true", "-o", filepath.Join(bin, "stamped"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, _ = exec.Command(filepath.Join(bin, "stamped"), "version", "--json").Output()
	if !strings.Contains(string(out), `"revision": "`+strings.TrimSpace(string(head))+`"`) {
		t.Errorf("go build -buildvcs=true: custody version --json has no revision %s:\n%s", head, out)
	}
}
