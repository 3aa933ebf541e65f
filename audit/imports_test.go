package audit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportGraph: an auditor or a monitor reads exports and bundles, so
// neither package audit nor package replay may depend on Badger or the
// ledger.
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	forbidden := []string{"github.com/dgraph-io/badger", "github.com/custodylog/custody/ledger", "github.com/custodylog/custody/internal/testlog"}
	for _, pkg := range []string{"github.com/custodylog/custody/audit", "github.com/custodylog/custody/replay"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, d := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
}
