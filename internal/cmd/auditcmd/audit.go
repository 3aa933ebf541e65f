// Package auditcmd holds the commands that check a log someone else runs
// or ran: audit (a whole log, every tile and decision), replay (one
// workflow, for an incident) and watch (a served log over time).
package auditcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
)

// ledgerFetcher serves a ledger's committed tiles and entry bundles in the
// tlog-tiles layout, so that an audit of a data folder reads exactly what
// an export would hold.
type ledgerFetcher struct{ l *ledger.Ledger }

func (f ledgerFetcher) Fetch(_ context.Context, path string) ([]byte, error) {
	if path == "checkpoint" {
		return f.l.Head().Checkpoint, nil
	}
	t, err := merkle.ParseTilePath(path)
	if err != nil {
		return nil, err
	}
	var data []byte
	if t.Entries {
		data, err = f.l.EntryBundle(t.Index, t.Width)
	} else {
		data, err = f.l.Tile(t.Level, t.Index, t.Width)
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	return data, err
}

// tilesFetcher reads an exported log from a folder or a URL.
func tilesFetcher(loc string) audit.Fetcher { return audit.Open(loc, "custody/"+clikit.Version()) }

// AuditCommand is `custody audit`.
func AuditCommand() *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "check a whole log: every tile, the root, every envelope and every decision",
		UsageText: "custody audit [--dir D | --tiles DIR|URL --log-key VKEY | --ledger URL] [--json]",
		Description: `Audits a whole log: the ledger in --dir, or a static export (custody export)
in a folder or at a URL given with --tiles, which needs no database.

  - the checkpoint's signature against the log key (the ledger's own, or
    --log-key);
  - every hash tile and the root, recomputed from the leaves and compared
    with the stored tiles and the checkpoint;
  - every decision re-run from GENESIS with the ledger's decision function:
    every envelope's signature, an accepted statement that should have
    been denied, a DENIAL that was not justified, back-links, trust heads,
    acceptance times, each key's seq across the whole log and the
    uniqueness of every id (what a bundle cannot show);
  - for a ledger, the stored authority state against the state the replay
    derives, record by record.

It keeps going after a finding and reports them all, each naming the
entry, tile or record. After a decision finding the replay stops (the
engine's state is then unspecified) but the tree and envelope checks go
on. Outcomes above their reserve and pending receipts with no outcome are
listed as flags: the ledger accepts them by design.

A progress line with rate and ETA is drawn on standard error when it is a
terminal.

Exit codes: 0 ok (clean), 4 verification failed (findings), 1 error, 2 usage,
5 unavailable (the server or database could not be reached).

Example:

   custody audit --dir ./custody-data
   custody export --dir ./custody-data --tiles ./public/log
   custody audit --tiles ./public/log --log-key "$(custody checkpoint --dir ./custody-data --verifier-key)"`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
			clikit.LocFlag(location.Tiles, "audit an exported log in this `FOLDER` (or at this http(s) URL) instead of a ledger"),
			clikit.LocFlag(location.Ledger, "audit the tiles a custody server at this `URL` serves ($CUSTODY_LEDGER)"),
			clikit.LogKeyFlag("the log's checkpoint verifier key (`VKEY`), or a file holding it; required with --tiles, and with --ledger the server's own is used on first use"),
			&cli.IntFlag{Name: "max-flags", Value: 100, Usage: "list at most this many flags (all are counted)"},
			clikit.PolicyFlag(),
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			policy, err := clikit.PolicyArg(c)
			if err != nil {
				return err
			}
			opts := audit.Options{MaxFlags: int(c.Int("max-flags")), Policy: policy}
			var fetcher audit.Fetcher
			loc, err := clikit.ResolveLocation(c)
			if err != nil {
				return err
			}
			switch loc.Kind {
			case location.Tiles:
				vkey, err := clikit.VerifierKeyArg(c, "log-key")
				if err != nil {
					return err
				}
				opts.VerifierKey, fetcher = vkey, tilesFetcher(loc.Value)
			case location.Ledger:
				vkey, err := clikit.OptionalLogKey(c)
				if err != nil {
					return err
				}
				cl, err := remotelog.Client(ctx, loc.Value, vkey, 4)
				if err != nil {
					return fmt.Errorf("audit: %w", err)
				}
				opts.VerifierKey, fetcher = cl.VerifierKey(), tilesFetcher(loc.Value)
			default:
				if policy != nil {
					return clikit.Usage(c, "--policy goes with --tiles or --ledger: a ledger's data folder keeps no witness cosignatures (a server gathers them as it serves)")
				}
				l, err := clikit.OpenLedgerAt(c, loc, true)
				if err != nil {
					if errors.Is(err, ledger.ErrLocked) {
						return fmt.Errorf("audit: %w; if a server (custody serve) holds it, audit what it serves: custody audit --ledger http://HOST:PORT, or --tiles http://HOST:PORT --log-key VKEY", err)
					}
					if errors.Is(err, ledger.ErrDamaged) || errors.Is(err, ledger.ErrRolledBack) {
						return &clikit.ExitError{Code: clikit.ExitVerify, Err: fmt.Errorf("audit: %w", err)}
					}
					return err
				}
				defer l.Close()
				opts.VerifierKey = l.VerifierKey()
				if c.IsSet("log-key") {
					if opts.VerifierKey, err = clikit.VerifierKeyArg(c, "log-key"); err != nil {
						return err
					}
				}
				if d := l.Damage(); d != nil {
					return &clikit.ExitError{Code: clikit.ExitVerify, Err: fmt.Errorf("audit: %w", d)}
				}
				head := l.Head()
				if head.Checkpoint == nil {
					return fmt.Errorf("audit: the ledger has no checkpoint yet")
				}
				opts.Checkpoint, opts.State, fetcher = head.Checkpoint, l.StateRecords, ledgerFetcher{l}
			}
			stderr := c.Root().ErrWriter
			var bar *clikit.Progress
			if clikit.IsTerminal(stderr) {
				bar = &clikit.Progress{W: stderr}
				start := time.Now()
				opts.Progress = func(done, total uint64) {
					bar.Show(done == total, "%s", audit.ProgressLine(done, total, time.Since(start)))
				}
			}
			rep, err := audit.Run(ctx, fetcher, opts)
			bar.Clear()
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				err = clikit.WriteJSON(w, rep)
			} else {
				err = rep.WriteText(w)
			}
			if err != nil {
				return err
			}
			if !rep.Clean() {
				return &clikit.ExitError{Code: clikit.ExitVerify, Quiet: true}
			}
			return nil
		},
	}
}
