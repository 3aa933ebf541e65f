package authority

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"time"

	"fmt"
	"slices"
	"strings"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/statement"
)

// Codes of DESIGN §4 step 9 and §7.
const (
	NotApprover       Code = "not_approver"
	ApprovalMismatch  Code = "approval_mismatch"
	NotHeld           Code = "not_held"
	ApprovalExpired   Code = "approval_expired"
	DuplicateApproval Code = "duplicate_approval"
)

// WorkflowApproversRec lists the distinct approver patterns of every rule
// accepted in a workflow, so that a DENIAL of a statement signed by a
// person a rule names joins the workflow's chain (DESIGN §4). It grows
// with the workflow's distinct patterns only. Record key: prefWFAppr.
type WorkflowApproversRec struct {
	Patterns []string `json:"patterns,omitempty"`
}

const prefWFAppr = "wfappr/"

// checkRules checks a new grant's approval rules against its chain
// (DESIGN §7): every key of a rule's above must be a limit in force on
// the chain (the grant's own limits and its ancestors'), and a DELEGATE's
// rules may name only approvers that some ancestor rule's approvers cover,
// or the workflow's owner. ancestors is empty for a CONFIRM.
func (c *check) checkRules(rules []scope.Rule, own map[string]int64, ancestors []*GrantRec, ownerName string) {
	if len(rules) == 0 {
		return
	}
	for _, r := range rules {
		for _, k := range sortedKeys(r.Above) {
			if _, ok := own[k]; ok {
				continue
			}
			found := false
			for _, g := range ancestors {
				if _, ok := g.Descriptor.Limits[k]; ok {
					found = true
					break
				}
			}
			if !found {
				c.deny(SchemaInvalid, "approval rule %q: above names %q, which is not a limit in force on the grant's chain", r.RuleID, k)
				return
			}
		}
	}
	if len(ancestors) == 0 {
		return
	}
	ds := make([]scope.Descriptor, len(ancestors))
	for i, g := range ancestors {
		ds[i] = g.Descriptor
	}
	if err := scope.CheckApprovers(rules, ds, ownerName); err != nil {
		c.deny(Widening, "%s", scopeMsg(err))
	}
}

// noteApprovers adds a new grant's approver patterns to its workflow's
// record.
func (e *Engine) noteApprovers(wf string, rules []scope.Rule) {
	if len(rules) == 0 {
		return
	}
	old := get[WorkflowApproversRec](e.st, prefWFAppr+wf)
	rec := &WorkflowApproversRec{}
	if old != nil {
		rec.Patterns = slices.Clone(old.Patterns)
	}
	changed := false
	for _, r := range rules {
		for _, p := range r.Approvers {
			if !slices.Contains(rec.Patterns, p) {
				rec.Patterns = append(rec.Patterns, p)
				changed = true
			}
		}
	}
	if changed {
		slices.Sort(rec.Patterns)
		put(e.st, prefWFAppr+wf, rec)
	}
}

// namedApprover reports whether a rule accepted in the workflow names the
// key's bound name among its approvers.
func (e *Engine) namedApprover(keyID, wf string) bool {
	rec := get[WorkflowApproversRec](e.st, prefWFAppr+wf)
	if rec == nil {
		return false
	}
	k := e.Key(keyID)
	if k == nil || k.Role != RolePrincipal {
		return false
	}
	for _, p := range rec.Patterns {
		if scope.Match(p, k.Name) {
			return true
		}
	}
	return false
}

// rulesInForce lists the rules in force on a chain, g first: its own and
// every ancestor's, each named by its grant.
func rulesInForce(chain []*GrantRec) []NamedRule {
	var out []NamedRule
	for _, g := range chain {
		for i := range g.Descriptor.Approvals {
			out = append(out, NamedRule{Grant: g.ID, Rule: &g.Descriptor.Approvals[i]})
		}
	}
	return out
}

// NamedRule is a rule and the grant that carries it.
type NamedRule struct {
	Grant string
	Rule  *scope.Rule
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ",") + "]"
}

var _ = statement.Approval

// HoldRec is what a pending receipt that an approval rule held carries
// (DESIGN §7). State "" means held: whether it has since expired or been
// closed is derived from the log (HoldState), never stored ahead of time.
type HoldRec struct {
	SHA256    string     `json:"sha256"`     // of the receipt's payload bytes
	LoggedAt  string     `json:"logged_at"`  // when it was held
	TrustHead uint64     `json:"trust_head"` // approvers enrolled after it do not count
	Deadline  string     `json:"deadline"`   // logged_at format
	ByGrant   bool       `json:"by_grant,omitempty"`
	Rules     []HoldRule `json:"rules"`
	State     string     `json:"state,omitempty"` // "", approved, rejected
	DecidedAt uint64     `json:"decided_at,omitempty"`
	DecidedBy string     `json:"decided_by,omitempty"` // approval_id that decided
	Answered  []string   `json:"answered,omitempty"`   // names that answered, in log order
	Released  bool       `json:"released,omitempty"`   // reservation given back
	// Prev and Next link the receipts on the log's list of held receipts
	// (HoldListRec), oldest first, while they may still be held.
	Prev string `json:"prev,omitempty"`
	Next string `json:"next,omitempty"`
	Off  bool   `json:"off,omitempty"` // taken off the list
}

// HoldRule is one matched rule of a held receipt and who has approved
// under it so far.
type HoldRule struct {
	Grant      string   `json:"grant"`
	RuleID     string   `json:"rule_id"`
	Approvers  []string `json:"approvers"`
	Quorum     int64    `json:"quorum"`
	ApprovedBy []string `json:"approved_by,omitempty"`
}

// HoldListRec heads the list of receipts that may still be held, oldest
// first. Record key: keyHoldList.
type HoldListRec struct {
	First string `json:"first,omitempty"`
	Last  string `json:"last,omitempty"`
	Count int64  `json:"count,omitempty"`
}

// StopMarkRec is the latest STOP accepted on one scope of a workflow
// (chain or one step), lifted or not: a receipt held before it is closed
// (DESIGN §7), and a RESUME does not revive it. Record key: stopMarkKey.
type StopMarkRec struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	At    string `json:"at"`
}

const (
	keyHoldList  = "holdlist"
	prefStopMark = "stopmark/"
	// MaxOnHold bounds the receipts that may be held at once under one
	// grant with limits, so that deciding a receipt under it (which looks
	// at each to see whether its reservation has been released) stays
	// bounded.
	MaxOnHold = 256
)

func stopMarkKey(wf, step string) string { return prefStopMark + wf + "#" + step }

// Hold states.
const (
	HoldHeld     = "held"
	HoldApproved = "approved"
	HoldRejected = "rejected"
	HoldExpired  = "expired"
	HoldClosed   = "closed"
)

// HoldInfo is what a held decision reports: the deadline and the
// matched rules.
type HoldInfo struct {
	ExpiresAt time.Time
	Rules     []HoldRule
}

// HoldState derives the state of a held receipt at time at (DESIGN §7)
// from the log's order and logged_at alone: approved or rejected once an
// APPROVAL decided it; closed when a STOP covering its step, a REVOKE or a
// retirement on its chain, or the expiry of a grant on its chain landed
// first; expired once its deadline passed. why names what decided it.
func (e *Engine) HoldState(p *PendingRec, at time.Time) (state, why string) {
	h := p.Hold
	if h == nil {
		return "", ""
	}
	switch h.State {
	case HoldApproved:
		return HoldApproved, fmt.Sprintf("approved by %s at index %d", h.DecidedBy, h.DecidedAt)
	case HoldRejected:
		return HoldRejected, fmt.Sprintf("rejected by %s at index %d", h.DecidedBy, h.DecidedAt)
	}
	deadline, _ := statement.ParseLoggedAt(h.Deadline)
	if tc, what, ok := e.closedAt(p); ok && tc.Before(deadline) {
		return HoldClosed, what
	}
	if !at.Before(deadline) {
		if h.ByGrant {
			return HoldClosed, fmt.Sprintf("a grant on its chain expired at %s before it was approved", h.Deadline)
		}
		return HoldExpired, fmt.Sprintf("its deadline %s passed before it was approved", h.Deadline)
	}
	return HoldHeld, ""
}

// closedAt finds the earliest event after the receipt was held that
// closes it: a REVOKE of a grant on its chain, the retirement of the
// principal at its top, or a STOP covering its step (the latest on each
// scope; a RESUME does not revive the receipt). The cost is the chain
// plus the step's segments.
func (e *Engine) closedAt(p *PendingRec) (time.Time, string, bool) {
	var first time.Time
	what, found := "", false
	consider := func(s string, w string) {
		t, err := statement.ParseLoggedAt(s)
		if err != nil {
			return
		}
		if !found || t.Before(first) {
			first, what, found = t, w, true
		}
	}
	g := e.Grant(p.Grant)
	if g == nil {
		return first, what, false
	}
	chain := e.chain(g)
	for _, cg := range chain {
		if cg.Revoked {
			consider(cg.RevokedAt, fmt.Sprintf("grant %s on its chain was revoked by %s at %s", cg.ID, cg.RevokedBy, cg.RevokedAt))
		}
	}
	if k := e.Key(chain[len(chain)-1].RootKey); k != nil && k.Retired {
		consider(k.RetiredAt, fmt.Sprintf("principal %q at the top of its chain was retired at %s", k.Name, k.RetiredAt))
	}
	wf := e.Workflow(p.Workflow)
	if wf == nil || wf.LastStop <= p.Index {
		return first, what, found
	}
	mark := func(step string) {
		if m := get[StopMarkRec](e.st, stopMarkKey(p.Workflow, step)); m != nil && m.Index > p.Index {
			where := "workflow " + strconv.Quote(p.Workflow)
			if step != "" {
				where = "step " + strconv.Quote(step)
			}
			consider(m.At, fmt.Sprintf("STOP %s (index %d) on %s landed at %s", m.ID, m.Index, where, m.At))
		}
	}
	mark("")
	for i := 0; i <= len(p.Step); i++ {
		if i == len(p.Step) || p.Step[i] == '/' {
			mark(p.Step[:i])
		}
	}
	return first, what, found
}

// markStop records a STOP as the latest on its scope.
func (e *Engine) markStop(wfID, step, id string, index uint64, at time.Time) {
	put(e.st, stopMarkKey(wfID, step), &StopMarkRec{ID: id, Index: index, At: statement.FormatLoggedAt(at)})
	w := e.Workflow(wfID)
	if w == nil {
		return
	}
	nw := *w
	nw.LastStop = index
	put(e.st, prefWF+wfID, &nw)
}

// released reports whether a held receipt's reservation is given back at
// time at: it was rejected, has expired or has been closed.
func (e *Engine) released(p *PendingRec, at time.Time) bool {
	if p.Hold == nil {
		return false
	}
	if p.Hold.Released {
		return true
	}
	s, _ := e.HoldState(p, at)
	return s == HoldRejected || s == HoldExpired || s == HoldClosed
}

// releasable lists, for each grant of a chain, the receipts on hold under
// it whose reservations are released at time at but not yet given back,
// and returns them all by id.
func (e *Engine) releasable(chain []*GrantRec, at time.Time) map[string]*PendingRec {
	var out map[string]*PendingRec
	for _, g := range chain {
		for _, id := range g.OnHold {
			if _, seen := out[id]; seen {
				continue
			}
			p := e.Pending(id)
			if p != nil && e.released(p, at) {
				if out == nil {
					out = map[string]*PendingRec{}
				}
				out[id] = p
			}
		}
	}
	return out
}

// releasedOn sums, per limit key, what the releasable receipts listed on
// grant g reserved.
func releasedOn(g *GrantRec, rel map[string]*PendingRec, k string) int64 {
	var sum int64
	for _, id := range g.OnHold {
		if p, ok := rel[id]; ok {
			sum += p.Reserve[k]
		}
	}
	return sum
}

// giveBack releases a held receipt's reservation from every grant of its
// chain and takes it off their lists and the log's list.
func (e *Engine) giveBack(p *PendingRec) {
	np := copyPending(p)
	if np.Hold.Released {
		return
	}
	np.Hold.Released = true
	g := e.Grant(p.Grant)
	for g != nil {
		if slices.Contains(g.OnHold, p.ID) {
			ng := *g
			ng.OnHold = slices.DeleteFunc(slices.Clone(g.OnHold), func(s string) bool { return s == p.ID })
			if len(ng.OnHold) == 0 {
				ng.OnHold = nil
			}
			ng.Spent = maps.Clone(g.Spent)
			if ng.Spent == nil {
				ng.Spent = map[string]int64{}
			}
			for k := range g.Descriptor.Limits {
				v := ng.Spent[k] - p.Reserve[k]
				if v < 0 {
					v = 0
				}
				ng.Spent[k] = v
			}
			put(e.st, prefGrant+ng.ID, &ng)
		}
		if g.Parent == "" {
			break
		}
		g = e.Grant(g.Parent)
	}
	put(e.st, prefPend+np.ID, np)
	e.unlistHold(np.ID)
}

// dropOnHold takes an approved receipt off its chain's lists: its
// reservation stays charged.
func (e *Engine) dropOnHold(p *PendingRec) {
	g := e.Grant(p.Grant)
	for g != nil {
		if slices.Contains(g.OnHold, p.ID) {
			ng := *g
			ng.OnHold = slices.DeleteFunc(slices.Clone(g.OnHold), func(s string) bool { return s == p.ID })
			if len(ng.OnHold) == 0 {
				ng.OnHold = nil
			}
			put(e.st, prefGrant+ng.ID, &ng)
		}
		if g.Parent == "" {
			break
		}
		g = e.Grant(g.Parent)
	}
	e.unlistHold(p.ID)
}

func copyPending(p *PendingRec) *PendingRec {
	np := *p
	if p.Hold != nil {
		h := *p.Hold
		h.Rules = make([]HoldRule, len(p.Hold.Rules))
		for i, r := range p.Hold.Rules {
			r.ApprovedBy = slices.Clone(r.ApprovedBy)
			h.Rules[i] = r
		}
		h.Answered = slices.Clone(p.Hold.Answered)
		np.Hold = &h
	}
	return &np
}

// listHold appends a newly held receipt to the log's list.
func (e *Engine) listHold(p *PendingRec) {
	l := HoldListRec{}
	if r := get[HoldListRec](e.st, keyHoldList); r != nil {
		l = *r
	}
	if l.Last != "" {
		last := copyPending(e.Pending(l.Last))
		last.Hold.Next = p.ID
		put(e.st, prefPend+last.ID, last)
		p.Hold.Prev = l.Last
	} else {
		l.First = p.ID
	}
	l.Last = p.ID
	l.Count++
	put(e.st, keyHoldList, &l)
}

// unlistHold takes a receipt off the log's list of held receipts.
func (e *Engine) unlistHold(id string) {
	p := e.Pending(id)
	if p == nil || p.Hold == nil || p.Hold.Off {
		return
	}
	l := *get[HoldListRec](e.st, keyHoldList)
	np := copyPending(p)
	if np.Hold.Prev != "" {
		prev := copyPending(e.Pending(np.Hold.Prev))
		prev.Hold.Next = np.Hold.Next
		put(e.st, prefPend+prev.ID, prev)
	} else {
		l.First = np.Hold.Next
	}
	if np.Hold.Next != "" {
		next := copyPending(e.Pending(np.Hold.Next))
		next.Hold.Prev = np.Hold.Prev
		put(e.st, prefPend+next.ID, next)
	} else {
		l.Last = np.Hold.Prev
	}
	l.Count--
	np.Hold.Prev, np.Hold.Next, np.Hold.Off = "", "", true
	put(e.st, prefPend+np.ID, np)
	put(e.st, keyHoldList, &l)
}

// HeldReceipts calls f for each receipt on the log's list of held
// receipts, oldest first, until f returns false or max have been seen.
// The list may hold receipts whose deadline has passed or that a STOP
// closed (they leave it when a later decision releases them): f should
// ask HoldState.
func (e *Engine) HeldReceipts(max int, f func(p *PendingRec) bool) {
	l := get[HoldListRec](e.st, keyHoldList)
	if l == nil {
		return
	}
	for id, n := l.First, 0; id != "" && n < max; n++ {
		p := e.Pending(id)
		if p == nil || p.Hold == nil || !f(p) {
			return
		}
		id = p.Hold.Next
	}
}

// matchRules returns the rules in force on a chain that hold a pending
// receipt, in chain order (the receipt's grant first).
func matchRules(chain []*GrantRec, r *statement.ReceiptDoc) []HoldRule {
	var out []HoldRule
	for _, g := range chain {
		for i := range g.Descriptor.Approvals {
			rule := &g.Descriptor.Approvals[i]
			if rule.Matches(r.Action, r.Target, r.StepID, r.Reserve) {
				out = append(out, HoldRule{Grant: g.ID, RuleID: rule.RuleID, Approvers: rule.Approvers, Quorum: rule.Quorum})
			}
		}
	}
	return out
}

// holdDeadline is the deadline of a receipt held at at under rules on a
// chain: at plus the smallest ttl_seconds of the matched rules, or the
// earliest expiry on the chain if sooner (byGrant then).
func (e *Engine) holdDeadline(chain []*GrantRec, rules []HoldRule, at time.Time) (time.Time, bool) {
	ttl := int64(scope.MaxRuleTTL)
	for _, hr := range rules {
		for _, g := range chain {
			if g.ID != hr.Grant {
				continue
			}
			for i := range g.Descriptor.Approvals {
				if r := &g.Descriptor.Approvals[i]; r.RuleID == hr.RuleID && r.TTLSeconds < ttl {
					ttl = r.TTLSeconds
				}
			}
		}
	}
	deadline := at.Add(time.Duration(ttl) * time.Second)
	byGrant := false
	for _, g := range chain {
		if exp := g.expires(); !exp.After(deadline) {
			deadline, byGrant = exp, true
		}
	}
	return deadline, byGrant
}

func payloadSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// approval decides an APPROVAL (DESIGN §7, §4 step 9).
func (c *check) approval(s *statement.ApprovalDoc) {
	// Step 4: an enrolled principal, a pending receipt, its workflow.
	if c.signer.Role != RolePrincipal {
		c.deny(NotPrincipal, "only an enrolled principal may approve or reject receipt %s; signer %q is bound as %s (agents never approve)", s.ReceiptRef, c.signer.Name, c.signer.Role)
		return
	}
	p := c.e.Pending(s.ReceiptRef)
	if p == nil {
		c.deny(UnknownReference, "receipt_ref %q names no accepted pending RECEIPT", s.ReceiptRef)
		return
	}
	if s.Workflow != p.Workflow {
		c.deny(WorkflowMismatch, "workflow %q is not %q, the workflow of receipt %s", s.Workflow, p.Workflow, p.ID)
		return
	}
	// Step 5: the signer is live.
	c.signerLive()
	if c.failed() {
		return
	}
	// Step 9.
	h := p.Hold
	if h == nil {
		c.deny(NotHeld, "receipt %s (index %d) was never held: no approval rule in force matched it", p.ID, p.Index)
		return
	}
	if s.ReceiptSHA256 != h.SHA256 {
		c.deny(ApprovalMismatch, "receipt_sha256 %s is not %s, the SHA-256 of receipt %s's payload bytes: the approval is for other bytes", s.ReceiptSHA256, h.SHA256, p.ID)
		return
	}
	state, why := c.e.HoldState(p, c.at)
	switch state {
	case HoldExpired:
		c.deny(ApprovalExpired, "receipt %s's deadline %s has passed (ledger time %s)", p.ID, h.Deadline, statement.FormatLoggedAt(c.at))
		return
	case HoldApproved, HoldRejected, HoldClosed:
		c.deny(NotHeld, "receipt %s is no longer held: %s", p.ID, why)
		return
	}
	var covering []int
	for i, hr := range h.Rules {
		if scope.Covers(hr.Approvers, c.signer.Name) {
			covering = append(covering, i)
		}
	}
	if len(covering) == 0 {
		c.deny(NotApprover, "signer %q is not among the approvers of any rule that holds receipt %s (%s)", c.signer.Name, p.ID, describeRules(h.Rules))
		return
	}
	// The name must have been enrolled by the receipt's trust_head; a
	// device key added to it later signs for the same person.
	if at := c.e.enrolledAt(c.signer.Name); at > h.TrustHead {
		c.deny(NotApprover, "principal %q was enrolled at index %d, after receipt %s was held (trust_head %d): an approver enrolled later does not count", c.signer.Name, at, p.ID, h.TrustHead)
		return
	}
	if slices.Contains(h.Answered, c.signer.Name) {
		c.deny(DuplicateApproval, "principal %q has already answered receipt %s", c.signer.Name, p.ID)
		return
	}
	c.accept()
	np := copyPending(p)
	np.Hold.Answered = append(np.Hold.Answered, c.signer.Name)
	if s.Decision == statement.DecisionReject {
		np.Hold.State, np.Hold.DecidedAt, np.Hold.DecidedBy = HoldRejected, c.index, s.ApprovalID
		put(c.e.st, prefPend+np.ID, np)
		c.e.giveBack(np)
		return
	}
	for _, i := range covering {
		np.Hold.Rules[i].ApprovedBy = append(np.Hold.Rules[i].ApprovedBy, c.signer.Name)
	}
	if c.e.quorumMet(np.Hold) {
		np.Hold.State, np.Hold.DecidedAt, np.Hold.DecidedBy = HoldApproved, c.index, s.ApprovalID
		put(c.e.st, prefPend+np.ID, np)
		c.e.dropOnHold(np)
		return
	}
	put(c.e.st, prefPend+np.ID, np)
}

// quorumMet reports whether every rule has quorum approvals from distinct
// names not retired by now.
func (e *Engine) quorumMet(h *HoldRec) bool {
	for _, r := range h.Rules {
		n := int64(0)
		for _, name := range r.ApprovedBy {
			if nr := get[NameRec](e.st, prefName+name); nr != nil && e.liveKeys(nr) > 0 {
				n++
			}
		}
		if n < r.Quorum {
			return false
		}
	}
	return true
}

func describeRules(rules []HoldRule) string {
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = fmt.Sprintf("rule %q of %s: approvers %s", r.RuleID, r.Grant, quoteList(r.Approvers))
	}
	return strings.Join(parts, "; ")
}

// enrolledAt is the index at which a principal name's first key was bound.
func (e *Engine) enrolledAt(name string) uint64 {
	if nr := get[NameRec](e.st, prefName+name); nr != nil {
		if k := e.Key(nr.KeyID); k != nil {
			return k.BoundAt
		}
	}
	return 0
}

// ClosedSince reports whether a STOP covering a held receipt's step, a
// REVOKE or a retirement on its chain has landed since it was held,
// approved or not, and names it: a runtime about to run an approved step
// checks this against a fresh checkpoint (DESIGN §7).
func (e *Engine) ClosedSince(p *PendingRec) (string, bool) {
	if p == nil || p.Hold == nil {
		return "", false
	}
	_, what, ok := e.closedAt(p)
	return what, ok
}
