package auditcmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/internal/workflowbundle"
	"github.com/custodylog/custody/replay"
)

// replaySource opens where c reads the workflow from (clikit.ResolveLocation).
func replaySource(c *cli.Command) (workflowbundle.Source, error) {
	loc, err := clikit.ResolveLocation(c)
	if err != nil {
		return nil, err
	}
	switch loc.Kind {
	case location.Ledger:
		// The server is trusted for nothing: its bundle is verified as a
		// local or file bundle is.
		vkey, err := clikit.OptionalLogKey(c)
		if err != nil {
			return nil, err
		}
		cl, err := remotelog.Client(context.Background(), loc.Value, vkey, 4)
		if err != nil {
			return nil, err
		}
		return workflowbundle.Server(cl), nil
	case location.Bundle:
		vkey, err := clikit.VerifierKeyArg(c, "log-key")
		if err != nil {
			return nil, err
		}
		return workflowbundle.File(loc.Value, vkey), nil
	}
	if c.IsSet("log-key") {
		return nil, clikit.Usage(c, "--log-key goes with --bundle or --ledger (the ledger at %s is checked against its own key)", loc)
	}
	l, err := clikit.OpenLedgerAt(c, loc, true)
	if err != nil {
		return nil, err
	}
	return workflowbundle.Ledger(l), nil
}

// colorOK reports whether output to w may be coloured: a terminal, and
// NO_COLOR unset (https://no-color.org).
func colorOK(w any) bool {
	f, ok := w.(*os.File)
	return ok && clikit.IsTerminal(f) && os.Getenv("NO_COLOR") == ""
}

// ReplayCommand is `custody replay`.
func ReplayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "replay a workflow for an incident: timeline, authority tree, what needs attention",
		UsageText: "custody replay --workflow WF [--dir D | --bundle FILE --log-key VKEY] [--json | --dot] [--html FILE]",
		Description: `Replays one workflow from verified entries only. The workflow's bundle (its
whole back-link chain and the trust chain it rests on, with inclusion proofs
against the latest checkpoint) comes from the ledger in --dir, or from a
bundle file (custody prove --workflow) checked against --log-key. Every
entry is verified as custody verify does (checkpoint signature, inclusion,
back-links, signatures, and every decision re-run); anything that fails is
shown, marked FAILED, never hidden.

It prints:
  - the timeline: index, logged time, kind, actor, action → target, the
    decision, and the authority path (principal → CONFIRM → DELEGATE ... →
    signer);
  - the authority tree: each grant's scope, depth, expiry, revoked and
    stopped marks, and per limit what was reserved, consumed, charged and
    what remains; denied grant attempts hang where they were attempted;
  - what needs attention: denials (attempted escalations first), outcomes
    that consumed more than was reserved, pending receipts with no outcome,
    outcomes recorded after a STOP, and timestamps far from logged time.

--json prints the whole report, --dot the authority tree for Graphviz
(dot -Tsvg), and --html FILE writes one self-contained page (no scripts, no
external requests) to attach to an incident ticket, and prints only where
it wrote it (with --json or --dot, those too).

Exit codes: 0 ok (verified), 4 verification failed (the report is still
printed), 1 error, 2 usage, 5 unavailable (the server could not be reached).

Example:

   custody replay --dir ./custody-data --workflow wf_9f3a
   custody replay --bundle wf.bundle.json --log-key log.vkey --workflow wf_9f3a --html wf.html
   custody replay --bundle wf.bundle.json --log-key log.vkey --policy witnesses.policy
   custody replay --workflow wf_9f3a --dot | dot -Tsvg > tree.svg`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
			clikit.LocFlag(location.Ledger, "a custody server's `URL` to replay from, instead of a data folder (answers are checked against --log-key, or the server's own key on first use; $CUSTODY_LEDGER)"),
			clikit.LocFlag(location.Bundle, "replay a workflow bundle `FILE` (custody prove --workflow) instead of a ledger"),
			&cli.StringFlag{Name: "workflow", Usage: "the workflow to replay (with --bundle: checked against the bundle's)"},
			clikit.LogKeyFlag("with --bundle or --ledger: the log's checkpoint verifier key (`VKEY`), or a file holding it"),
			clikit.JSONFlag(),
			&cli.BoolFlag{Name: "dot", Usage: "print the authority tree as a Graphviz digraph"},
			&cli.StringFlag{Name: "html", Usage: "write a self-contained HTML page to `FILE` instead of the text report", TakesFile: true},
			&cli.DurationFlag{Name: "clock-warn", Value: time.Minute, Usage: "flag statements whose timestamp is further than this from their logged time"},
			clikit.PolicyFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			wf := c.String("workflow")
			if wf == "" && !c.IsSet("bundle") {
				return clikit.Usage(c, "--workflow WF is required")
			}
			if c.Bool("json") && c.Bool("dot") {
				return clikit.Usage(c, "give --json or --dot, not both")
			}
			policy, err := clikit.PolicyArg(c)
			if err != nil {
				return err
			}
			src, err := replaySource(c)
			if err != nil {
				return err
			}
			defer src.Close()
			b, vkey, err := src.Bundle(ctx, wf)
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			fromFile := workflowbundle.IsFile(src)
			rep, err := replay.Build(b, vkey, replay.Options{ClockWarn: c.Duration("clock-warn"), Policy: policy, BundleFile: fromFile})
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			if wf != "" && rep.Workflow != wf {
				return fmt.Errorf("replay: the bundle holds workflow %q, not %q", clikit.SafeText(rep.Workflow), clikit.SafeText(wf))
			}
			if f := c.String("html"); f != "" {
				if err := clikit.WriteFileAtomic(f, rep.HTML()); err != nil {
					return fmt.Errorf("replay: writing %s: %w", f, err)
				}
			}
			w := c.Root().Writer
			switch {
			case c.Bool("json"):
				err = clikit.WriteJSON(w, rep)
			case c.Bool("dot"):
				_, err = w.Write(rep.DOT())
			case c.String("html") != "":
				// The page is the report asked for: one line says where
				// it is, not the whole text report again.
				state := "every entry verified"
				if !rep.Verified {
					state = "verification FAILED: the page marks what"
				}
				_, err = fmt.Fprintf(w, "wrote %s: the replay of workflow %s (%s)\n", clikit.SafeText(c.String("html")), clikit.SafeText(rep.Workflow), state)
			default:
				err = rep.WriteText(w, replay.TextOptions{Color: colorOK(w)})
			}
			if err != nil {
				return err
			}
			if !rep.Verified {
				return &clikit.ExitError{Code: clikit.ExitVerify, Quiet: true}
			}
			return nil
		},
	}
}
