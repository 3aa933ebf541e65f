// Package testenv decides what a test does when a real component it needs
// (PostgreSQL, versitygw, witnesses, Chromium, node and npm, openssl, root
// to mount a filesystem) is missing: on a developer's machine it skips,
// saying what is missing and how to get it; under CI (the environment
// variable CI set, as .ci/run sets it) it fails, so that no test of a real
// component passes CI by not running.
//
// Every such skip starts with Marker, so that .ci/testreport.go can list
// them and fail a run in which one was skipped all the same.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Marker begins the message of every skip for a missing component.
const Marker = "missing component: "

// CI reports whether the tests run under CI: the variable CI is set to
// anything but "" or "false".
func CI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false"
}

// Need stops tb because a component it needs is missing: it fails tb
// under CI and skips it otherwise. format and args say what is missing
// and how to get it.
func Need(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		tb.Fatalf("%s%s (CI is set, so this test must run: .ci/run installs and starts what the tests need)", Marker, msg)
		return
	}
	tb.Skipf("%s%s (under CI this is a failure)", Marker, msg)
}
