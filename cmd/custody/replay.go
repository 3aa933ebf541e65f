package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/durable"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/verifycli"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/replay"
	"github.com/custodylog/custody/verify"
)

func init() { register(replayCommand) }

// workflowSource yields a workflow's bundle and the verifier key to check
// it with. Replay trusts neither: replay.Build verifies the bundle. New
// sources (a remote ledger) plug in here.
type workflowSource interface {
	// Bundle returns the bundle of workflow wf (all its entries and the
	// trust chain they rest on) and the log's verifier key.
	Bundle(ctx context.Context, wf string) (*verify.Bundle, string, error)
	Close() error
}

// localSource reads a workflow from a ledger's data folder.
type localSource struct{ l *ledger.Ledger }

func (s localSource) Bundle(_ context.Context, wf string) (*verify.Bundle, string, error) {
	idx, err := s.l.WorkflowIndexes(wf)
	if err != nil {
		return nil, "", err
	}
	b, err := s.l.Prove(idx[len(idx)-1], true)
	if err != nil {
		return nil, "", fmt.Errorf("building the bundle of workflow %q: %w", wf, err)
	}
	// The ledger's own key: the checkpoint it signed must verify under it.
	return b, s.l.VerifierKey(), nil
}

func (s localSource) Close() error { return s.l.Close() }

// fileSource is a bundle file, checked against a key the user gives.
type fileSource struct {
	path, vkey string
}

func (s fileSource) Bundle(_ context.Context, wf string) (*verify.Bundle, string, error) {
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, "", err
	}
	b, err := verify.ParseBundle(data)
	if err != nil {
		return nil, "", err
	}
	return b, s.vkey, nil
}

func (s fileSource) Close() error { return nil }

// replaySource opens where c reads the workflow from (resolveLocation).
func replaySource(c *cli.Command) (workflowSource, error) {
	loc, err := resolveLocation(c)
	if err != nil {
		return nil, err
	}
	switch loc.Kind {
	case location.Ledger:
		return remoteReplaySource(c, loc)
	case location.Bundle:
		vkey, err := verifierKeyArg(c, "log-key")
		if err != nil {
			return nil, err
		}
		return fileSource{path: loc.Value, vkey: vkey}, nil
	}
	if c.IsSet("log-key") {
		return nil, usage(c, "--log-key goes with --bundle or --ledger (the ledger at %s is checked against its own key)", loc)
	}
	l, err := openLedgerAt(c, loc, true)
	if err != nil {
		return nil, err
	}
	return localSource{l}, nil
}

// verifierKeyArg reads the log's checkpoint verifier key given as a
// flag: the key itself (<origin>+<hash>+<key>), or a file holding it or,
// after a checkpoint key rotation, the log's key set.
func verifierKeyArg(c *cli.Command, flag string) (string, error) {
	arg, from := strings.TrimSpace(c.String(flag)), "--"+flag
	if flag == "log-key" {
		arg, from = logKeyArg(c)
		arg = strings.TrimSpace(arg)
	}
	if arg == "" {
		return "", usage(c, "--%s VKEY is required: the log's checkpoint verifier key, or a file holding it", flag)
	}
	k, err := verifycli.ReadKeySet(arg)
	if err != nil {
		return "", fmt.Errorf("%s %w", from, err)
	}
	return k, nil
}

// colorOK reports whether output to w may be coloured: a terminal, and
// NO_COLOR unset (https://no-color.org).
func colorOK(w any) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f) && os.Getenv("NO_COLOR") == ""
}

func replayCommand() *cli.Command {
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
			dirFlag(),
			locFlag(location.Store, ""),
			locFlag(location.Ledger, "a custody server's `URL` to replay from, instead of a data folder (answers are checked against --log-key, or the server's own key on first use; $CUSTODY_LEDGER)"),
			locFlag(location.Bundle, "replay a workflow bundle `FILE` (custody prove --workflow) instead of a ledger"),
			&cli.StringFlag{Name: "workflow", Usage: "the workflow to replay (with --bundle: checked against the bundle's)"},
			logKeyFlag("with --bundle or --ledger: the log's checkpoint verifier key (`VKEY`), or a file holding it"),
			jsonFlag(),
			&cli.BoolFlag{Name: "dot", Usage: "print the authority tree as a Graphviz digraph"},
			&cli.StringFlag{Name: "html", Usage: "write a self-contained HTML page to `FILE` instead of the text report", TakesFile: true},
			&cli.DurationFlag{Name: "clock-warn", Value: time.Minute, Usage: "flag statements whose timestamp is further than this from their logged time"},
			policyFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			wf := c.String("workflow")
			if wf == "" && !c.IsSet("bundle") {
				return usage(c, "--workflow WF is required")
			}
			if c.Bool("json") && c.Bool("dot") {
				return usage(c, "give --json or --dot, not both")
			}
			policy, err := policyArg(c)
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
			_, fromFile := src.(fileSource)
			rep, err := replay.Build(b, vkey, replay.Options{ClockWarn: c.Duration("clock-warn"), Policy: policy, BundleFile: fromFile})
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			if wf != "" && rep.Workflow != wf {
				return fmt.Errorf("replay: the bundle holds workflow %q, not %q", safeText(rep.Workflow), safeText(wf))
			}
			if f := c.String("html"); f != "" {
				if err := writeFileAtomic(f, rep.HTML()); err != nil {
					return fmt.Errorf("replay: writing %s: %w", f, err)
				}
			}
			w := c.Root().Writer
			switch {
			case c.Bool("json"):
				err = writeJSON(w, rep)
			case c.Bool("dot"):
				_, err = w.Write(rep.DOT())
			case c.String("html") != "":
				// The page is the report asked for: one line says where
				// it is, not the whole text report again.
				state := "every entry verified"
				if !rep.Verified {
					state = "verification FAILED: the page marks what"
				}
				_, err = fmt.Fprintf(w, "wrote %s: the replay of workflow %s (%s)\n", safeText(c.String("html")), safeText(rep.Workflow), state)
			default:
				err = rep.WriteText(w, replay.TextOptions{Color: colorOK(w)})
			}
			if err != nil {
				return err
			}
			if !rep.Verified {
				return &exitErr{code: exitVerify, quiet: true}
			}
			return nil
		},
	}
}

// writeFileAtomic replaces path with data atomically and durably
// (internal/durable), so path never holds a torn file.
func writeFileAtomic(path string, data []byte) error { return durable.Replace(path, data, 0o644) }
