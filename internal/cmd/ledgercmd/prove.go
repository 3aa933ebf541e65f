package ledgercmd

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/verify"
)

// ProveCommand is `custody prove`.
func ProveCommand() *cli.Command {
	return &cli.Command{
		Name:      "prove",
		Usage:     "write a self-contained proof of an entry for offline verification",
		UsageText: "custody prove --dir D (--id ID | --index N) [--workflow] [--format bundle|tlog-proof] --out FILE",
		Description: `Writes a bundle: the entry, the trust chain it rests on (GENESIS and every
PRINCIPAL entry up to its trust head) and its workflow from the first entry,
each with an inclusion proof against the latest signed checkpoint. With
--workflow the bundle runs to the workflow's latest entry, so an auditor
sees everything that happened after the subject too (a REVOKE, a STOP).

An auditor checks it with nothing but the log's verifier key
(custody checkpoint --verifier-key): custody verify, or the custody-verify binary.

--format tlog-proof writes a C2SP tlog-proof of the one entry instead (its
leaf in the proof's extra data), for generic transparency-log tooling; it
proves inclusion only, not authority.

Example:

   custody prove --dir ./custody-data --id rcpt_1 --out rcpt_1.bundle.json
   custody verify rcpt_1.bundle.json --log-key "$(custody checkpoint --dir ./custody-data --verifier-key)"`,
		Flags: clikit.WithRemote(
			clikit.DirFlag(),
			&cli.Uint64Flag{Name: "index", Usage: "the entry's index"},
			&cli.StringFlag{Name: "id", Usage: "a statement id (the entry of its statement or DENIAL)"},
			&cli.BoolFlag{Name: "workflow", Usage: "include the workflow up to its latest entry, not just up to the subject"},
			&cli.StringFlag{Name: "format", Value: "bundle", Usage: "bundle or tlog-proof"},
			&cli.StringFlag{Name: "out", Usage: "the file to write (- for standard output)", Required: true},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			if c.IsSet("index") == c.IsSet("id") {
				return clikit.Usage(c, "give exactly one of --index and --id")
			}
			format := c.String("format")
			if format != "bundle" && format != "tlog-proof" {
				return clikit.Usage(c, "--format %q: use bundle or tlog-proof", format)
			}
			l, err := clikit.OpenStoreRO(ctx, c)
			if err != nil {
				return err
			}
			defer l.Close()
			index := c.Uint64("index")
			if c.IsSet("id") {
				e, err := l.EntryByID(c.String("id"))
				if err != nil {
					return fmt.Errorf("prove: %w", err)
				}
				index = e.Index
			}
			var out []byte
			if format == "tlog-proof" {
				out, err = l.TLogProof(index)
			} else {
				var b *verify.Bundle
				if b, err = l.Prove(index, c.Bool("workflow")); err == nil {
					out, err = b.Marshal()
					out = append(out, '\n')
				}
			}
			if err != nil {
				return fmt.Errorf("prove: %w", err)
			}
			if path := c.String("out"); path == "-" {
				_, err = c.Root().Writer.Write(out)
				return err
			} else if err := os.WriteFile(path, out, 0o644); err != nil {
				return fmt.Errorf("prove: %w", err)
			}
			fmt.Fprintf(c.Root().Writer, "wrote %s of entry %d (checkpoint size %d) to %s\n", format, index, l.Head().Size, c.String("out"))
			return nil
		},
	}
}
