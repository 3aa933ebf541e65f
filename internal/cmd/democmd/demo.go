// Package democmd holds demo (the quick-start story on a fresh ledger) and
// version.
package democmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/demo"
	"github.com/custodylog/custody/internal/location"
	buildversion "github.com/custodylog/custody/internal/version"
)

// DemoCommand is `custody demo`.
func DemoCommand() *cli.Command {
	return &cli.Command{
		Name:      "demo",
		Usage:     "run the quick-start story on a fresh ledger",
		UsageText: "custody demo [--dir D] [--force] [--json]",
		Description: `Creates a ledger in a fresh folder (default: ./custody-data/demo-<time>, or
under $CUSTODY_DIR) and plays the seed scenario, one line per decision:
user:alice lets agent:planner book a flight (budget_usd 800, one side effect,
15 minutes); the planner delegates the purchase to agent:planner/booker
(budget_usd 742); the booker gates the purchase with a pending receipt and
records its outcome; then the ledger denies a second purchase over budget, a
delegation four deep, a delegation that widens its parent, and a purchase
after alice stopped the workflow. Prints the checkpoint, the verifier key
and how to look further. Exits 0 when every decision was the expected one.
The keys are left in the folder's keys/ so you can continue by hand.

Example:

   custody demo --dir /tmp/custody-demo`,
		Flags: []cli.Flag{
			clikit.LocFlag(location.Dir, "the `FOLDER` to create the demo ledger in (default: demo-<time> in $CUSTODY_DIR, or in ./custody-data)"),
			&cli.BoolFlag{Name: "force", Usage: "delete an existing ledger in --dir first"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			loc, err := clikit.ResolveNoArgs(c)
			if err != nil {
				return err
			}
			dir := loc.Value
			if loc.From != "--dir" {
				dir = demo.NewDir(loc.Value, time.Now())
			}
			if err := demo.Fresh(dir, c.Bool("force")); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			w := c.Root().Writer
			lines := w
			if c.Bool("json") {
				lines = nil
			}
			start := time.Now()
			rep, err := demo.Run(ctx, dir, lines)
			if c.Bool("json") && rep != nil {
				if jerr := clikit.WriteJSON(w, rep); jerr != nil && err == nil {
					err = jerr
				}
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return nil
			}
			fmt.Fprintf(w, "\nevery decision was as expected (%d entries, %s)\n\n", rep.Size, time.Since(start).Round(time.Millisecond))
			fmt.Fprintf(w, "checkpoint:\n%s\n", rep.Checkpoint)
			fmt.Fprintf(w, "verifier key:\n%s\n\n", rep.VerifierKey)
			var denial uint64
			for _, s := range rep.Steps {
				if s.Verdict == "denied" && denial == 0 {
					denial = s.Index
				}
			}
			me := selfName()
			fmt.Fprintf(w, "Look further:\n")
			fmt.Fprintf(w, "   %s get --dir %s --index %d              # a DENIAL, and why\n", me, dir, denial)
			fmt.Fprintf(w, "   %s get --dir %s --id confirm_42c1       # alice's grant\n", me, dir)
			fmt.Fprintf(w, "   %s replay --dir %s --workflow wf_9f3a   # the incident responder's view\n", me, dir)
			fmt.Fprintf(w, "   %s export --dir %s --tiles ./tiles      # the log as static tlog tiles\n", me, dir)
			fmt.Fprintf(w, "An auditor needs only the verifier key above: with it, %s verify (or\n", me)
			fmt.Fprintf(w, "custody-verify) checks the checkpoint, every inclusion proof and every\n")
			fmt.Fprintf(w, "decision without the database.\n")
			return nil
		},
	}
}

// VersionCommand is `custody version`.
func VersionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print the version",
		UsageText: "custody version [--json]",
		Description: `Prints the version of custody and the commit it was built from, as the Go
toolchain recorded them (go install or go build in a git clone records the
module version, like v0.0.0-20261127173153-2cfab5471c80, and the commit,
unless -buildvcs=false is in effect: go install -buildvcs=true overrides
it), and the Go toolchain that built it. custody-verify --version prints the
same.

Example:

   custody version --json`,
		Flags: []cli.Flag{clikit.JSONFlag()},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			info := buildversion.Get()
			if c.Bool("json") {
				return clikit.WriteJSON(c.Root().Writer, info)
			}
			_, err := fmt.Fprintf(c.Root().Writer, "custody %s (%s)\n", info, info.Go)
			if err == nil && info.Version == "(devel)" && info.Revision == "" {
				// Say why, rather than leave "(devel)" unexplained.
				_, err = fmt.Fprintln(c.Root().Writer, "no version or commit was recorded in this build: it was built outside a git clone, or with -buildvcs=false (go env GOFLAGS);\n"+
					"go install -buildvcs=true ./cmd/custody in a clone, or scripts/build.sh, records them")
			}
			return err
		},
	}
}

// selfName is how the user ran this tool, for commands it prints to
// paste: "go run ./cmd/custody" when it was built by go run (its binary
// then lives in a go-build folder under the temporary directory), else
// "custody".
func selfName() string {
	exe, err := os.Executable()
	if err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/custody"
	}
	return "custody"
}
