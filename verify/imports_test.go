package verify_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportGraph keeps the verifier small: neither package verify nor the
// verifier-only binary may depend on Badger or on the ledger (DESIGN §6).
func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	forbidden := []string{
		"github.com/dgraph-io/badger",
		"github.com/custodylog/custody/ledger",
		"github.com/custodylog/custody/internal/testlog",
		// What makes custody 33 MB and custody-verify 9 (README "For
		// auditors"): the stores, the server, the gate and their drivers.
		"github.com/custodylog/custody/storage",
		"github.com/custodylog/custody/server",
		"github.com/custodylog/custody/gate",
		"github.com/custodylog/custody/publish",
		"github.com/jackc/pgx",
		"github.com/aws",
		"github.com/prometheus",
		"github.com/modelcontextprotocol",
	}
	for _, pkg := range []string{
		"github.com/custodylog/custody/verify",
		"github.com/custodylog/custody/internal/verifycli",
		"github.com/custodylog/custody/cmd/custody-verify",
	} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
		t.Logf("%s: %d packages in its import graph", pkg, len(deps))
	}
}
