package ledgercmd

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/storage/pgstore"
)

// LogsCommand is `custody logs`.
func LogsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "list the logs of a PostgreSQL database",
		UsageText: "custody logs --store postgres://... [--log NAME] [--json]",
		Description: `Lists the logs one PostgreSQL database holds: the default log (the one a
store URL names without --log), then the logs with names by name, each with
its origin, size, sequencer lease epoch and leader (the URL its leader takes
appends at, while its lease is live). custody init --store URL --log NAME
--origin ORIGIN creates a log; every command that opens a log takes --log
NAME (or $CUSTODY_LOG) to choose one, and custody serve --log A --log B
serves several (under /logs/NAME/).

It changes nothing in the database. With --log NAME it lists that log
alone, and fails (exit 1) if the database holds none of that name. Exit 5
when the database cannot be reached.

Example:

   custody logs --store postgres://custody@db/custody
   custody logs --store postgres://custody@db/custody --json`,
		Flags: []cli.Flag{
			clikit.LocFlag(location.Store, ""),
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			loc, err := clikit.ResolveNoArgs(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			logs, err := pgstore.ListLogs(ctx, loc.Value)
			if err != nil {
				return fmt.Errorf("logs%s: %w", loc.Why(), err)
			}
			if loc.Log != "" {
				var one []pgstore.LogInfo
				for _, li := range logs {
					if li.Name == loc.Log {
						one = append(one, li)
					}
				}
				if len(one) == 0 {
					base, _, _ := pgstore.SplitLog(pgstore.Redact(loc.Value))
					return fmt.Errorf("the database at %s holds no log named %q (custody logs --store URL lists them)", base, loc.Log)
				}
				logs = one
			}
			if c.Bool("json") {
				if logs == nil {
					logs = []pgstore.LogInfo{}
				}
				return clikit.WriteJSON(c.Root().Writer, logs)
			}
			if len(logs) == 0 {
				base, _, _ := pgstore.SplitLog(pgstore.Redact(loc.Value))
				fmt.Fprintf(c.Root().ErrWriter, "custody: the database at %s holds no log yet (custody init --store URL [--log NAME] --origin ORIGIN creates one)\n", base)
				return nil
			}
			tw := tabwriter.NewWriter(c.Root().Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tORIGIN\tSIZE\tEPOCH\tLEADER")
			for _, li := range logs {
				leader := li.Leader
				if leader == "" {
					leader = "none"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", clikit.SafeText(li.Name), clikit.SafeText(li.Origin), li.Size, li.Epoch, clikit.SafeText(leader))
			}
			return tw.Flush()
		},
	}
}
