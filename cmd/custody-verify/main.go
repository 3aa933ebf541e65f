// Command custody-verify checks custody evidence offline: bundles,
// tlog-proofs and checkpoint consistency, with only the log's public key.
// It is built from package verify and the verify command alone, without
// the ledger or its database, so that an auditor's binary stays small.
//
// Exit codes: 0 ok (valid), 4 verification failed (invalid), 1 error
// (unusable input), 2 usage: custody's one table (internal/exitcode).
package main

import (
	"context"
	"os"

	"github.com/custodylog/custody/internal/verifycli"
)

func main() {
	cmd := verifycli.Standalone()
	os.Exit(verifycli.Exit(cmd.Run(context.Background(), os.Args), cmd.Name, os.Stderr))
}
