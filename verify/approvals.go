package verify

import (
	"fmt"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// approvalsCheck reports, for each pending receipt of the bundle that an
// approval rule held, what the re-run decisions say became of it (DESIGN
// §6: the verifier re-runs approvals): approved by whom, rejected,
// expired, closed, or still held at the bundle's last entry. ok is false
// when the bundle holds no held receipt.
func approvalsCheck(e *authority.Engine, entries []*entry) (Check, bool) {
	c := Check{Name: "approvals re-run", OK: true}
	var last time.Time
	for _, en := range entries {
		if en.leaf != nil {
			if t, err := statement.ParseLoggedAt(en.leaf.LoggedAt); err == nil && t.After(last) {
				last = t
			}
		}
	}
	n := 0
	for _, en := range entries {
		if en.kind != statement.Receipt {
			continue
		}
		p := e.Pending(en.id)
		if p == nil || p.Hold == nil || p.Index != en.index {
			continue
		}
		n++
		state, why := e.HoldState(p, last)
		detail := state
		if why != "" {
			detail += ": " + why
		}
		if state == authority.HoldApproved {
			var who []string
			for _, r := range p.Hold.Rules {
				who = append(who, fmt.Sprintf("rule %s of %s by %v", r.RuleID, r.Grant, r.ApprovedBy))
			}
			detail += fmt.Sprintf(" (%v)", who)
		}
		c.Checks = append(c.Checks, Check{Name: fmt.Sprintf("#%d held %s", en.index, en.id), OK: true, Index: idx(en.index), Detail: detail})
	}
	if n == 0 {
		return c, false
	}
	c.Detail = fmt.Sprintf("%d held receipts; every APPROVAL re-checked by the decision function (signer, rule, bytes, deadline, quorum)", n)
	return c, true
}
