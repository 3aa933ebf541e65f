package auditcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/witness"
)

// WatchCommand is `custody watch`.
func WatchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "monitor a served log: alert on a split view, a rollback or an inconsistent extension",
		UsageText: "custody watch --ledger URL --log-key VKEY --state FILE [--interval D] [--json]",
		Description: `A monitor. Fetches the log's checkpoint (URL/checkpoint, C2SP
tlog-checkpoint), checks its signature with --log-key, and checks it against
the last checkpoint kept in --state: a larger tree must extend it, which
watch proves itself with a consistency proof computed from the served tiles
(URL/tile/...), so it works against any static export (custody export)
behind any web server, or a custody server.

On a split view (same size, different root), a rollback (smaller size), an
inconsistent extension, a checkpoint that does not verify, or tiles that do
not hash to the checkpoint's root, it prints an ALERT with both checkpoints
and exits 4, leaving --state as it was (the evidence). Otherwise it replaces
--state atomically with the new checkpoint and exits 0. The first run keeps
the checkpoint it sees, after recomputing its root from the tiles.

With --policy FILE (a witness policy) the checkpoint must also carry its
quorum's cosignatures, and watch names the witnesses that cosigned. When
the newest checkpoint has not gathered them yet, watch checks the newest
witnessed one a custody server serves (URL/v1/checkpoint/witnessed)
instead; a checkpoint that does not meet the policy is reported NOT
WITNESSED and not kept (exit 4 when looking once; looked at again at the
next interval).

With --interval it keeps watching: it looks again every interval, prints a
line when the log changes, and exits 4 at the first alert; a failed fetch is
reported and retried at the next interval.

Example:

   custody watch --ledger https://log.example.com/custody --log-key log.vkey --state ./monitor.checkpoint
   custody watch --ledger http://localhost:8080 --log-key log.vkey --state ./cp --interval 1m`,
		Flags: []cli.Flag{
			clikit.LocFlag(location.Ledger, "the log's base `URL` (…/checkpoint and …/tile/… below it; $CUSTODY_LEDGER)"),
			clikit.LogKeyFlag("the log's checkpoint verifier key (`VKEY`), or a file holding it"),
			&cli.StringFlag{Name: "state", Usage: "the `FILE` holding the last checkpoint seen (created on the first run)", TakesFile: true},
			&cli.DurationFlag{Name: "interval", Usage: "keep watching, looking again every interval (0: look once)"},
			clikit.PolicyFlag(),
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			loc, err := clikit.ResolveNoArgs(c)
			if err != nil {
				return err
			}
			url, state := loc.Value, c.String("state")
			if state == "" {
				return clikit.Usage(c, "--state FILE is required")
			}
			if c.Duration("interval") < 0 {
				return clikit.Usage(c, "--interval must not be negative")
			}
			vkey, err := clikit.VerifierKeyArg(c, "log-key")
			if err != nil {
				return err
			}
			policy, err := clikit.PolicyArg(c)
			if err != nil {
				return err
			}
			f := tilesFetcher(url)
			interval := c.Duration("interval")
			if interval > 0 {
				fmt.Fprintf(c.Root().ErrWriter, "%s custody watch: watching %s every %s (state %s)\n",
					time.Now().UTC().Format(time.RFC3339), clikit.SafeText(url), interval, state)
			}
			for {
				res, err := watchOnce(ctx, c, f, vkey, state, policy)
				switch {
				case err != nil && interval == 0:
					return fmt.Errorf("watch: %w", err)
				case err != nil:
					fmt.Fprintf(c.Root().ErrWriter, "%s custody watch: %s (retrying in %s)\n", time.Now().UTC().Format(time.RFC3339), clikit.OneLine(err.Error()), interval)
				case res.Alert:
					return &clikit.ExitError{Code: clikit.ExitVerify, Quiet: true}
				case res.Outcome == audit.WatchUnwitnessed && interval == 0:
					return &clikit.ExitError{Code: clikit.ExitVerify, Quiet: true}
				}
				if interval == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
}

// watchOnce looks once, prints what it saw, and keeps the new checkpoint
// unless it alerted.
func watchOnce(ctx context.Context, c *cli.Command, f audit.Fetcher, vkey, state string, policy *witness.Policy) (*audit.WatchResult, error) {
	old, err := os.ReadFile(state)
	if errors.Is(err, fs.ErrNotExist) {
		old = nil
	} else if err != nil {
		return nil, fmt.Errorf("reading --state: %w", err)
	}
	res, ev, err := audit.WatchWitnessed(ctx, f, vkey, old, policy)
	if err != nil {
		return nil, err
	}
	if res.Keep != nil && (old == nil || string(old) != string(res.Keep)) {
		if err := clikit.WriteFileAtomic(state, res.Keep); err != nil {
			return nil, fmt.Errorf("updating --state: %w", err)
		}
	}
	w := c.Root().Writer
	if c.Bool("json") {
		out := struct {
			*audit.WatchResult
			Time             string              `json:"time"`
			KeptCheckpoint   string              `json:"kept_checkpoint,omitempty"`
			ServedCheckpoint string              `json:"served_checkpoint"`
			Witnesses        *witness.Evaluation `json:"witnesses,omitempty"`
		}{res, time.Now().UTC().Format(time.RFC3339), string(old), string(res.Checkpoint), ev}
		return res, clikit.WriteJSON(w, out)
	}
	stamp := time.Now().UTC().Format(time.RFC3339)
	if res.Outcome == audit.WatchUnwitnessed {
		fmt.Fprintf(w, "%s NOT WITNESSED: %s (%s left unchanged)\n", stamp, textsafe.Text(res.Detail), state)
		return res, nil
	}
	if !res.Alert {
		if res.Outcome != audit.WatchUnchanged || c.Duration("interval") == 0 {
			fmt.Fprintf(w, "%s ok: %s\n", stamp, textsafe.Text(res.Detail))
		}
		return res, nil
	}
	fmt.Fprintf(w, "%s ALERT %s: %s\n", stamp, res.Outcome, textsafe.Text(res.Detail))
	if old != nil {
		fmt.Fprintf(w, "\nkept checkpoint (%s):\n%s", state, noteText(old))
	}
	fmt.Fprintf(w, "served checkpoint:\n%s", noteText(res.Checkpoint))
	fmt.Fprintf(w, "Both are signed by the log key: keep them as evidence. %s was left unchanged.\n", state)
	return res, nil
}

// noteText prints a signed note (a checkpoint) as the multi-line text it
// is, each line escaped for the terminal, ending in a newline.
func noteText(note []byte) string {
	lines := strings.Split(strings.TrimSuffix(string(note), "\n"), "\n")
	for i, l := range lines {
		lines[i] = textsafe.Text(l)
	}
	return strings.Join(lines, "\n") + "\n"
}
