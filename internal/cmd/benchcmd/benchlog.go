package benchcmd

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
)

// custody bench log: the log alone, as the ledger issue measures it.
func init() { registerBench(benchLogCommand) }

func benchLogCommand() *cli.Command {
	return &cli.Command{
		Name:  "log",
		Usage: "measure the log alone: durable appends of 400-byte leaves, proofs, open time, RSS and disk",
		Description: `Runs custody bench's logonly and big phases: durable appends of pre-verified
~400-byte leaves in batches (no authority), then, on a --size entry log,
inclusion proofs/s, bundle builds/s, open time, peak RSS and disk bytes per
entry. Flags of custody bench (--size, --json, --leaves, ...) go before
"log".

Example:

   custody bench --size 1000000 log
   custody bench --size 10000000 --json log > log-10m.json`,
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			lineage := c.Lineage()
			if len(lineage) < 2 {
				return fmt.Errorf("bench log: no bench command above it")
			}
			parent := lineage[1]
			if err := parent.Set("phases", "logonly,big"); err != nil {
				return err
			}
			return benchWith(ctx, parent)
		},
	}
}
