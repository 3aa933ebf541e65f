package gate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
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

// chainRule is an approval rule of the grant's chain, by grant.
type chainRule struct {
	grant string
	rule  scope.Rule
}

// matchedRules are the approval rules of the grant's chain that hold a
// pending receipt (DESIGN §7): its action under capabilities, its target
// and step under targets and step_ids when set, and, with above, some
// key it reserves more of. The gate computes them from the grants it
// read, not from the server's answer.
func (g *Gate) matchedRules(p *statement.ReceiptDoc) []chainRule {
	var out []chainRule
	for _, cr := range g.rules {
		r := cr.rule
		if !scope.Covers(r.Capabilities, p.Action) || (r.Targets != nil && !scope.Covers(r.Targets, p.Target)) ||
			(r.StepIDs != nil && !scope.Covers(r.StepIDs, p.StepID)) {
			continue
		}
		if r.Above != nil {
			over := false
			for k, v := range r.Above {
				if p.Reserve[k] > v {
					over = true
				}
			}
			if !over {
				continue
			}
		}
		out = append(out, cr)
	}
	return out
}

// heldMessage says who must approve a held receipt and where.
func (g *Gate) heldMessage(s *stepSpec, rec *client.Receipt, p *statement.ReceiptDoc, wait time.Duration) string {
	var who []string
	for _, r := range rec.Rules {
		who = append(who, fmt.Sprintf("%d of %s (rule %s of %s)", r.Quorum, strings.Join(r.Approvers, ", "), r.RuleID, r.Grant))
	}
	return fmt.Sprintf("custody: %s %s (target %s) is held for approval until %s: %s must approve receipt %s. They see it with `custody approvals --ledger %s` and answer with `custody approve --receipt %s --key FILE`. The call waits up to %s.",
		s.what, s.name, p.Target, rec.ExpiresAt.UTC().Format(time.RFC3339), strings.Join(who, "; "), p.ReceiptID, g.c.URL(), p.ReceiptID, wait.Round(time.Second))
}

// awaitHeld waits until every held pending receipt of a call is approved,
// and verifies each approval itself: nil means the call may run. It
// tells the agent (s.notify) who must approve and where, at once and
// then every 15 seconds, and gives up at the approval wait, at the
// receipt's deadline, on a rejection, an expiry or a close (the
// server's advisory state may end the wait, never start the call).
func (g *Gate) awaitHeld(ctx context.Context, s *stepSpec, c *call, held []*client.Receipt, pend []*statement.ReceiptDoc) *refusal {
	wait := g.approvalWait
	giveUp := time.Now().Add(wait)
	for i, rec := range held {
		p := pend[i]
		msg := g.heldMessage(s, rec, p, wait)
		g.log.Warn("held for approval", s.what, s.name, "receipt", p.ReceiptID, "target", p.Target, "expires_at", rec.ExpiresAt.UTC().Format(time.RFC3339), "message", msg)
		if s.notify != nil {
			s.notify(msg)
		}
		lastNote := time.Now()
		for {
			now := time.Now()
			if !now.Before(rec.ExpiresAt) {
				return &refusal{CodeApprovalExpired, fmt.Sprintf("receipt %s was not approved before its deadline %s; the call did not run", p.ReceiptID, rec.ExpiresAt.UTC().Format(time.RFC3339))}
			}
			if !now.Before(giveUp) {
				return &refusal{CodeApprovalTimeout, fmt.Sprintf("receipt %s was not approved within the gate's approval wait (%s); the call did not run (it stays held until %s: retry the call once it is approved)", p.ReceiptID, wait, rec.ExpiresAt.UTC().Format(time.RFC3339))}
			}
			poll := min(giveUp.Sub(now), rec.ExpiresAt.Sub(now), 15*time.Second)
			st, err := g.c.ApprovalState(ctx, p.ReceiptID, max(int(poll/time.Millisecond), 1))
			if ctx.Err() != nil {
				var stopped *client.StoppedError
				if errors.As(context.Cause(ctx), &stopped) {
					return &refusal{CodeApprovalClosed, stopped.Error() + "; the held call did not run"}
				}
				return &refusal{CodeCancelled, "the agent cancelled the call while it was held for approval"}
			}
			if err != nil {
				g.log.Warn("asking the approval state", "receipt", p.ReceiptID, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			switch st.State {
			case "approved":
				if err := g.verifyApproved(ctx, rec, p); err != nil {
					return &refusal{CodeUnavailable, fmt.Sprintf("receipt %s: the server says approved, but the gate could not verify the approvals itself, so the call did not run: %v", p.ReceiptID, err)}
				}
			case "rejected":
				return &refusal{CodeApprovalRejected, fmt.Sprintf("receipt %s was rejected%s; the call did not run", p.ReceiptID, approvers(st.Approvals, "reject", st.Reason))}
			case "expired":
				return &refusal{CodeApprovalExpired, fmt.Sprintf("receipt %s expired before enough approvals%s; the call did not run", p.ReceiptID, approvers(st.Approvals, "approve", st.Reason))}
			case "closed":
				return &refusal{CodeApprovalClosed, fmt.Sprintf("receipt %s was closed (a STOP or a REVOKE)%s; the call did not run", p.ReceiptID, approvers(nil, "", st.Reason))}
			default: // held
				if s.notify != nil && time.Since(lastNote) >= 15*time.Second {
					s.notify(fmt.Sprintf("custody: still waiting for the approval of receipt %s (%s left)", p.ReceiptID, time.Until(giveUp).Round(time.Second)))
					lastNote = time.Now()
				}
				continue
			}
			break
		}
	}
	// Immediately before running: no STOP the gate knows of covers it,
	// and no deadline has passed (the ledger refuses nothing here: the
	// receipts are logged; the event stream cancels the call on a STOP).
	g.mu.Lock()
	for _, st := range g.stops {
		if c.covers(st) {
			g.mu.Unlock()
			return &refusal{CodeApprovalClosed, fmt.Sprintf("STOP %s covers the step: %s; the call did not run", st.RequestID, st.Reason)}
		}
	}
	g.mu.Unlock()
	for _, rec := range held {
		if !time.Now().Before(rec.ExpiresAt) {
			return &refusal{CodeApprovalExpired, "the deadline passed while the approvals were verified; the call did not run"}
		}
	}
	return nil
}

func approvers(items []api.ApprovalItem, decision, reason string) string {
	var names []string
	for _, a := range items {
		if decision == "" || a.Decision == decision {
			names = append(names, a.Actor)
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

// verifyApproved checks, from a bundle of the workflow the gate verifies
// offline (signatures, inclusion under a checkpoint, the ledger's
// decisions re-run, APPROVALs included), that the held receipt has, for
// every rule that matches it (computed from the grants the gate read,
// and any the server named), quorum distinct approving principals its
// approvers cover, each APPROVAL naming the receipt's exact payload
// (receipt_sha256), and no rejection.
func (g *Gate) verifyApproved(ctx context.Context, rec *client.Receipt, p *statement.ReceiptDoc) error {
	b, _, err := g.c.VerifyBundle(ctx, p.ReceiptID, true)
	if err != nil {
		return err
	}
	var payload []byte
	approvedBy := map[string]bool{}
	for _, be := range b.Entries {
		leaf, err := base64.StdEncoding.DecodeString(be.Leaf)
		if err != nil {
			return err
		}
		l, _, err := statement.ParseLeaf(leaf)
		if err != nil {
			return err
		}
		env, err := sign.ParseEnvelope(l.Envelope)
		if err != nil {
			return err
		}
		kind, ok := statement.KindOfPayloadType(env.PayloadType)
		if !ok {
			continue
		}
		switch kind {
		case statement.Receipt:
			if statement.PeekID(kind, env.Payload) == p.ReceiptID {
				payload = env.Payload
			}
		case statement.Approval:
			st, err := statement.Parse(kind, env.Payload)
			if err != nil {
				return err
			}
			a := st.(*statement.ApprovalDoc)
			if a.ReceiptRef != p.ReceiptID {
				continue
			}
			if payload == nil || a.ReceiptSHA256 != client.ReceiptSHA256(payload) {
				return fmt.Errorf("APPROVAL %s names other bytes than receipt %s", a.ApprovalID, p.ReceiptID)
			}
			if a.Decision != "approve" {
				return fmt.Errorf("APPROVAL %s by %s rejects receipt %s", a.ApprovalID, a.Actor, p.ReceiptID)
			}
			approvedBy[a.Actor] = true
		}
	}
	if payload == nil {
		return fmt.Errorf("the verified bundle lacks receipt %s", p.ReceiptID)
	}
	rules := g.matchedRules(p)
	for _, hr := range rec.Rules {
		if !slices.ContainsFunc(rules, func(cr chainRule) bool { return cr.grant == hr.Grant && cr.rule.RuleID == hr.RuleID }) {
			for _, cr := range g.rules {
				if cr.grant == hr.Grant && cr.rule.RuleID == hr.RuleID {
					rules = append(rules, cr)
				}
			}
		}
	}
	if len(rules) == 0 {
		return errors.New("no approval rule of the grant's chain matches the receipt, yet it was held")
	}
	for _, cr := range rules {
		n := int64(0)
		for name := range approvedBy {
			if scope.Covers(cr.rule.Approvers, name) {
				n++
			}
		}
		if n < cr.rule.Quorum {
			return fmt.Errorf("rule %s of %s: %d of %d approvals", cr.rule.RuleID, cr.grant, n, cr.rule.Quorum)
		}
	}
	return nil
}
