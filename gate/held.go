package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// Reason codes of a held call that does not run (DESIGN §7; the outcome
// receipt's error starts with the code).
const (
	CodeApprovalRejected = "approval_rejected"
	CodeApprovalExpired  = "approval_expired"
	CodeApprovalClosed   = "approval_closed"
	CodeApprovalTimeout  = "approval_timeout"
)

// heldMessage says who must approve a held receipt and where.
func (g *Gate) heldMessage(s *stepSpec, rec *client.Receipt, p *statement.ReceiptDoc, wait time.Duration) string {
	var who []string
	for _, r := range rec.Rules {
		who = append(who, fmt.Sprintf("%d of %s (rule %s of %s)", r.Quorum, strings.Join(r.Approvers, ", "), r.RuleID, r.Grant))
	}
	return fmt.Sprintf("custody: %s %s (target %s) is held for approval until %s: %s must approve receipt %s. They see it with `custody approvals --ledger %s` and answer with `custody approve --receipt %s --key FILE`. The call waits up to %s.",
		s.what, s.name, p.Target, rec.ExpiresAt.UTC().Format(time.RFC3339), strings.Join(who, "; "), p.ReceiptID, g.c.URL(), p.ReceiptID, wait.Round(time.Second))
}

// awaitHeld waits until every held pending receipt of a call is
// approved, as the agent's runtime verifies it (client.AwaitApproval: a
// fresh bundle of the workflow verified offline, the decisions re-run,
// no STOP or REVOKE since, before the deadline, params_sha256 equal to
// the call's): nil means the call may run. It tells the agent (s.notify)
// who must approve and where, at once, when an approval arrives, and
// every 15 seconds, and gives up at the gate's approval wait.
func (g *Gate) awaitHeld(ctx context.Context, s *stepSpec, held []*client.Receipt, pend []*statement.ReceiptDoc) *refusal {
	wait := g.approvalWait
	giveUp := time.Now().Add(wait)
	for i, rec := range held {
		p := pend[i]
		msg := g.heldMessage(s, rec, p, wait)
		g.log.Warn("held for approval", s.what, s.name, "receipt", p.ReceiptID, "target", p.Target, "expires_at", rec.ExpiresAt.UTC().Format(time.RFC3339), "message", msg)
		notify := func(string) {}
		if s.notify != nil {
			notify = s.notify
		}
		notify(msg)
		tick := time.NewTicker(15 * time.Second)
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					notify(fmt.Sprintf("custody: still waiting for the approval of receipt %s (%s left)", p.ReceiptID, time.Until(giveUp).Round(time.Second)))
				}
			}
		}()
		var last api.ApprovalState
		_, err := g.rt.AwaitApproval(ctx, p.ReceiptID, client.AwaitOptions{Wait: max(time.Until(giveUp), time.Millisecond), ParamsSHA256: s.params,
			Progress: func(st api.ApprovalState) {
				last = st
				if len(st.Approvals) > 0 || st.State != "held" {
					notify(fmt.Sprintf("custody: receipt %s is %s%s", p.ReceiptID, st.State, approvers(st.Approvals, "", st.Reason)))
				}
			}})
		tick.Stop()
		close(done)
		if err == nil {
			continue
		}
		var stopped *client.StoppedError
		if errors.As(context.Cause(ctx), &stopped) {
			return &refusal{CodeApprovalClosed, stopped.Error() + "; the held call did not run"}
		}
		if ctx.Err() != nil {
			return &refusal{CodeCancelled, "the agent cancelled the call while it was held for approval"}
		}
		var ae *client.ApprovalError
		if errors.As(err, &ae) {
			// The server's view of who answered, for the person reading
			// it; the decision itself is the verified one.
			return &refusal{ae.Code, ae.Msg + approvers(last.Approvals, "", last.Reason) + "; the call did not run"}
		}
		return &refusal{CodeUnavailable, err.Error() + "; the call did not run"}
	}
	return nil
}

func approvers(items []api.ApprovalItem, decision, reason string) string {
	var names []string
	for _, a := range items {
		if decision == "" || a.Decision == decision {
			names = append(names, a.Actor+" ("+a.Decision+")")
		}
	}
	out := ""
	if len(names) > 0 {
		out = " by " + strings.Join(names, ", ")
	}
	if reason != "" {
		out += ": " + reason
	}
	return out
}
