package benchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/bench"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/witnessproc"
)

// custody bench witness: pending-receipt latency with and without
// witness-backed finality.
func init() { registerBench(benchWitnessCommand) }

func benchWitnessCommand() *cli.Command {
	return &cli.Command{
		Name:      "witness",
		Usage:     "pending-receipt latency without witnesses and with a 2-of-3 quorum of local witnesses",
		UsageText: "custody bench witness [--appends N] [--clients N] [--witness-interval 0] [--witness-bin DIR] [--json]",
		Description: `Runs the same load twice over HTTP, on fresh ledgers in a temporary folder:
--clients clients (one depth-3 chain each, one request in flight each)
sending about --appends authorised submissions, pending receipts and their
outcomes, 1 in 20 denied. First without witnesses; then with
--witness-finality and a 2-of-3 quorum of local witnesses: two omniwitness
and one litewitness, each with its own SQLite database on the same disk,
built from the Go module proxy by scripts/witness.sh (--witness-bin, or
$CUSTODY_WITNESS_BIN, or .cache/bin). A pending receipt is then answered
only under a checkpoint two witnesses cosigned.

It prints the p50 and p99 latency of the accepted pending receipts in both
runs and their ratio, how many checkpoints the quorum cosigned against how
many the ledger committed (one cosigned checkpoint covers every receipt
committed while the witnesses were answering the previous one), and the
mean time a witness took to answer. Witnesses, server and clients share the
machine's cores. docs/BENCHMARKS.md has the figures and how to reproduce
them.

Example:

   scripts/witness.sh
   custody bench witness
   custody bench witness --clients 64 --appends 20000 --json`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "appends", Value: 4000, Usage: "authorised submissions in each run"},
			&cli.IntFlag{Name: "clients", Value: 16, Usage: "HTTP clients, one request in flight each"},
			&cli.DurationFlag{Name: "witness-interval", Value: 0, Usage: "the least time between two checkpoints sent to one witness"},
			&cli.StringFlag{Name: "witness-bin", Usage: "the folder with omniwitness and litewitness (default $CUSTODY_WITNESS_BIN or .cache/bin)", TakesFile: true},
			&cli.StringFlag{Name: "dir", Usage: "where the temporary folder is made (default: the system's temp dir)", TakesFile: true},
			&cli.BoolFlag{Name: "json", Usage: "print the figures as JSON"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			if n := c.Int("appends"); n < 100 || n > 10_000_000 {
				return clikit.Usage(c, "--appends %d: want 100..10000000", n)
			}
			if n := c.Int("clients"); n < 1 || n > 4096 {
				return clikit.Usage(c, "--clients %d: want 1..4096", n)
			}
			if d := c.Duration("witness-interval"); d < 0 || d > time.Minute {
				return clikit.Usage(c, "--witness-interval %s: want 0..1m", d)
			}
			bin := c.String("witness-bin")
			if bin == "" {
				wd, _ := os.Getwd()
				bin = witnessproc.DefaultBin(wd)
			}
			if err := witnessproc.Missing(bin); err != nil {
				return fmt.Errorf("bench witness: %w", err)
			}
			dir, err := os.MkdirTemp(c.String("dir"), "custody-bench-witness-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			r, err := bench.WitnessLatency(ctx, dir, bin, int(c.Int("appends")), int(c.Int("clients")), c.Duration("witness-interval"))
			if err != nil {
				return fmt.Errorf("bench witness: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				out, _ := json.MarshalIndent(r, "", "  ")
				fmt.Fprintln(w, string(out))
				return nil
			}
			fmt.Fprintf(w, "custody bench witness: %d clients, about %d submissions a run, witness interval %s (%s)\n",
				r.Clients, r.Unwitnessed.Submissions, r.Interval, filepath.Base(bin))
			fmt.Fprintf(w, "  %-34s %10s %10s %10s %12s %12s\n", "", "p50 ms", "p99 ms", "appends/s", "mean batch", "commit ms")
			row := func(name string, a bench.AppendResult) {
				fmt.Fprintf(w, "  %-34s %10.2f %10.2f %10.0f %12.1f %12.2f\n", name, a.PendingP50Ms, a.PendingP99Ms, a.PerSec, a.MeanBatch, a.CommitMs)
			}
			row("pending receipts, unwitnessed", r.Unwitnessed)
			row("pending receipts, 2-of-3 finality", r.Witnessed)
			fmt.Fprintf(w, "  p50 ratio witnessed/unwitnessed: %.2f\n", r.Ratio)
			fmt.Fprintf(w, "  checkpoints cosigned by the quorum: %d of %d committed, %.2f ms after publication on average\n",
				r.Cosigned, r.Commits, r.QuorumMs)
			fmt.Fprintf(w, "  a witness answered add-checkpoint in %.2f ms on average (w1 %.2f, w2 %.2f omniwitness; w3 %.2f litewitness)\n",
				r.WitnessMs, r.PerWitnessMs["w1"], r.PerWitnessMs["w2"], r.PerWitnessMs["w3"])
			return nil
		},
	}
}
