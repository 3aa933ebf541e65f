package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Hooks are the points where a runtime plugs its own behaviour into a
// Runtime. Every field is optional. A Before* hook vetoes by returning an
// error: nothing is written and the error is returned. Hooks run on the
// calling goroutine, except OnStop and OnTakeover, which run on the
// goroutine watching the workflow while a step executes.
type Hooks struct {
	// BeforeConfirm sees a CONFIRM before it is signed (a person's
	// confirmation step: show it, ask, log it).
	BeforeConfirm func(ctx context.Context, c *statement.ConfirmDoc) error
	// AfterConfirm sees the ledger's verified acceptance of a CONFIRM.
	AfterConfirm func(ctx context.Context, r *Receipt)
	// BeforeExecute sees a step before its pending receipt is written.
	BeforeExecute func(ctx context.Context, s Step) error
	// AfterExecute sees what a step did, after its outcome receipt was
	// written (or failed to be: err says).
	AfterExecute func(ctx context.Context, s Step, o Outcome, err error)
	// OnStop sees a STOP that covers a step while it executes, just
	// before the step's context is cancelled.
	OnStop func(ctx context.Context, stop *statement.StopDoc, index uint64)
	// OnTakeover sees a STOP that hands the workflow over to this
	// runtime's agent (takeover_to is its name).
	OnTakeover func(ctx context.Context, stop *statement.StopDoc, index uint64)
	// EmitReceipt sees every verified answer this runtime gets from the
	// ledger, accepted or denied, to ship it to an audit sink.
	EmitReceipt func(ctx context.Context, r *Receipt)
	// OnHeld sees a step's pending receipt held for approval (DESIGN
	// §7): r.Rules say who must approve, r.ExpiresAt until when.
	OnHeld func(ctx context.Context, s Step, r *Receipt)
	// OnApprovalProgress sees the server's advisory view of a held step
	// each time it changes while Execute waits.
	OnApprovalProgress func(ctx context.Context, s Step, st api.ApprovalState)
}

// Runtime is an agent (or person) with a key and a name, writing to one
// log. It fills statement headers (timestamp, log, actor, seq), seals and
// signs them, and appends them through a Client. It is safe for
// concurrent use. Appends made while another is in flight wait for it and
// then go together, with consecutive seqs, in one batch request (POST
// /v1/entries/batch), which the ledger decides in that order and commits
// together: concurrent steps share round trips and commits instead of
// queueing for them one by one.
type Runtime struct {
	c     *Client
	priv  ed25519.PrivateKey
	pub   ed25519.PublicKey
	keyID string
	hooks Hooks

	// Now is the clock of statement timestamps (default time.Now).
	Now func() time.Time
	// WatchTimeout bounds how long Execute waits to connect to the
	// workflow's event stream before it refuses to run a step (default 10s).
	WatchTimeout time.Duration

	mu      sync.Mutex
	name    string       // guarded by mu; "" until known
	next    uint64       // guarded by mu; the next seq, 0 when it must be fetched
	queue   []*appendReq // guarded by mu: appends waiting for the next round
	sending bool         // guarded by mu: a round is being sent
	serial  int          // guarded by mu: rounds still to send one statement at a time
	noBatch bool         // guarded by mu: the server has no batch endpoint
}

// appendReq is one statement waiting for, or in, a round.
type appendReq struct {
	ctx   context.Context
	st    statement.Statement
	tries int
	done  chan struct{}
	rec   *Receipt
	err   error
}

type aloneKey struct{}

// Alone returns a context under which Runtime.Append sends its statement
// in a round of its own, never in a batch. Use it for a statement the
// ledger may well deny (out of scope, over budget, under a STOP): a denial
// inside a batch costs the statements after it a resend (the ledger
// withdraws them undecided, and they are signed again with the right seq).
func Alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

func alone(ctx context.Context) bool { v, _ := ctx.Value(aloneKey{}).(bool); return v }

// MaxBatch is the most statements a Runtime sends in one round.
const MaxBatch = 128

// serialRounds is how many rounds a Runtime sends one statement at a time
// after a server that does not withdraw (an older one) denied the
// statements after a denied one in a batch seq_mismatch (besides the
// rounds that resend them): one at a time, no denial can cost another
// statement its seq.
const serialRounds = 8

// NewRuntime returns a runtime signing with priv under name (the name the
// log binds, or will bind, to the key; "" to ask the ledger for it at the
// first append).
func NewRuntime(c *Client, priv ed25519.PrivateKey, name string, hooks *Hooks) *Runtime {
	r := &Runtime{c: c, priv: priv, pub: priv.Public().(ed25519.PublicKey), name: name, Now: time.Now, WatchTimeout: 10 * time.Second}
	r.keyID = sign.KeyID(r.pub)
	if hooks != nil {
		r.hooks = *hooks
	}
	return r
}

// Client is the runtime's client.
func (r *Runtime) Client() *Client { return r.c }

// Name is the runtime's name ("" if not known yet).
func (r *Runtime) Name() string { r.mu.Lock(); defer r.mu.Unlock(); return r.name }

// PublicKey is the runtime's public key.
func (r *Runtime) PublicKey() ed25519.PublicKey { return r.pub }

// Append fills st's header, seals it (scope_hash of a grant), signs it
// and appends it; see Client.Append for the answers. Denied statements
// consume no seq; after a seq_mismatch or an answer that never came, the
// next seq is fetched from the ledger again.
//
// Concurrent Appends are batched (see Runtime). A statement withdrawn by
// the ledger because one before it in its batch was not accepted (its seq
// was then one too high) is signed again with the right seq and sent
// again, so the caller sees its own decision, and the log holds no
// seq_mismatch DENIAL for it.
func (r *Runtime) Append(ctx context.Context, st statement.Statement) (*Receipt, error) {
	req := &appendReq{ctx: ctx, st: st, done: make(chan struct{})}
	r.mu.Lock()
	r.queue = append(r.queue, req)
	lead := !r.sending
	r.sending = true
	r.mu.Unlock()
	if lead {
		r.drive()
	}
	select {
	case <-req.done:
		return req.rec, req.err
	case <-ctx.Done():
		// The statement may still be sent and logged; the round that
		// sends it keeps the seq right.
		return nil, ctx.Err()
	}
}

// drive sends one round: the queued statements, in order, in one request.
// If more are queued when it ends, another goroutine sends the next round,
// so that the caller that started this one returns with its answer.
func (r *Runtime) drive() {
	r.mu.Lock()
	n := min(len(r.queue), MaxBatch)
	if r.serial > 0 || r.noBatch {
		n = min(n, 1)
		if r.serial > 0 {
			r.serial--
		}
	}
	// A statement sent Alone goes in a round of its own.
	for i, q := range r.queue[:n] {
		if alone(q.ctx) {
			n = max(i, 1)
			break
		}
	}
	round := slices.Clone(r.queue[:n])
	r.queue = slices.Delete(r.queue, 0, n)
	r.mu.Unlock()

	requeue := r.send(round)

	r.mu.Lock()
	r.queue = append(requeue, r.queue...)
	more := len(r.queue) > 0
	r.sending = more
	r.mu.Unlock()
	if more {
		go r.drive()
	}
}

// send appends one round's statements with consecutive seqs and finishes
// each request, except those it returns to be sent again.
func (r *Runtime) send(round []*appendReq) (requeue []*appendReq) {
	finish := func(q *appendReq, rec *Receipt, err error) {
		q.rec, q.err = rec, err
		if rec != nil && r.hooks.EmitReceipt != nil {
			r.hooks.EmitReceipt(q.ctx, rec)
		}
		close(q.done)
	}
	live := round[:0:0]
	for _, q := range round {
		if err := q.ctx.Err(); err != nil {
			finish(q, nil, err)
			continue
		}
		live = append(live, q)
	}
	if len(live) == 0 {
		return nil
	}
	// One statement goes under its caller's context, as a lone Append
	// would. A batch is not cut short when one of its callers gives up:
	// the others wait for its answer (the HTTP client's timeout bounds it).
	ctx := live[0].ctx
	if len(live) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
	}

	r.mu.Lock()
	name, next := r.name, r.next
	r.mu.Unlock()
	if next == 0 || name == "" {
		ks, err := r.c.KeySeq(ctx, r.keyID)
		if err == nil && name == "" && !ks.Bound {
			err = fmt.Errorf("key %s is not bound in the log: give the runtime its name", r.keyID)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "key ") {
				err = fmt.Errorf("finding the next seq of key %s: %w", r.keyID, err)
			}
			for _, q := range live {
				finish(q, nil, err)
			}
			return nil
		}
		next = ks.NextSeq
		if name == "" {
			name = ks.Name
		}
		r.mu.Lock()
		r.name, r.next = name, next
		r.mu.Unlock()
	}

	// Fill, seal and sign each, with consecutive seqs.
	var sent []*appendReq
	var envs [][]byte
	now := statement.FormatTimestamp(r.Now())
	for _, q := range live {
		h := q.st.Head()
		h.Type = statement.KindOf(q.st)
		h.Timestamp = now
		h.Log = r.c.Origin()
		h.Actor = name
		h.Seq = next + uint64(len(sent))
		if err := statement.Seal(q.st); err != nil {
			finish(q, nil, err)
			continue
		}
		_, raw, err := statement.Sign(r.priv, q.st)
		if err != nil {
			finish(q, nil, err)
			continue
		}
		sent, envs = append(sent, q), append(envs, raw)
	}
	if len(sent) == 0 {
		return nil
	}

	recs, errs := make([]*Receipt, len(sent)), make([]error, len(sent))
	if len(sent) == 1 {
		recs[0], errs[0] = r.c.Append(ctx, envs[0])
	} else {
		var err error
		recs, errs, err = r.c.AppendBatch(ctx, envs)
		if errors.Is(err, ErrNoBatch) {
			r.mu.Lock()
			r.noBatch = true
			r.mu.Unlock()
			return sent // one at a time from now on
		}
		if err != nil {
			r.mu.Lock()
			r.next = 0 // the outcome is unknown: ask the ledger next time
			r.mu.Unlock()
			for _, q := range sent {
				finish(q, nil, err)
			}
			return nil
		}
	}

	// Read the answers in order. After a statement that was not accepted,
	// the later ones carried a seq too high: the ledger withdraws them
	// without deciding them (withdrawn), and they are signed again and
	// sent in the next round. A server that decides them anyway denies
	// them seq_mismatch (that DENIAL stays in the log); those are sent
	// again too, and the next rounds go one statement at a time.
	broken, legacy := false, false
	for i, q := range sent {
		rec, err := recs[i], errs[i]
		if rec != nil {
			rec.Statement = q.st
		}
		var denied *DeniedError
		var refused *RefusedError
		var held *HeldError
		mismatch := errors.As(err, &denied) && denied.Receipt.ReasonCode == string(authority.SeqMismatch)
		withdrawn := errors.As(err, &refused) && refused.ReasonCode == string(authority.Withdrawn)
		switch {
		case withdrawn && broken:
			// Not decided: only statements after one that was not
			// accepted are withdrawn, so each round decides its first
			// statement at least, and resending always ends.
			requeue = append(requeue, q)
			continue
		case err == nil, errors.As(err, &held):
			// Held is logged: its seq is taken.
			r.mu.Lock()
			r.next = q.st.Head().Seq + 1
			r.mu.Unlock()
		case (mismatch || errors.As(err, &refused)) && broken && q.tries < 3:
			// Denied (or refused, rate-limited) for a seq one too high
			// only because a statement before it was not accepted.
			q.tries++
			legacy = true
			requeue = append(requeue, q)
			continue
		case mismatch:
			r.mu.Lock()
			r.next = 0
			r.mu.Unlock()
			broken = true
		case errors.As(err, &denied), errors.As(err, &refused):
			broken = true
		default:
			r.mu.Lock()
			r.next = 0 // the outcome is unknown: ask the ledger next time
			r.mu.Unlock()
			broken = true
		}
		finish(q, rec, err)
	}
	if legacy {
		r.mu.Lock()
		r.serial = len(requeue) + serialRounds
		r.mu.Unlock()
	}
	return requeue
}

// NewID returns a fresh statement id: <prefix>_<16 random hex digits>.
func NewID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// Grant describes a CONFIRM or DELEGATE. Sets are made canonical (sorted,
// without duplicates) for you.
type Grant struct {
	ID           string // default: a fresh id
	Workflow     string // DELEGATE: default the parent's
	Grantee      string
	GranteeKey   ed25519.PublicKey
	Steps        []string // absent: any step
	Targets      []string
	Capabilities []string
	Principals   []string // absent: any grantee below
	Limits       map[string]int64
	TTL          time.Duration // whole seconds
	Revocable    bool
	Risk         string // CONFIRM only: low, medium, high
	// Approvals are the grant's approval rules (DESIGN §7); they are
	// sorted by rule_id for you.
	Approvals []scope.Rule
}

func (g *Grant) grant(workflow string) statement.Grant {
	return statement.Grant{Grantee: statement.Grantee{Name: g.Grantee, PublicKey: sign.EncodePublicKey(g.GranteeKey)},
		Scope: scope.Scope{WorkflowID: workflow, StepIDs: optionalSet(g.Steps), Targets: canonicalSet(g.Targets),
			Capabilities: canonicalSet(g.Capabilities), Principals: optionalSet(g.Principals)},
		Limits: g.Limits, TTLSeconds: int64(g.TTL / time.Second), Revocable: g.Revocable, Approvals: sortedRules(g.Approvals)}
}

func canonicalSet(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	out := slices.Clone(v)
	slices.Sort(out)
	return slices.Compact(out)
}

func optionalSet(v []string) []string {
	s := canonicalSet(v)
	if len(s) == 1 && s[0] == "*" {
		return nil
	}
	return s
}

// Confirm grants an agent authority (the runtime's key must be an
// enrolled principal's). BeforeConfirm may veto it.
func (r *Runtime) Confirm(ctx context.Context, g Grant) (*Receipt, error) {
	id := g.ID
	if id == "" {
		id = NewID("confirm")
	}
	doc := &statement.ConfirmDoc{ConfirmID: id, Grant: g.grant(g.Workflow), RiskLevel: g.Risk}
	if r.hooks.BeforeConfirm != nil {
		if err := r.hooks.BeforeConfirm(ctx, doc); err != nil {
			return nil, fmt.Errorf("before_confirm: %w", err)
		}
	}
	rec, err := r.Append(ctx, doc)
	if err == nil && r.hooks.AfterConfirm != nil {
		r.hooks.AfterConfirm(ctx, rec)
	}
	return rec, err
}

// grantOf fetches an accepted CONFIRM or DELEGATE by id.
func (r *Runtime) grantOf(ctx context.Context, id string) (*statement.Grant, error) {
	e, err := r.c.Statement(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w", id, err)
	}
	k := statement.Kind(e.Kind)
	if k != statement.Confirm && k != statement.Delegate {
		return nil, fmt.Errorf("%s is a %s, not a grant", id, e.Kind)
	}
	st, err := statement.Parse(k, e.Statement)
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w", id, err)
	}
	return statement.GrantOf(st), nil
}

// Delegate hands a sub-agent part of the grant parentID (the runtime's
// key must be its grantee). The workflow and parent_scope_hash are read
// from the parent.
func (r *Runtime) Delegate(ctx context.Context, parentID string, g Grant) (*Receipt, error) {
	parent, err := r.grantOf(ctx, parentID)
	if err != nil {
		return nil, err
	}
	wf := g.Workflow
	if wf == "" {
		wf = parent.Scope.WorkflowID
	}
	id := g.ID
	if id == "" {
		id = NewID("delegate")
	}
	return r.Append(ctx, &statement.DelegateDoc{DelegationID: id, ParentRef: parentID, ParentScopeHash: parent.ScopeHash, Grant: g.grant(wf)})
}

// StopSpec describes a STOP.
type StopSpec struct {
	ID         string // default: a fresh id
	Workflow   string
	Step       string // "" stops the whole chain
	Takeover   string // human (default), pause, delegate_to_other_agent
	TakeoverTo string
	Reason     string
}

// Stop halts a step (and the steps below it) or, with no step, the whole
// workflow.
func (r *Runtime) Stop(ctx context.Context, s StopSpec) (*Receipt, error) {
	doc := &statement.StopDoc{RequestID: s.ID, Workflow: s.Workflow, StopScope: statement.StopChain, StepID: s.Step,
		TakeoverMode: s.Takeover, TakeoverTo: s.TakeoverTo, Reason: s.Reason}
	if doc.RequestID == "" {
		doc.RequestID = NewID("stop")
	}
	if s.Step != "" {
		doc.StopScope = statement.StopStep
	}
	if doc.TakeoverMode == "" {
		doc.TakeoverMode = statement.TakeoverHuman
	}
	return r.Append(ctx, doc)
}

// Receipt appends a RECEIPT; an empty receipt_id gets a fresh one, and an
// empty scope_hash or workflow is read from the grant it names.
func (r *Runtime) Receipt(ctx context.Context, doc *statement.ReceiptDoc) (*Receipt, error) {
	if doc.ReceiptID == "" {
		doc.ReceiptID = NewID("receipt")
	}
	if doc.ScopeHash == "" || doc.Workflow == "" {
		g, err := r.grantOf(ctx, doc.AuthorizationRef)
		if err != nil {
			return nil, err
		}
		if doc.ScopeHash == "" {
			doc.ScopeHash = g.ScopeHash
		}
		if doc.Workflow == "" {
			doc.Workflow = g.Scope.WorkflowID
		}
	}
	return r.Append(ctx, doc)
}

// Step is an irreversible step Execute gates.
type Step struct {
	ReceiptID string // the pending receipt's id (default: a fresh one)
	Workflow  string // default: the grant's
	StepID    string
	Action    string
	Target    string
	Auth      string // the id of the grant the agent acts under
	ScopeHash string // default: the grant's
	Reserve   map[string]int64
	// Params, when set, is the exact call the step makes (JSON, such as
	// a tool call's arguments): the pending receipt carries its
	// params_sha256, shown to approvers, and a held step runs only if the
	// hash recomputed from Params just before running is the approved one.
	Params []byte
	// ApprovalWait bounds how long Execute waits for people to approve a
	// held step (default DefaultApprovalWait, never past its deadline).
	ApprovalWait time.Duration
}

// covers reports whether a STOP applies to the step: a chain STOP of its
// workflow, or a step STOP of its step or a step above it (step_3 covers
// step_3/a).
func (s *Step) covers(stop *statement.StopDoc) bool {
	if stop.Workflow != s.Workflow {
		return false
	}
	return stop.StopScope == statement.StopChain || s.StepID == stop.StepID || strings.HasPrefix(s.StepID, stop.StepID+"/")
}

// Outcome is what a step did. The zero value records success (or, when
// fn returns an error, failure with that error).
type Outcome struct {
	Result      string // success, failure, partial
	Consumed    map[string]int64
	SideEffects map[string]string
	Evidence    []string
	Error       string
}

// StoppedError is the cause of a step's context when a STOP covering it
// arrived while it ran (context.Cause(ctx)).
type StoppedError struct {
	Stop  *statement.StopDoc
	Index uint64
}

func (e *StoppedError) Error() string {
	what := "workflow " + e.Stop.Workflow
	if e.Stop.StopScope == statement.StopStep {
		what = "step " + e.Stop.StepID + " of " + what
	}
	return fmt.Sprintf("stopped: %s by STOP %s at index %d (takeover %s): %s", what, e.Stop.RequestID, e.Index, e.Stop.TakeoverMode, e.Stop.Reason)
}

// ErrNotExecuted wraps the error of an Execute that never ran its step.
var ErrNotExecuted = errors.New("the step was not executed")

// Execution is what Execute did.
type Execution struct {
	Pending *Receipt      // the accepted pending receipt (nil if it was not accepted)
	Ran     bool          // fn was called
	Outcome *Receipt      // the outcome receipt, if it was logged
	Stopped *StoppedError // the STOP that cancelled the step, if one did
	// Held is set when an approval rule held the pending receipt, and
	// Approval when the runtime verified its approval before running.
	Held     bool
	Approval *Approved
}

// Execute gates an irreversible step: it writes the pending receipt,
// waits for the ledger's durable, verified acceptance, connects to the
// workflow's event stream, and only then runs fn. It fails closed: no
// answer, a denial, an answer that does not verify, or no event stream
// means fn never runs (the error wraps ErrNotExecuted). While fn runs, a
// STOP covering the step cancels fn's context, with a *StoppedError as
// its cause. When fn returns, the outcome receipt is written, even after
// a STOP (it records what happened).
//
// The error is nil only if fn ran, returned nil, and its outcome was
// logged.
func (r *Runtime) Execute(ctx context.Context, step Step, fn func(ctx context.Context) (Outcome, error)) (*Execution, error) {
	ex := &Execution{}
	if r.hooks.BeforeExecute != nil {
		if err := r.hooks.BeforeExecute(ctx, step); err != nil {
			return ex, fmt.Errorf("%w: before_execute: %w", ErrNotExecuted, err)
		}
	}
	pending := &statement.ReceiptDoc{ReceiptID: step.ReceiptID, Workflow: step.Workflow, StepID: step.StepID,
		Action: step.Action, Target: step.Target, AuthorizationRef: step.Auth, Result: statement.ResultPending,
		ScopeHash: step.ScopeHash, Reserve: step.Reserve}
	if step.Params != nil {
		h, err := ParamsSHA256(step.Params)
		if err != nil {
			return ex, fmt.Errorf("%w: %w", ErrNotExecuted, err)
		}
		pending.ParamsSHA256 = h
	}
	rec, err := r.Receipt(ctx, pending)
	var held *HeldError
	if err != nil && !errors.As(err, &held) {
		return ex, fmt.Errorf("%w: %w", ErrNotExecuted, err)
	}
	ex.Pending = rec
	step.Workflow, step.ScopeHash, step.ReceiptID = pending.Workflow, pending.ScopeHash, pending.ReceiptID
	if held != nil {
		// Held for approval (DESIGN §7): wait, then run only on an
		// approval verified here; otherwise record a failure outcome
		// that says why, and never run.
		ex.Held = true
		if r.hooks.OnHeld != nil {
			r.hooks.OnHeld(ctx, step, rec)
		}
		params := ""
		if step.Params != nil {
			params, _ = ParamsSHA256(step.Params) // recomputed from the call about to be made
		}
		a, aerr := r.AwaitApproval(ctx, step.ReceiptID, AwaitOptions{Wait: step.ApprovalWait, ParamsSHA256: params,
			Progress: func(st api.ApprovalState) {
				if r.hooks.OnApprovalProgress != nil {
					r.hooks.OnApprovalProgress(ctx, step, st)
				}
			}})
		if aerr != nil {
			oerr := r.outcome(ctx, step, ex, Outcome{Result: statement.ResultFailure, Error: aerr.Error()}, nil)
			return ex, errors.Join(fmt.Errorf("%w: %w", ErrNotExecuted, aerr), oerr)
		}
		ex.Approval = a
	}

	// Watch the workflow from just after the pending receipt: every STOP
	// logged after it is seen, none is missed between the two.
	name := r.Name() // known now; read once, off the append lock
	fctx, stopFn := context.WithCancelCause(ctx)
	defer stopFn(nil)
	wctx, stopWatch := context.WithCancel(ctx)
	connected := make(chan struct{})
	var once sync.Once
	var stopMu sync.Mutex
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		proof := r.c.NewStepProof(r.priv, step.Workflow, rec.Index)
		r.c.WatchStep(wctx, step.Workflow, rec.Index, proof, func() { once.Do(func() { close(connected) }) }, func(e *api.Entry) bool {
			if statement.Kind(e.Kind) != statement.Stop {
				return true
			}
			st, err := statement.Parse(statement.Stop, e.Statement)
			if err != nil {
				return true
			}
			stop := st.(*statement.StopDoc)
			if stop.TakeoverTo != "" && stop.TakeoverTo == name && r.hooks.OnTakeover != nil {
				r.hooks.OnTakeover(wctx, stop, e.Index)
			}
			if !step.covers(stop) {
				return true
			}
			if r.hooks.OnStop != nil {
				r.hooks.OnStop(wctx, stop, e.Index)
			}
			se := &StoppedError{Stop: stop, Index: e.Index}
			stopMu.Lock()
			if ex.Stopped == nil {
				ex.Stopped = se
			}
			stopMu.Unlock()
			stopFn(se)
			return true
		})
	}()
	finishWatch := func() { stopWatch(); <-watchDone }
	t := time.NewTimer(r.WatchTimeout)
	select {
	case <-connected:
		t.Stop()
	case <-t.C:
		finishWatch()
		return ex, r.notRun(ctx, step, ex, fmt.Errorf("%w: no event stream for workflow %s within %s, so a STOP could not reach the step", ErrNotExecuted, step.Workflow, r.WatchTimeout))
	case <-ctx.Done():
		finishWatch()
		return ex, r.notRun(ctx, step, ex, fmt.Errorf("%w: %w", ErrNotExecuted, ctx.Err()))
	}

	ex.Ran = true
	out, ferr := r.run(fctx, fn)
	finishWatch()
	stopMu.Lock()
	stopped := ex.Stopped
	stopMu.Unlock()
	if stopped != nil && ferr != nil {
		ferr = errors.Join(ferr, stopped)
	}
	oerr := r.outcome(ctx, step, ex, out, ferr)
	if r.hooks.AfterExecute != nil {
		r.hooks.AfterExecute(ctx, step, out, errors.Join(ferr, oerr))
	}
	return ex, errors.Join(ferr, oerr)
}

// run calls fn, turning a panic into an error so that the outcome is
// still recorded.
func (r *Runtime) run(ctx context.Context, fn func(context.Context) (Outcome, error)) (out Outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the step panicked: %v", p)
		}
	}()
	return fn(ctx)
}

// notRun records that a step whose pending receipt was accepted never
// ran, so the pending receipt does not stay open, and returns err.
func (r *Runtime) notRun(ctx context.Context, step Step, ex *Execution, err error) error {
	oerr := r.outcome(ctx, step, ex, Outcome{Result: statement.ResultFailure, Error: "not executed: " + err.Error()}, nil)
	return errors.Join(err, oerr)
}

// outcome writes the outcome receipt of an executed (or abandoned) step.
// It is written even if ctx has ended: it records what happened.
func (r *Runtime) outcome(ctx context.Context, step Step, ex *Execution, out Outcome, ferr error) error {
	if out.Result == "" {
		out.Result = statement.ResultSuccess
		if ferr != nil {
			out.Result = statement.ResultFailure
		}
	}
	if out.Error == "" && ferr != nil && out.Result != statement.ResultSuccess {
		out.Error = ferr.Error()
	}
	doc := &statement.ReceiptDoc{Workflow: step.Workflow, StepID: step.StepID, Action: step.Action, Target: step.Target,
		AuthorizationRef: step.Auth, Result: out.Result, ScopeHash: step.ScopeHash, Consumed: out.Consumed,
		PendingRef: step.ReceiptID, SideEffects: out.SideEffects, EvidenceRefs: out.Evidence, Error: out.Error}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec, err := r.Receipt(octx, doc)
	if err != nil {
		return fmt.Errorf("recording the outcome of %s: %w", step.ReceiptID, err)
	}
	ex.Outcome = rec
	return nil
}

func sortedRules(rules []scope.Rule) []scope.Rule {
	if len(rules) == 0 {
		return nil
	}
	out := scope.CloneRules(rules)
	slices.SortStableFunc(out, func(a, b scope.Rule) int { return strings.Compare(a.RuleID, b.RuleID) })
	return out
}
