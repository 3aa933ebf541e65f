package testlog

import (
	"fmt"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/statement"
)

// Author builds statements for one log: headers carry the log's origin, the
// clock's time (whole seconds) and the signer's next seq, and grants are
// sealed (scope_hash set with statement.Seal). It remembers every grant and
// pending receipt it built, so that later statements can refer to them by
// id (parent_scope_hash, a receipt's workflow and scope_hash, an outcome's
// step, action and target).
//
// Header increments the actor's Seq; a caller whose statement was denied
// gives it back (World does this).
type Author struct {
	Origin string
	Clock  *Clock

	grants   map[string]*GrantInfo
	pendings map[string]*statement.ReceiptDoc
}

// GrantInfo is what an Author remembers of a CONFIRM or DELEGATE it built.
type GrantInfo struct {
	ID        string
	Workflow  string
	ScopeHash string
	Grantee   string // name
}

// NewAuthor returns an author for the log with the given origin.
func NewAuthor(origin string, clock *Clock) *Author {
	return &Author{Origin: origin, Clock: clock, grants: map[string]*GrantInfo{}, pendings: map[string]*statement.ReceiptDoc{}}
}

// Grant returns what the author remembers of grant id, or nil.
func (au *Author) Grant(id string) *GrantInfo { return au.grants[id] }

// Header returns the common fields for a's next statement of kind k.
func (au *Author) Header(a *Actor, k statement.Kind) statement.Header {
	a.Seq++
	return statement.Header{Type: k, Timestamp: statement.FormatTimestamp(au.Clock.Now()), Log: au.Origin, Actor: a.Name, Seq: a.Seq}
}

// NewGrant returns a revocable grant to the actor. steps may be nil (any
// step), limits nil (no limits).
func NewGrant(to *Actor, workflow string, targets, caps, steps []string, limits map[string]int64, ttlSeconds int64) statement.Grant {
	return statement.Grant{Grantee: to.Grantee(),
		Scope:  scope.Scope{WorkflowID: workflow, Targets: targets, Capabilities: caps, StepIDs: steps},
		Limits: limits, TTLSeconds: ttlSeconds, Revocable: true}
}

// Enroll builds the admin's PRINCIPAL enrolling p.
func (au *Author) Enroll(admin, p *Actor, id string) *statement.PrincipalDoc {
	return &statement.PrincipalDoc{Header: au.Header(admin, statement.Principal), PrincipalID: id,
		Op: statement.OpEnroll, Name: p.Name, PublicKey: p.PublicKey()}
}

// Retire builds the admin's PRINCIPAL retiring p.
func (au *Author) Retire(admin, p *Actor, id string) *statement.PrincipalDoc {
	return &statement.PrincipalDoc{Header: au.Header(admin, statement.Principal), PrincipalID: id,
		Op: statement.OpRetire, Name: p.Name, PublicKey: p.PublicKey()}
}

// Confirm builds p's CONFIRM of g, sealed.
func (au *Author) Confirm(p *Actor, id string, g statement.Grant) *statement.ConfirmDoc {
	c := &statement.ConfirmDoc{Header: au.Header(p, statement.Confirm), ConfirmID: id, Grant: g, RiskLevel: "high"}
	au.seal(c, id, &c.Grant)
	return c
}

// Delegate builds a's DELEGATE of g under parent, sealed, with
// parent_scope_hash taken from the parent the author built.
func (au *Author) Delegate(a *Actor, id, parent string, g statement.Grant) *statement.DelegateDoc {
	d := &statement.DelegateDoc{Header: au.Header(a, statement.Delegate), DelegationID: id, ParentRef: parent, Grant: g}
	if p := au.grants[parent]; p != nil {
		d.ParentScopeHash = p.ScopeHash
	}
	au.seal(d, id, &d.Grant)
	return d
}

func (au *Author) seal(st statement.Statement, id string, g *statement.Grant) {
	if err := statement.Seal(st); err != nil {
		panic(fmt.Sprintf("testlog: sealing %s %s: %v", st.Head().Type, id, err))
	}
	au.grants[id] = &GrantInfo{ID: id, Workflow: g.Scope.WorkflowID, ScopeHash: g.ScopeHash, Grantee: g.Grantee.Name}
}

// Pending builds a's pending RECEIPT under grant auth; its workflow and
// scope_hash are the grant's.
func (au *Author) Pending(a *Actor, id, auth, step, action, target string, reserve map[string]int64) *statement.ReceiptDoc {
	r := &statement.ReceiptDoc{Header: au.Header(a, statement.Receipt), ReceiptID: id, StepID: step, Action: action,
		Target: target, AuthorizationRef: auth, Result: statement.ResultPending, Reserve: reserve}
	if g := au.grants[auth]; g != nil {
		r.Workflow, r.ScopeHash = g.Workflow, g.ScopeHash
	}
	au.pendings[id] = r
	return r
}

// Outcome builds a's outcome RECEIPT (result success, failure or partial)
// of the pending receipt pendingRef, matching it.
func (au *Author) Outcome(a *Actor, id, pendingRef, result string, consumed map[string]int64) *statement.ReceiptDoc {
	p := au.pendings[pendingRef]
	if p == nil {
		panic(fmt.Sprintf("testlog: outcome %s of unknown pending receipt %s", id, pendingRef))
	}
	return &statement.ReceiptDoc{Header: au.Header(a, statement.Receipt), ReceiptID: id, Workflow: p.Workflow,
		StepID: p.StepID, Action: p.Action, Target: p.Target, AuthorizationRef: p.AuthorizationRef, Result: result,
		ScopeHash: p.ScopeHash, Consumed: consumed, PendingRef: pendingRef}
}

// Revoke builds a's REVOKE of grant target.
func (au *Author) Revoke(a *Actor, id, target, reason string) *statement.RevokeDoc {
	r := &statement.RevokeDoc{Header: au.Header(a, statement.Revoke), RevokeID: id, TargetRef: target, Reason: reason}
	if g := au.grants[target]; g != nil {
		r.Workflow = g.Workflow
	}
	return r
}

// StopChain builds a's chain STOP of workflow wf (takeover: human).
func (au *Author) StopChain(a *Actor, id, wf, reason string) *statement.StopDoc {
	return &statement.StopDoc{Header: au.Header(a, statement.Stop), RequestID: id, Workflow: wf,
		StopScope: statement.StopChain, TakeoverMode: statement.TakeoverHuman, Reason: reason}
}

// StopStep builds a's STOP of one step (and the steps below it).
func (au *Author) StopStep(a *Actor, id, wf, step, reason string) *statement.StopDoc {
	return &statement.StopDoc{Header: au.Header(a, statement.Stop), RequestID: id, Workflow: wf,
		StopScope: statement.StopStep, StepID: step, TakeoverMode: statement.TakeoverPause, Reason: reason}
}

// Resume builds a's RESUME lifting stopRef.
func (au *Author) Resume(a *Actor, id, wf, stopRef string) *statement.ResumeDoc {
	return &statement.ResumeDoc{Header: au.Header(a, statement.Resume), ResumeID: id, Workflow: wf, StopRef: stopRef}
}
