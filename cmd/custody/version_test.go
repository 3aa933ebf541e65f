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

	// The toolchain's stamp, as the README's install command gets it: in a
	// clone of the repository (a git worktree has a .git file, which the
	// go command does not follow), go install -buildvcs=true records the
	// module version and the commit even where GOFLAGS says
	// -buildvcs=false.
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is needed to check the version a clone's go install records")
		}
		t.Skip("no git")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "custody")
	if out, err := exec.Command("git", "clone", "--quiet", "../..", clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	install := exec.Command("go", "install", "-buildvcs=true", "./cmd/custody")
	install.Dir = clone
	install.Env = append(os.Environ(), "GOBIN="+filepath.Join(bin, "gobin"), "GOFLAGS=-buildvcs=false")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install -buildvcs=true: %v\n%s", err, out)
	}
	out, _ = exec.Command(filepath.Join(bin, "gobin", "custody"), "version", "--json").Output()
	if !strings.Contains(string(out), `"revision": "`+strings.TrimSpace(string(head))+`"`) || !strings.Contains(string(out), `"version": "v0.0.0-`) {
		t.Errorf("go install -buildvcs=true in a clone: custody version --json has no module version or revision %s:\n%s", head, out)
	}
	out, _ = exec.Command(filepath.Join(bin, "gobin", "custody"), "version").Output()
	if strings.Contains(string(out), "(devel)") || !strings.Contains(string(out), strings.TrimSpace(string(head))[:12]) {
		t.Errorf("custody version after go install: %q", out)
	}

	// A build that recorded nothing says why.
	plain := exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(bin, "plain"), ".")
	if out, err := plain.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ = exec.Command(filepath.Join(bin, "plain"), "version").Output()
	if !strings.Contains(string(out), "(devel)") || !strings.Contains(string(out), "go install -buildvcs=true") {
		t.Errorf("custody version of an unstamped build: %q", out)
	}
}
