// Package witnesstest runs real C2SP tlog-witness witnesses on loopback
// for tests (package witnessproc): omniwitness and litewitness, built
// from the Go module proxy by scripts/witness.sh into .cache/bin.
//
// A test that needs them skips when they are missing on a developer's
// machine, and fails when CI is set.
package witnesstest

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/internal/witnessproc"
)

// A Log is a log a witness is told about.
type Log = witnessproc.Log

// A Witness is a witness process; it is closed when the test ends.
type Witness struct {
	*witnessproc.Witness
	t testing.TB
}

// Bin returns the folder holding the witness binaries, skipping the test
// (failing it under CI) when they or the tools litewitness needs are
// missing.
func Bin(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := witnessproc.DefaultBin(filepath.Join(filepath.Dir(file), "..", ".."))
	if err := witnessproc.Missing(bin); err != nil {
		testenv.Need(t, "%v", err)
	}
	return bin
}

// StartOmniwitness runs omniwitness knowing the given logs.
func StartOmniwitness(t testing.TB, name string, logs ...Log) *Witness {
	t.Helper()
	w, err := witnessproc.StartOmniwitness(Bin(t), t.TempDir(), name, logs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return &Witness{w, t}
}

// StartLitewitness runs litewitness knowing the given logs.
func StartLitewitness(t testing.TB, name string, logs ...Log) *Witness {
	t.Helper()
	w, err := witnessproc.StartLitewitness(Bin(t), t.TempDir(), name, logs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return &Witness{w, t}
}

// Start brings a stopped witness back, failing the test if it cannot.
func (w *Witness) Start() {
	w.t.Helper()
	if err := w.Witness.Start(); err != nil {
		w.t.Fatal(err)
	}
}
