package ledger

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/testenv"
)

// TestImportsNoDriver: the ledger reaches every store through the seam
// (package storage) and opens one by location through the drivers a
// program links in; it imports no driver and no database library.
func TestImportsNoDriver(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Need(t, "the go command is not on PATH (it lists the ledger's imports)")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/custodylog/custody/ledger").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/custodylog/custody/storage/badgerstore",
		"github.com/custodylog/custody/storage/pgstore",
		"github.com/dgraph-io/badger",
		"github.com/jackc/pgx",
	}
	for _, d := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("package ledger depends on %s: a store driver belongs behind storage.Register", d)
			}
		}
	}
}
