package benchcmd

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/bench"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/remotelog"
)

func init() { registerBench(benchServeCommand) }

func benchServeCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "drive a running custody server with concurrent clients",
		UsageText: "custody bench serve --ledger URL --admin-key K [--log-key VKEY] [--clients 64] [--duration 10s] [--json]",
		Description: `Measures a running server (custody serve) over HTTP. It enrolls a fresh
principal with the admin key, confirms one agent per client in its own
workflow, then for --duration every client appends pending receipts one
after another, each answered only once durable under a signed checkpoint,
and each answer verified by the client (checkpoint signature, inclusion
proof, the leaf holds the submitted envelope), as a runtime does. It prints
the throughput and the latency percentiles of the appends. Run it against
a scratch ledger: it adds about clients+1 grants and every receipt to it.
Client and server share the machine when both run on it.

Example:

   custody serve --dir ./scratch &
   custody bench serve --ledger http://127.0.0.1:8080 --admin-key ./scratch/keys/admin.key --clients 64 --duration 10s`,
		Flags: []cli.Flag{
			clikit.LocFlag(location.Ledger, "the server's `URL` ($CUSTODY_LEDGER)"),
			&cli.StringFlag{Name: "admin-key", Usage: "the log's admin private key file (to enroll the bench's principal)", Required: true, TakesFile: true},
			clikit.LogKeyFlag("the checkpoint verifier key (default: ask the server, trust on first use)"),
			&cli.IntFlag{Name: "clients", Value: 64, Usage: "concurrent clients, each an agent with one append in flight"},
			&cli.DurationFlag{Name: "duration", Value: 10 * time.Second, Usage: "how long to append"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			n, d := int(c.Int("clients")), c.Duration("duration")
			if n < 1 || n > 4096 {
				return clikit.Usage(c, "--clients %d: want 1..4096", n)
			}
			if d <= 0 || d > time.Hour {
				return clikit.Usage(c, "--duration %s: want more than 0 and at most 1h", d)
			}
			admin, err := keyfile.ReadPrivate(c.String("admin-key"))
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			loc, err := clikit.ResolveLocation(c)
			if err != nil {
				return err
			}
			vkey, err := clikit.OptionalLogKey(c)
			if err != nil {
				return err
			}
			cl, err := remotelog.Client(ctx, loc.Value, vkey, n)
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			res, err := bench.Serve(ctx, cl, admin, n, d)
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				return clikit.WriteJSON(w, res)
			}
			fmt.Fprintf(w, "custody bench serve: %d clients for %.1fs against %s\n", res.Clients, res.Seconds, res.Ledger)
			fmt.Fprintf(w, "appends      %d verified (denied %d, errors %d)\n", res.Appends, res.Denied, res.Errors)
			fmt.Fprintf(w, "throughput   %.0f appends/s\n", res.AppendsPerSec)
			fmt.Fprintf(w, "latency      p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", res.P50ms, res.P90ms, res.P99ms, res.Maxms)
			if res.FirstError != "" {
				fmt.Fprintf(w, "first error  %s\n", clikit.SafeText(res.FirstError))
			}
			return nil
		},
	}
}
