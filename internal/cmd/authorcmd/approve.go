package authorcmd

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// ApproveCommand is `custody approve`.
func ApproveCommand() *cli.Command {
	flags := append(authorFlags("key", "the approver's private key file (an enrolled principal a rule names)"),
		&cli.StringFlag{Name: "receipt", Usage: "the id of the held pending receipt", Required: true},
		&cli.BoolFlag{Name: "reject", Usage: "reject it instead (one eligible reject ends the request)"},
		&cli.StringFlag{Name: "reason", Usage: "why, for the record (free text)"},
	)
	return &cli.Command{
		Name:      "approve",
		Usage:     "approve or reject a held step (as a principal an approval rule names)",
		UsageText: "custody approve --dir D --key K --receipt ID [--reject] [--reason TEXT] [--json]",
		Description: `Appends an APPROVAL of the held pending receipt ID: a yes (or with --reject
a no) to exactly the bytes of that receipt, named by their SHA-256. Prints the
step being approved first (action, target, step, reserve, params_sha256, and
the agent's name: any free text in it is the agent's). Exits 0 when the
ledger accepted the APPROVAL and 3 when it denied it: not_approver (no rule
holding the receipt names you, or you were enrolled after it was held),
not_held (already decided, expired or closed), approval_expired,
duplicate_approval, approval_mismatch.

Example:

   custody approve --ledger https://custody.example --key bob.key --receipt receipt_7f3a`,
		Flags: flags,
		Action: authorAction("key", func(ctx context.Context, c *cli.Command, a *authoring) error {
			e, err := a.Entry("--receipt", c.String("receipt"), statement.Receipt)
			if err != nil {
				return err
			}
			r := e.Statement.(*statement.ReceiptDoc)
			if !r.IsPending() {
				return fmt.Errorf("--receipt %s is an outcome receipt, not a pending one", r.ReceiptID)
			}
			decision := statement.DecisionApprove
			if c.Bool("reject") {
				decision = statement.DecisionReject
			}
			w := c.Root().ErrWriter
			fmt.Fprintf(w, "%s: receipt %s (index %d) by %s: %s on %s, step %s, reserve %s",
				decision, clikit.SafeText(r.ReceiptID), e.Index, clikit.SafeText(r.Actor), clikit.SafeText(r.Action), clikit.SafeText(r.Target), clikit.SafeText(r.StepID), amounts(r.Reserve))
			if r.ParamsSHA256 != "" {
				fmt.Fprintf(w, ", params_sha256 %s", r.ParamsSHA256)
			}
			fmt.Fprintln(w)
			return a.sign(ctx, statement.Approval, func(h statement.Header) statement.Statement {
				return &statement.ApprovalDoc{Header: h, ApprovalID: a.id("approval"), Workflow: r.Workflow,
					ReceiptRef: r.ReceiptID, ReceiptSHA256: client.ReceiptSHA256(e.Envelope.Payload), Decision: decision, Reason: c.String("reason")}
			})
		}),
	}
}

// amounts prints a reserve map in key order.
func amounts(m map[string]int64) string {
	if len(m) == 0 {
		return "nothing"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", clikit.SafeText(k), m[k])
	}
	return strings.Join(parts, " ")
}

// ApprovalsCommand is `custody approvals`.
func ApprovalsCommand() *cli.Command {
	return &cli.Command{
		Name:      "approvals",
		Usage:     "list the steps held for approval now",
		UsageText: "custody approvals --dir D [--approver NAME] [--workflow ID] [--json]",
		Description: `Lists the pending receipts approval rules hold now: for each, the exact
step (action, target, step, reserve, params_sha256, the agent who wrote it),
the chain of grants above it, each rule it waits for (who may approve, how
many must, who has so far) and its deadline. --approver NAME keeps those NAME
may approve. This is the ledger's view, for people; a runtime verifies
approvals itself before it runs a step.

Example:

   custody approvals --ledger https://custody.example --approver user:bob`,
		Flags: clikit.WithRemote(clikit.DirFlag(),
			&cli.StringFlag{Name: "approver", Usage: "only receipts this principal name may approve"},
			&cli.StringFlag{Name: "workflow", Usage: "only receipts of this workflow"},
			clikit.JSONFlag()),
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			l, err := clikit.OpenStoreRO(ctx, c)
			if err != nil {
				return err
			}
			defer l.Close()
			list, err := heldList(ctx, l, c.String("approver"), c.String("workflow"))
			if err != nil {
				return fmt.Errorf("approvals: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				return clikit.WriteJSON(w, list)
			}
			if len(list.Held) == 0 {
				fmt.Fprintln(w, "nothing is held for approval")
				return nil
			}
			for _, h := range list.Held {
				fmt.Fprintf(w, "%s (index %d, workflow %s) by %s: %s on %s, step %s, reserve %s\n", clikit.SafeText(h.ReceiptID), h.Index,
					clikit.SafeText(h.WorkflowID), clikit.SafeText(h.Actor), clikit.SafeText(h.Action), clikit.SafeText(h.Target), clikit.SafeText(h.StepID), amounts(h.Reserve))
				if h.ParamsSHA256 != "" {
					fmt.Fprintf(w, "  params_sha256 %s\n", h.ParamsSHA256)
				}
				fmt.Fprintf(w, "  until %s; grants %s\n", h.ExpiresAt, clikit.SafeText(strings.Join(h.Chain, " > ")))
				for _, r := range h.Rules {
					fmt.Fprintf(w, "  needs %d of %s (rule %s of %s)", r.Quorum, clikit.SafeText(strings.Join(r.Approvers, ", ")), clikit.SafeText(r.RuleID), clikit.SafeText(r.Grant))
					if len(r.ApprovedBy) > 0 {
						fmt.Fprintf(w, "; approved by %s", clikit.SafeText(strings.Join(r.ApprovedBy, ", ")))
					}
					fmt.Fprintln(w)
				}
			}
			return nil
		},
	}
}

// heldList lists held receipts from a data folder, a store or a server.
func heldList(ctx context.Context, l clikit.LogStore, approver, wf string) (*api.HeldList, error) {
	switch s := l.(type) {
	case *remotelog.Log:
		return s.Client().Approvals(ctx, approver, wf)
	case *ledger.Ledger:
		return server.HeldList(s, approver, wf)
	}
	return nil, fmt.Errorf("this log location cannot list held receipts")
}
