package replay

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
	"github.com/custodylog/custody/witness"
)

// Row statuses.
const (
	// Verified: inclusion, signature and decision of the entry checked.
	Verified = "verified"
	// Failed: a check failed at this entry.
	Failed = "FAILED"
	// Unverified: checks did not reach this entry (an earlier one failed).
	Unverified = "unverified"
)

// Report is a replayed workflow.
type Report struct {
	Origin         string `json:"origin"`
	Workflow       string `json:"workflow"`
	CheckpointSize uint64 `json:"checkpoint_size"`
	// AsOf is the latest logged time in the bundle: expiry is judged at it.
	AsOf string `json:"as_of,omitempty"`
	// Verified is true when the whole bundle verified.
	Verified bool `json:"verified"`
	// Failure is the first failed check, when Verified is false.
	Failure   *Failure    `json:"failure,omitempty"`
	Owner     string      `json:"owner,omitempty"` // the principal of the workflow's first CONFIRM
	Subject   uint64      `json:"subject"`         // the bundle's subject entry
	Rows      []*Row      `json:"timeline"`
	Grants    []*Grant    `json:"grants"`
	Stops     []*Stop     `json:"stops,omitempty"`
	Pendings  []*Pending  `json:"pending_receipts,omitempty"`
	Attention []Attention `json:"attention,omitempty"`
	// LeftToAudit lists what a bundle cannot show (custody audit checks it).
	LeftToAudit []string `json:"left_to_audit,omitempty"`
	// Verification is the verifier's full verdict.
	Verification *verify.Verdict `json:"verification"`
}

// Failure is a failed verification check.
type Failure struct {
	Index  *uint64 `json:"index,omitempty"`
	Check  string  `json:"check"`
	Detail string  `json:"detail"`
}

func (f *Failure) String() string {
	at := ""
	if f.Index != nil {
		at = fmt.Sprintf(" at entry %d", *f.Index)
	}
	return fmt.Sprintf("VERIFICATION FAILED%s: %s: %s", at, f.Check, f.Detail)
}

// Row is one entry of the timeline.
type Row struct {
	Index     uint64 `json:"index"`
	LoggedAt  string `json:"logged_at,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	// Kind is the statement's kind; for a DENIAL, the denied statement's.
	Kind     string `json:"kind"`
	ID       string `json:"id,omitempty"`
	DenialID string `json:"denial_id,omitempty"`
	// Actor is the signer's bound name (the statement's claimed actor if
	// the key is not bound in the view).
	Actor  string `json:"actor,omitempty"`
	Action string `json:"action,omitempty"`
	Target string `json:"target,omitempty"`
	Step   string `json:"step,omitempty"`
	Result string `json:"result,omitempty"` // RECEIPT only
	// What a RECEIPT says happened: the reservation of a pending one, and
	// an outcome's consumption, side effects, evidence and error.
	Reserve      map[string]int64  `json:"reserve,omitempty"`
	Consumed     map[string]int64  `json:"consumed,omitempty"`
	SideEffects  map[string]string `json:"side_effects,omitempty"`
	EvidenceRefs []string          `json:"evidence_refs,omitempty"`
	Error        string            `json:"error,omitempty"`
	// The pending-to-outcome link, both ways: an outcome's pending receipt
	// (its pending_ref) and a pending receipt's outcome in the bundle.
	PendingRef   string  `json:"pending_ref,omitempty"`
	PendingIndex *uint64 `json:"pending_index,omitempty"`
	Outcome      string  `json:"outcome,omitempty"`
	OutcomeIndex *uint64 `json:"outcome_index,omitempty"`
	// Decision is "accepted" or "denied" (a DENIAL entry).
	Decision string `json:"decision"`
	Code     string `json:"reason_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Path is the authority the signer acted under: the principal, the
	// grants from the CONFIRM down, and the signer.
	Path []string `json:"authority_path,omitempty"`
	// Trust marks GENESIS and PRINCIPAL entries (the trust chain).
	Trust   bool     `json:"trust_chain,omitempty"`
	Status  string   `json:"status"`
	Problem string   `json:"problem,omitempty"`
	Flags   []string `json:"flags,omitempty"` // attention kinds that concern this row
	// Held is a held pending receipt's approval state; Approval names the
	// decision and reason of an APPROVAL row.
	Held           *Held  `json:"held,omitempty"`
	ApprovalOf     string `json:"approval_of,omitempty"`
	ApprovalReason string `json:"approval_reason,omitempty"` // the approver's free text
}

// Grant is a CONFIRM or DELEGATE in the workflow, with its state as the
// replay leaves it; a denied attempt to grant is listed too (Denied).
type Grant struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Index     uint64 `json:"index"`
	Parent    string `json:"parent,omitempty"`
	Issuer    string `json:"issuer"`
	Grantee   string `json:"grantee"`
	Depth     int64  `json:"depth"`
	ScopeHash string `json:"scope_hash,omitempty"`

	Capabilities []string `json:"capabilities,omitempty"`
	Targets      []string `json:"targets,omitempty"`
	Steps        []string `json:"step_ids,omitempty"`
	Principals   []string `json:"principals,omitempty"`
	ExpiresAt    string   `json:"expires_at,omitempty"`
	TTLSeconds   int64    `json:"ttl_seconds,omitempty"`
	Revocable    bool     `json:"revocable"`

	Expired    bool    `json:"expired,omitempty"` // as of Report.AsOf
	Revoked    bool    `json:"revoked,omitempty"`
	RevokedBy  string  `json:"revoked_by,omitempty"`  // the REVOKE's id
	RevokedVia string  `json:"revoked_via,omitempty"` // the revoked ancestor
	Stopped    string  `json:"stopped,omitempty"`     // the STOPs in force over it
	Limits     []Limit `json:"limits,omitempty"`

	Denied bool   `json:"denied,omitempty"`
	Code   string `json:"reason_code,omitempty"`
	Status string `json:"status"`
}

// Summary is the grant's scope in one line.
func (g *Grant) Summary() string {
	s := strings.Join(g.Capabilities, ", ") + " on " + strings.Join(g.Targets, ", ")
	if len(g.Steps) > 0 {
		s += "; steps " + strings.Join(g.Steps, ", ")
	}
	if len(g.Principals) > 0 {
		s += "; sub-grantees " + strings.Join(g.Principals, ", ")
	}
	return s
}

// Limit is one limit of a grant and what the receipts under it did with it.
type Limit struct {
	Key string `json:"key"`
	Max int64  `json:"limit"`
	// Reserved is what pending receipts under the grant reserved;
	// Consumed what their outcomes say was used; Charged what counts
	// against the limit (max of the two per receipt, DESIGN §4); Remaining
	// is Max - Charged.
	Reserved  int64 `json:"reserved"`
	Consumed  int64 `json:"consumed"`
	Charged   int64 `json:"charged"`
	Remaining int64 `json:"remaining"`
}

// Stop is a STOP in the workflow.
type Stop struct {
	ID           string `json:"id"`
	Index        uint64 `json:"index"`
	Scope        string `json:"scope"`
	Step         string `json:"step,omitempty"`
	By           string `json:"by"`
	Role         string `json:"role,omitempty"`
	TakeoverMode string `json:"takeover_mode"`
	TakeoverTo   string `json:"takeover_to,omitempty"`
	Reason       string `json:"reason"`
	Resumed      bool   `json:"resumed,omitempty"`
	ResumedBy    string `json:"resumed_by,omitempty"`
}

// Pending is a pending receipt and its outcome, if any.
type Pending struct {
	ID           string           `json:"id"`
	Index        uint64           `json:"index"`
	Grant        string           `json:"grant"`
	Actor        string           `json:"actor"`
	Step         string           `json:"step"`
	Action       string           `json:"action"`
	Target       string           `json:"target"`
	Reserve      map[string]int64 `json:"reserve,omitempty"`
	Outcome      string           `json:"outcome,omitempty"`
	OutcomeIndex *uint64          `json:"outcome_index,omitempty"`
	Result       string           `json:"result,omitempty"`
	Consumed     map[string]int64 `json:"consumed,omitempty"`
	Overrun      bool             `json:"overrun,omitempty"`
	// Held is set when an approval rule held the receipt (DESIGN §7):
	// its state as of the bundle's last entry, until when, what it
	// needed, and who answered.
	Held *Held `json:"held,omitempty"`
}

// Held is what became of a held pending receipt.
type Held struct {
	State     string   `json:"state"` // held, approved, rejected, expired, closed
	Why       string   `json:"why,omitempty"`
	ExpiresAt string   `json:"expires_at"`
	Needs     []string `json:"needs"`             // "2 of user:bob, user:carol (rule big of c1)"
	Answers   []string `json:"answers,omitempty"` // "user:bob approve (#7)"
}

// Attention kinds, most serious first.
const (
	AttnVerification = "verification"
	AttnEscalation   = "escalation"
	AttnDenial       = "denial"
	AttnOverrun      = "overrun"
	// AttnApproval: an outcome of a held step that was not approved when
	// it was logged, or that consumed above a rule's threshold it did not
	// reserve (DESIGN §7, violations).
	AttnApproval  = "approval"
	AttnOpen      = "open"
	AttnAfterStop = "after_stop"
	AttnClock     = "clock"
	AttnNote      = "note"
)

var attnOrder = map[string]int{AttnVerification: 0, AttnEscalation: 1, AttnDenial: 2, AttnOverrun: 3, AttnApproval: 3,
	AttnOpen: 4, AttnAfterStop: 5, AttnClock: 6, AttnNote: 7}

// Attention is one thing an incident responder should look at.
type Attention struct {
	Kind  string  `json:"kind"`
	Index *uint64 `json:"index,omitempty"`
	Code  string  `json:"reason_code,omitempty"`
	Text  string  `json:"text"`
}

// EscalationCodes are the denial codes that mean someone tried to get or
// use authority they did not have, rather than running out of it.
var EscalationCodes = map[authority.Code]bool{
	authority.Widening: true, authority.EqualScope: true, authority.DepthExceeded: true,
	authority.PrincipalMismatch: true, authority.NotGrantee: true, authority.NotPrincipal: true,
	authority.NotAuthorized: true, authority.WorkflowOwned: true, authority.LimitMissing: true,
	authority.LimitWidened: true, authority.ExpiryWidened: true, authority.RevocabilityWidened: true,
	authority.IdentityConflict: true, authority.ActorMismatch: true, authority.OutOfScope: true,
	authority.ScopeHashMismatch: true,
}

// Options tune what Build flags.
type Options struct {
	// ClockWarn flags an accepted statement whose timestamp is further
	// than this from the time the ledger logged it (default 60s; the
	// ledger itself denies beyond the log's clock_skew_seconds).
	ClockWarn time.Duration
	// Policy, when set, is a witness policy the bundle's checkpoint must
	// meet (verify.CheckWitnesses).
	Policy *witness.Policy
	// BundleFile says the bundle is a file someone made (custody prove
	// --workflow), which ends at its subject: a pending receipt with no
	// outcome there may have one logged later, and the report says so
	// instead of calling it lost.
	BundleFile bool
}

// Build verifies a workflow bundle against the log's verifier key and
// replays it into a Report. It returns an error only when the input cannot
// be used at all (an unreadable verifier key, wrapping verify.ErrUnusable);
// a bundle that fails verification gives a Report that says so.
func Build(b *verify.Bundle, verifierKey string, o Options) (*Report, error) {
	if o.ClockWarn <= 0 {
		o.ClockWarn = time.Minute
	}
	v, err := verify.VerifyBundle(b, verifierKey)
	if err != nil {
		return nil, err
	}
	if o.Policy != nil && v.Valid {
		verify.CheckWitnesses(v, []byte(b.Checkpoint), o.Policy)
	}
	r := &Report{Origin: b.Origin, Workflow: v.Workflow, CheckpointSize: v.Size, Verified: v.Valid,
		Verification: v, LeftToAudit: v.LeftToAudit}
	if !v.Valid {
		r.Failure = firstFailure(v)
	}
	st := newStatuses(v)
	bd := &builder{r: r, o: o, e: authority.NewView(authority.MemStore{}), rows: map[uint64]*Row{},
		pend: map[string]*Pending{}, answers: map[string][]string{}, charge: map[string]map[string][2]int64{}, stopDocs: map[uint64]*statement.StopDoc{},
		subject: &b.Subject}
	r.Subject = b.Subject
	var entries []decoded
	for _, be := range b.Entries {
		d := decode(be)
		entries = append(entries, d)
		row := &Row{Index: be.Index, Decision: "?"}
		row.Status, row.Problem = st.of(be.Index)
		if d.err != nil {
			row.Kind = "?"
			row.Status, row.Problem = Failed, d.err.Error()
		} else {
			bd.describe(row, d)
			if r.Workflow == "" && !row.Trust && d.st.WorkflowID() != "" {
				r.Workflow = d.st.WorkflowID()
			}
		}
		r.Rows = append(r.Rows, row)
		bd.rows[be.Index] = row
	}
	bd.replay(entries)
	bd.finish()
	return r, nil
}

// firstFailure names the first failed check of a verdict: the top-level
// check, and the entry and detail of its first failed part.
func firstFailure(v *verify.Verdict) *Failure {
	for _, c := range v.Checks {
		if c.OK {
			continue
		}
		for _, sub := range c.Checks {
			if !sub.OK {
				return &Failure{Index: sub.Index, Check: c.Name, Detail: sub.Detail}
			}
		}
		return &Failure{Index: c.Index, Check: c.Name, Detail: c.Detail}
	}
	return &Failure{Check: "verification", Detail: "the bundle did not verify"}
}

// decoded is a bundle entry read into its parts.
type decoded struct {
	index uint64
	raw   []byte
	leaf  *statement.Leaf
	at    time.Time
	env   *sign.Parsed
	kind  statement.Kind
	st    statement.Statement
	err   error
}

func decode(be verify.BundleEntry) decoded {
	d := decoded{index: be.Index}
	raw, err := base64.StdEncoding.Strict().DecodeString(be.Leaf)
	if err != nil {
		d.err = fmt.Errorf("leaf is not standard base64: %v", err)
		return d
	}
	d.raw = raw
	if d.leaf, d.at, err = statement.ParseLeaf(raw); err != nil {
		d.err = err
		return d
	}
	if d.env, err = sign.ParseEnvelope(d.leaf.Envelope); err != nil {
		d.err = fmt.Errorf("envelope: %v", err)
		return d
	}
	d.kind, _ = statement.KindOfPayloadType(d.env.PayloadType)
	if d.st, err = statement.Parse(d.kind, d.env.Payload); err != nil {
		d.err = fmt.Errorf("%s payload: %v", d.kind, err)
	}
	return d
}

// statuses maps the verdict onto entries.
type statuses struct {
	def string
	per map[uint64][2]string
}

func newStatuses(v *verify.Verdict) *statuses {
	s := &statuses{def: Verified, per: map[uint64][2]string{}}
	if v.Valid {
		return s
	}
	s.def = Unverified
	for _, c := range v.Checks {
		if c.OK {
			continue
		}
		if c.Index != nil {
			s.per[*c.Index] = [2]string{Failed, c.Name + ": " + c.Detail}
		}
		for _, sub := range c.Checks {
			switch {
			case sub.Index == nil:
			case !sub.OK:
				s.per[*sub.Index] = [2]string{Failed, c.Name + ": " + sub.Detail}
			case c.Name == "decisions re-run":
				// Inclusion and structure passed before decisions ran.
				s.per[*sub.Index] = [2]string{Verified, ""}
			}
		}
	}
	return s
}

func (s *statuses) of(index uint64) (string, string) {
	if p, ok := s.per[index]; ok {
		return p[0], p[1]
	}
	if s.def == Unverified {
		return Unverified, "not checked: verification stopped at an earlier failure"
	}
	return s.def, ""
}

// builder carries Build's state.
type builder struct {
	r    *Report
	o    Options
	e    *authority.Engine
	rows map[uint64]*Row
	pend map[string]*Pending
	// charge[grant][limit] = {reserved, consumed} by receipts under it
	charge   map[string]map[string][2]int64
	grants   []string // accepted grant ids in log order
	stopIDs  []string
	stopDocs map[uint64]*statement.StopDoc
	answers  map[string][]string // receipt id -> "name decision (#index)"
	asOf     time.Time
	// replayedTo is the index of the first entry the model replay could
	// not apply (all entries when ok).
	stoppedAt *uint64
	subject   *uint64 // the bundle's subject entry
}

// describe fills a row from its statement alone.
func (bd *builder) describe(row *Row, d decoded) {
	h := d.st.Head()
	row.LoggedAt, row.Timestamp = d.leaf.LoggedAt, h.Timestamp
	row.Kind, row.ID, row.Actor, row.Decision = string(d.kind), d.st.ID(), h.Actor, "accepted"
	if d.at.After(bd.asOf) {
		bd.asOf = d.at
	}
	switch s := d.st.(type) {
	case *statement.GenesisDoc:
		row.Trust, row.Action, row.Target = true, "genesis", s.Log
	case *statement.PrincipalDoc:
		row.Trust, row.Action, row.Target = true, s.Op, s.Name
	case *statement.DenialDoc:
		row.Decision, row.Code, row.Reason, row.DenialID = "denied", s.ReasonCode, s.Reason, s.DenialID
		row.Kind, row.ID, row.Actor = string(s.StatementType), s.StatementID, ""
		if s.Envelope == nil {
			row.Action = "(the denied envelope was too large to log)"
			return
		}
		inner, err := sign.ParseEnvelopeValue(*s.Envelope)
		if err != nil {
			return
		}
		ist, err := statement.Parse(s.StatementType, inner.Payload)
		if err != nil {
			row.Action = "(unreadable " + string(s.StatementType) + ")"
			row.Actor = statement.PeekField(inner.Payload, "actor")
			return
		}
		row.Actor = ist.Head().Actor
		what(row, ist)
	default:
		what(row, d.st)
	}
}

// what fills a row's action and target from a statement.
func what(row *Row, st statement.Statement) {
	switch s := st.(type) {
	case *statement.ConfirmDoc:
		row.Action, row.Target = "grant", s.Grantee.Name
	case *statement.DelegateDoc:
		row.Action, row.Target = "delegate", s.Grantee.Name
	case *statement.RevokeDoc:
		row.Action, row.Target = "revoke", s.TargetRef
	case *statement.ReceiptDoc:
		row.Action, row.Target, row.Step, row.Result = s.Action, s.Target, s.StepID, s.Result
		row.Reserve, row.Consumed, row.SideEffects, row.EvidenceRefs, row.Error = s.Reserve, s.Consumed, s.SideEffects, s.EvidenceRefs, s.Error
		row.PendingRef = s.PendingRef
	case *statement.StopDoc:
		row.Action, row.Target = "stop "+s.StopScope, s.Workflow
		if s.StopScope == statement.StopStep {
			row.Target = s.StepID
		}
	case *statement.ResumeDoc:
		row.Action, row.Target = "resume", s.StopRef
	case *statement.ApprovalDoc:
		row.Action, row.Target, row.ApprovalOf = s.Decision, s.ReceiptRef, s.ReceiptRef
		row.ApprovalReason = s.Reason
	}
}

// replay runs the entries through a partial-view engine to read the state
// they imply; it stops at the first entry it cannot apply.
func (bd *builder) replay(entries []decoded) {
	for _, d := range entries {
		if d.raw == nil || d.leaf == nil {
			bd.stop(d.index)
			return
		}
		row := bd.rows[d.index]
		var inForce *authority.StopRec
		if r, ok := d.st.(*statement.ReceiptDoc); ok && d.err == nil && !r.IsPending() {
			inForce = bd.e.StopInForce(r.Workflow, r.StepID)
		}
		dec, err := bd.e.Replay(d.index, d.raw)
		if err != nil {
			bd.stop(d.index)
			var re *authority.ReplayError
			if errors.As(err, &re) && row.Status != Failed {
				row.Status, row.Problem = Failed, re.Check+": "+re.Msg
			}
			return
		}
		for _, n := range dec.Notes {
			if d.kind == statement.Receipt && strings.HasPrefix(n, "consumed ") {
				continue // an overrun: flagged by receipt, with its context
			}
			if strings.HasPrefix(n, "violation: ") {
				bd.flag(row, AttnApproval, "", strings.TrimPrefix(n, "violation: "))
				continue
			}
			bd.attend(AttnNote, &d.index, "", n)
		}
		bd.apply(row, d, dec, inForce)
	}
}

// stop records that the model replay ended at index.
func (bd *builder) stop(index uint64) {
	bd.stoppedAt = &index
	for _, row := range bd.r.Rows {
		if row.Index > index && row.Status == Verified {
			row.Status, row.Problem = Unverified, fmt.Sprintf("not replayed: entry %d could not be applied", index)
		}
	}
}

// apply reads what one replayed entry did.
func (bd *builder) apply(row *Row, d decoded, dec *authority.Decision, inForce *authority.StopRec) {
	if k := bd.e.Key(d.env.KeyID); k != nil && d.kind != statement.Denial {
		row.Actor = k.Name
	}
	switch s := d.st.(type) {
	case *statement.PrincipalDoc:
		row.Path = []string{bd.name(d.env.KeyID)}
	case *statement.GenesisDoc:
		row.Path = []string{bd.name(d.env.KeyID)}
	case *statement.ConfirmDoc:
		bd.grants = append(bd.grants, s.ConfirmID)
		row.Path = []string{bd.name(d.env.KeyID) + " (principal)"}
	case *statement.DelegateDoc:
		bd.grants = append(bd.grants, s.DelegationID)
		row.Path = bd.path(s.ParentRef, d.env.KeyID)
	case *statement.RevokeDoc:
		row.Path = bd.path(s.TargetRef, d.env.KeyID)
	case *statement.ReceiptDoc:
		row.Path = bd.path(s.AuthorizationRef, d.env.KeyID)
		bd.receipt(row, s, d.index)
		if !s.IsPending() {
			bd.afterStop(row, s, inForce)
		}
	case *statement.StopDoc:
		bd.stopIDs = append(bd.stopIDs, s.RequestID)
		bd.stopDocs[d.index] = s
		row.Path = bd.actorPath(s.Workflow, d.env.KeyID, s.RequestID)
	case *statement.ResumeDoc:
		row.Path = bd.actorPath(s.Workflow, d.env.KeyID, s.StopRef)
	case *statement.ApprovalDoc:
		row.Path = []string{bd.name(d.env.KeyID) + " (approver)"}
		if p := bd.pend[s.ReceiptRef]; p != nil {
			bd.answers[s.ReceiptRef] = append(bd.answers[s.ReceiptRef], fmt.Sprintf("%s %s (#%d)", row.Actor, s.Decision, d.index))
		}
	case *statement.DenialDoc:
		bd.denial(row, s, dec)
	}
	if _, ok := d.st.(*statement.DenialDoc); !ok && d.kind != statement.Genesis {
		if ts, err := statement.ParseTimestamp(d.st.Head().Timestamp); err == nil {
			if diff := ts.Sub(d.at); diff.Abs() > bd.o.ClockWarn {
				rel := "ahead of"
				if diff < 0 {
					rel = "behind"
				}
				bd.flag(row, AttnClock, "", fmt.Sprintf("%s %s: timestamp %s is %s %s the logged time %s",
					row.Kind, row.ID, d.st.Head().Timestamp, diff.Abs().Round(time.Millisecond), rel, d.leaf.LoggedAt))
			}
		}
	}
}

// receipt accounts a receipt's reservation or consumption against its
// grant and every ancestor.
func (bd *builder) receipt(row *Row, s *statement.ReceiptDoc, index uint64) {
	p := bd.pend[s.PendingRef]
	if s.IsPending() {
		p = &Pending{ID: s.ReceiptID, Index: index, Grant: s.AuthorizationRef, Actor: row.Actor, Step: s.StepID,
			Action: s.Action, Target: s.Target, Reserve: s.Reserve}
		bd.pend[s.ReceiptID] = p
		bd.r.Pendings = append(bd.r.Pendings, p)
		bd.account(s.AuthorizationRef, s.Reserve, 0)
		return
	}
	if p == nil {
		return
	}
	p.Outcome, p.OutcomeIndex, p.Result, p.Consumed = s.ReceiptID, &index, s.Result, s.Consumed
	pi := p.Index
	row.PendingIndex = &pi
	if pr := bd.rows[p.Index]; pr != nil {
		pr.Outcome, pr.OutcomeIndex = s.ReceiptID, &index
	}
	bd.account(p.Grant, s.Consumed, 1)
	for k, c := range s.Consumed {
		if c > p.Reserve[k] {
			p.Overrun = true
			bd.flag(row, AttnOverrun, "", fmt.Sprintf("outcome %s of %s consumed %s %d, above the %d reserved at #%d",
				s.ReceiptID, p.ID, k, c, p.Reserve[k], p.Index))
		}
	}
}

func (bd *builder) account(grant string, amounts map[string]int64, slot int) {
	for g := bd.e.Grant(grant); g != nil; g = bd.e.Grant(g.Parent) {
		m := bd.charge[g.ID]
		if m == nil {
			m = map[string][2]int64{}
			bd.charge[g.ID] = m
		}
		for k, n := range amounts {
			v := m[k]
			v[slot] = sat(v[slot], n)
			m[k] = v
		}
		if g.Parent == "" {
			break
		}
	}
}

func sat(a, b int64) int64 {
	if a > 1<<62 || b > 1<<62 {
		return 1<<63 - 1
	}
	return a + b
}

// afterStop flags an outcome recorded while a STOP covering its step was
// in force: the step was already running when the STOP came.
func (bd *builder) afterStop(row *Row, s *statement.ReceiptDoc, st *authority.StopRec) {
	if st == nil {
		return
	}
	started := ""
	if p := bd.pend[s.PendingRef]; p != nil {
		started = fmt.Sprintf(" (pending %s at #%d, before the STOP)", p.ID, p.Index)
		if p.Index > st.Index {
			started = fmt.Sprintf(" (pending %s at #%d)", p.ID, p.Index)
		}
	}
	bd.flag(row, AttnAfterStop, "", fmt.Sprintf("outcome %s (%s) of %s → %s recorded after %s STOP %s at #%d%s",
		s.ReceiptID, s.Result, s.Action, s.Target, st.Scope, st.ID, st.Index, started))
}

// denial lists a denial, and a denied grant in the tree.
func (bd *builder) denial(row *Row, s *statement.DenialDoc, dec *authority.Decision) {
	kind := AttnDenial
	if EscalationCodes[authority.Code(s.ReasonCode)] {
		kind = AttnEscalation
	}
	bd.flag(row, kind, s.ReasonCode, fmt.Sprintf("%s %s by %s denied (%s): %s", s.StatementType, orDash(s.StatementID),
		orDash(row.Actor), s.ReasonCode, s.Reason))
	if dec == nil || dec.Statement == nil {
		if s.Envelope != nil {
			if inner, err := sign.ParseEnvelopeValue(*s.Envelope); err == nil {
				if ist, err := statement.Parse(s.StatementType, inner.Payload); err == nil {
					bd.innerPath(row, ist, inner.KeyID)
					bd.deniedGrant(row, ist, s.ReasonCode)
				}
			}
		}
		return
	}
	bd.innerPath(row, dec.Statement, s.SignerKeyID)
	bd.deniedGrant(row, dec.Statement, s.ReasonCode)
}

func (bd *builder) innerPath(row *Row, st statement.Statement, keyID string) {
	if k := bd.e.Key(keyID); k != nil {
		row.Actor = k.Name
	}
	switch s := st.(type) {
	case *statement.ConfirmDoc:
		row.Path = []string{bd.name(keyID)}
	case *statement.DelegateDoc:
		row.Path = bd.path(s.ParentRef, keyID)
	case *statement.ReceiptDoc:
		ref := s.AuthorizationRef
		if p := bd.e.Pending(s.PendingRef); !s.IsPending() && p != nil {
			ref = p.Grant
		}
		row.Path = bd.path(ref, keyID)
	case *statement.RevokeDoc:
		row.Path = bd.path(s.TargetRef, keyID)
	case *statement.StopDoc:
		row.Path = bd.actorPath(s.Workflow, keyID, "")
	case *statement.ResumeDoc:
		row.Path = bd.actorPath(s.Workflow, keyID, "")
	}
}

func (bd *builder) deniedGrant(row *Row, st statement.Statement, code string) {
	var g *statement.Grant
	parent, kind := "", string(statement.Confirm)
	switch s := st.(type) {
	case *statement.ConfirmDoc:
		g = &s.Grant
	case *statement.DelegateDoc:
		g, parent, kind = &s.Grant, s.ParentRef, string(statement.Delegate)
	default:
		return
	}
	out := &Grant{ID: st.ID(), Kind: kind, Index: row.Index, Parent: parent, Issuer: row.Actor, Grantee: g.Grantee.Name,
		Depth: 1, Capabilities: g.Scope.Capabilities, Targets: g.Scope.Targets, Steps: g.Scope.StepIDs,
		Principals: g.Scope.Principals, TTLSeconds: g.TTLSeconds, Revocable: g.Revocable, Denied: true, Code: code, Status: row.Status}
	if p := bd.e.Grant(parent); p != nil {
		out.Depth = p.Depth + 1
	}
	for _, k := range slices.Sorted(maps.Keys(g.Limits)) {
		out.Limits = append(out.Limits, Limit{Key: k, Max: g.Limits[k]})
	}
	bd.r.Grants = append(bd.r.Grants, out)
}

// path is the authority chain of a grant: its principal, the grants from
// the CONFIRM down to it, and the signer.
func (bd *builder) path(grant, signerKey string) []string {
	var chain []string
	root := ""
	for g, n := bd.e.Grant(grant), 0; g != nil && n < 64; g, n = bd.e.Grant(g.Parent), n+1 {
		chain = append(chain, g.ID)
		root = g.RootKey
		if g.Parent == "" {
			break
		}
	}
	if len(chain) == 0 {
		chain = []string{grant + " (not in this bundle)"}
	}
	slices.Reverse(chain)
	if root != "" {
		chain = append([]string{bd.name(root)}, chain...)
	}
	return append(chain, bd.name(signerKey))
}

// actorPath is the authority of a STOP's or RESUME's signer: the admin,
// the workflow's owner, or a grant it holds.
func (bd *builder) actorPath(wf, keyID, stopID string) []string {
	m := bd.e.Meta()
	switch {
	case m != nil && keyID == m.AdminKeyID:
		return []string{bd.name(keyID) + " (admin)"}
	case bd.e.Workflow(wf) != nil && bd.e.Workflow(wf).Owner == keyID:
		return []string{bd.name(keyID) + " (owner of " + wf + ")"}
	}
	for _, id := range bd.grants {
		if g := bd.e.Grant(id); g != nil && g.GranteeKey == keyID {
			return bd.path(id, keyID)
		}
	}
	return []string{bd.name(keyID)}
}

// name is a key's bound name, or its short id.
func (bd *builder) name(keyID string) string {
	if k := bd.e.Key(keyID); k != nil {
		return k.Name
	}
	if len(keyID) > 12 {
		keyID = keyID[:12]
	}
	return "key " + keyID
}

func (bd *builder) flag(row *Row, kind, code, text string) {
	if !slices.Contains(row.Flags, kind) {
		row.Flags = append(row.Flags, kind)
	}
	bd.attend(kind, &row.Index, code, text)
}

func (bd *builder) attend(kind string, index *uint64, code, text string) {
	var ip *uint64
	if index != nil {
		i := *index
		ip = &i
	}
	bd.r.Attention = append(bd.r.Attention, Attention{Kind: kind, Index: ip, Code: code, Text: text})
}

// finish reads the final state into the grant tree, stops and pendings, and
// sorts what needs attention.
func (bd *builder) finish() {
	r := bd.r
	if !bd.asOf.IsZero() {
		r.AsOf = statement.FormatLoggedAt(bd.asOf)
	}
	if r.Failure != nil {
		r.Attention = append(r.Attention, Attention{Kind: AttnVerification, Index: r.Failure.Index, Text: r.Failure.String()})
	}
	if w := bd.e.Workflow(r.Workflow); w != nil {
		r.Owner = bd.name(w.Owner)
	}
	var inForce []*authority.StopRec
	for _, id := range bd.stopIDs {
		s := bd.e.StopRecord(id)
		if s == nil {
			continue
		}
		out := &Stop{ID: s.ID, Index: s.Index, Scope: s.Scope, Step: s.Step, By: bd.name(s.SignerKey), Role: s.Role,
			Resumed: s.Resumed, ResumedBy: s.ResumedBy}
		if row := bd.rows[s.Index]; row != nil {
			out.By = row.Actor
		}
		if d := bd.stopDoc(s.Index); d != nil {
			out.TakeoverMode, out.TakeoverTo, out.Reason = d.TakeoverMode, d.TakeoverTo, d.Reason
		}
		r.Stops = append(r.Stops, out)
		if !s.Resumed {
			inForce = append(inForce, s)
		}
	}
	for _, p := range r.Pendings {
		rec := bd.e.Pending(p.ID)
		if rec == nil || rec.Hold == nil || rec.Index != p.Index {
			continue
		}
		state, why := bd.e.HoldState(rec, bd.asOf)
		h := &Held{State: state, Why: why, ExpiresAt: rec.Hold.Deadline, Answers: bd.answers[p.ID]}
		for _, rule := range rec.Hold.Rules {
			h.Needs = append(h.Needs, fmt.Sprintf("%d of %s (rule %s of %s)", rule.Quorum, strings.Join(rule.Approvers, ", "), rule.RuleID, rule.Grant))
		}
		p.Held = h
		if row := bd.rows[p.Index]; row != nil {
			row.Held = h
		}
	}
	accepted := map[string]*Grant{}
	for _, id := range bd.grants {
		g := bd.e.Grant(id)
		if g == nil {
			continue
		}
		out := &Grant{ID: g.ID, Kind: g.Kind, Index: g.Index, Parent: g.Parent, Issuer: bd.name(g.IssuerKey),
			Grantee: g.GranteeName, Depth: g.Depth, ScopeHash: g.ScopeHash,
			Capabilities: g.Descriptor.Capabilities, Targets: g.Descriptor.Targets, Steps: g.Descriptor.StepIDs,
			Principals: g.Descriptor.Principals, ExpiresAt: g.Descriptor.ExpiresAt, Revocable: g.Revocable,
			Revoked: g.Revoked, RevokedBy: g.RevokedBy}
		if row := bd.rows[g.Index]; row != nil {
			out.Status = row.Status
			if ts, err := statement.ParseTimestamp(row.Timestamp); err == nil {
				if exp, err := statement.ParseTimestamp(g.Descriptor.ExpiresAt); err == nil {
					out.TTLSeconds = int64(exp.Sub(ts) / time.Second)
				}
			}
		}
		if exp, err := statement.ParseTimestamp(g.Descriptor.ExpiresAt); err == nil && !bd.asOf.IsZero() && !bd.asOf.Before(exp) {
			out.Expired = true
		}
		for p := bd.e.Grant(g.Parent); p != nil && !out.Revoked; p = bd.e.Grant(p.Parent) {
			if p.Revoked {
				out.RevokedVia = p.ID
				break
			}
			if p.Parent == "" {
				break
			}
		}
		var stops []string
		for _, s := range inForce {
			if s.Scope == statement.StopChain {
				stops = append(stops, "chain STOP "+s.ID)
			} else if stepCovered(g.Descriptor.StepIDs, s.Step) {
				stops = append(stops, "step "+s.Step+" STOP "+s.ID)
			}
		}
		out.Stopped = strings.Join(stops, ", ")
		ch := bd.charge[g.ID]
		for _, k := range slices.Sorted(maps.Keys(g.Descriptor.Limits)) {
			l := Limit{Key: k, Max: g.Descriptor.Limits[k], Reserved: ch[k][0], Consumed: ch[k][1], Charged: g.Spent[k]}
			l.Remaining = l.Max - l.Charged
			out.Limits = append(out.Limits, l)
		}
		accepted[g.ID] = out
		r.Grants = append(r.Grants, out)
	}
	sort.SliceStable(r.Grants, func(i, j int) bool { return r.Grants[i].Index < r.Grants[j].Index })
	for _, p := range r.Pendings {
		if p.Outcome != "" {
			continue
		}
		what := fmt.Sprintf("pending %s (%s → %s, step %s, by %s) has no outcome: in flight, or lost; its reserve %s stays charged",
			p.ID, p.Action, p.Target, p.Step, p.Actor, amounts(p.Reserve))
		if bd.o.BundleFile && bd.subject != nil && p.Index >= *bd.subject {
			what = fmt.Sprintf("pending %s (%s → %s, step %s, by %s) has no outcome in this bundle, which ends at its subject #%d: an outcome logged later is not in it (custody prove --workflow on the workflow's latest entry, or a replay of the ledger, shows it)",
				p.ID, p.Action, p.Target, p.Step, p.Actor, *bd.subject)
		}
		if row := bd.rows[p.Index]; row != nil {
			bd.flag(row, AttnOpen, "", what)
		}
	}
	sort.SliceStable(r.Attention, func(i, j int) bool {
		a, b := r.Attention[i], r.Attention[j]
		if attnOrder[a.Kind] != attnOrder[b.Kind] {
			return attnOrder[a.Kind] < attnOrder[b.Kind]
		}
		return idxOf(a.Index) < idxOf(b.Index)
	})
	if bd.stoppedAt != nil && r.Failure == nil {
		// Verification passed but the model could not apply an entry:
		// cannot happen with the same decision function; say so if it does.
		r.Attention = append([]Attention{{Kind: AttnVerification, Index: bd.stoppedAt,
			Text: fmt.Sprintf("replay stopped at entry %d", *bd.stoppedAt)}}, r.Attention...)
	}
}

func (bd *builder) stopDoc(index uint64) *statement.StopDoc { return bd.stopDocs[index] }

// stepCovered reports whether some step a grant allows (patterns: exact,
// prefix/*, or *) is covered by a step STOP on stopStep (which covers
// stopStep and every step below it).
func stepCovered(grantSteps []string, stopStep string) bool {
	if len(grantSteps) == 0 {
		return true // any step
	}
	under := func(s string) bool { return s == stopStep || strings.HasPrefix(s, stopStep+"/") }
	for _, p := range grantSteps {
		if p == "*" {
			return true
		}
		if pre, ok := strings.CutSuffix(p, "/*"); ok {
			if under(pre) || strings.HasPrefix(stopStep, pre+"/") {
				return true
			}
			continue
		}
		if under(p) {
			return true
		}
	}
	return false
}

func idxOf(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// amounts prints a reserve or consumption map in key order.
func amounts(m map[string]int64) string {
	if len(m) == 0 {
		return "(none)"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// pairs writes side effects as "k=v, k=v", sorted by key.
func pairs(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

// Details are the lines of what a receipt row says happened, in the order
// the text and the page show them: the pending-to-outcome link, the
// reservation, the consumption, side effects, evidence and error.
func (row *Row) Details() []Detail {
	var out []Detail
	if h := row.Held; h != nil {
		text := h.State + " (until " + h.ExpiresAt + ")"
		if h.Why != "" {
			text += ": " + h.Why
		}
		out = append(out, Detail{Label: "approval", Text: text, Bad: h.State != "approved" && h.State != "held"})
		out = append(out, Detail{Label: "needs", Text: strings.Join(h.Needs, "; ")})
		if len(h.Answers) > 0 {
			out = append(out, Detail{Label: "answered", Text: strings.Join(h.Answers, ", ")})
		}
	}
	if row.ApprovalOf != "" && row.ApprovalReason != "" {
		out = append(out, Detail{Label: "approver's reason", Text: row.ApprovalReason})
	}
	if row.PendingRef != "" {
		d := Detail{Label: "outcome of", Text: row.PendingRef}
		if row.PendingIndex != nil {
			d.Text += fmt.Sprintf(" (#%d)", *row.PendingIndex)
			d.Link = row.PendingIndex
		}
		out = append(out, d)
	}
	if row.Outcome != "" {
		out = append(out, Detail{Label: "outcome", Text: fmt.Sprintf("%s (#%d)", row.Outcome, *row.OutcomeIndex), Link: row.OutcomeIndex})
	}
	if len(row.Reserve) > 0 {
		out = append(out, Detail{Label: "reserves", Text: amounts(row.Reserve)})
	}
	if len(row.Consumed) > 0 {
		out = append(out, Detail{Label: "consumed", Text: amounts(row.Consumed)})
	}
	if len(row.SideEffects) > 0 {
		out = append(out, Detail{Label: "side effects", Text: pairs(row.SideEffects)})
	}
	if len(row.EvidenceRefs) > 0 {
		out = append(out, Detail{Label: "evidence", Text: strings.Join(row.EvidenceRefs, ", ")})
	}
	if row.Error != "" {
		out = append(out, Detail{Label: "error", Text: row.Error, Bad: true})
	}
	return out
}

// Detail is one line of a row's details; Link is the entry it refers to.
type Detail struct {
	Label, Text string
	Link        *uint64
	Bad         bool
}
