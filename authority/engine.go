package authority

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Verdict is what became of a submission.
type Verdict int

const (
	// Refused: DESIGN §4 steps 1–2 failed; nothing is logged.
	Refused Verdict = iota
	// Denied: a later check failed; the ledger logs a DENIAL.
	Denied
	// Accepted: the statement is logged and the state updated.
	Accepted
)

func (v Verdict) String() string {
	return [...]string{"refused", "denied", "accepted"}[v]
}

// Decision is the engine's answer for one submission.
type Decision struct {
	Verdict   Verdict
	Code      Code   // "" when accepted
	Reason    string // a sentence naming the statement, the rule and the values
	Kind      statement.Kind
	Statement statement.Statement // nil when the payload could not be read
	SignerKey string              // key id from the envelope
	// Notes are facts replay and audit flag without denying, such as an
	// outcome that consumed more than its pending receipt reserved.
	Notes []string
	// Hold is set when an accepted pending receipt is held for approval
	// (DESIGN §7): its deadline and matched rules.
	Hold *HoldInfo
}

// Err returns the decision as an error (nil when accepted).
func (d *Decision) Err() error {
	if d.Verdict == Accepted {
		return nil
	}
	return &DecisionError{Verdict: d.Verdict, Code: d.Code, Reason: d.Reason}
}

// DecisionError is a refusal or denial as an error.
type DecisionError struct {
	Verdict Verdict
	Code    Code
	Reason  string
}

func (e *DecisionError) Error() string { return string(e.Code) + ": " + e.Reason }

// ErrState is returned (wrapped) when the Store failed; the engine then
// refuses to decide anything more, because its view may be incomplete.
var ErrState = errors.New("authority: state store failed")

// Engine decides submissions against the state of one log.
type Engine struct {
	st *state
	// partial is set for a view that holds only some of the log's leaves
	// (a bundle: the trust chain and one workflow). See NewView.
	partial bool
	// own holds key ids the log signs with but does not bind (its
	// checkpoint keys); see RefuseKeys.
	own map[string]bool
}

// RefuseKeys names keys the log signs with that the log itself does not
// bind: its checkpoint keys, current or retired. What one of them signs is
// never a submission (DESIGN §1): Decide refuses it at step 2
// (bad_signature), as it refuses the keys bound in role log. The ledger
// names its checkpoint keys; a verifier or an audit names those of the key
// set it was given.
func (e *Engine) RefuseKeys(keyIDs ...string) {
	if e.own == nil {
		e.own = map[string]bool{}
	}
	for _, id := range keyIDs {
		e.own[id] = true
	}
}

// New returns an engine over the records in store.
func New(store Store) *Engine { return &Engine{st: newState(store)} }

// NewView returns an engine for replaying a partial view of a log: the
// trust chain and one workflow's complete back-link chain, as a bundle
// carries them. Leaves need not be contiguous; a key's seq must only grow
// (its other statements may be elsewhere); and a DENIAL whose reason rests
// on facts outside the view (WholeLogCodes) is reported in the decision's
// Notes instead of being re-checked. Everything else is decided exactly as
// the ledger decides it.
func NewView(store Store) *Engine { return &Engine{st: newState(store), partial: true} }

// WholeLogCodes are the denial reasons that can rest on leaves outside a
// workflow's view: another workflow's use of an id, key or name, a key's
// seq elsewhere, or a reference into another workflow.
var WholeLogCodes = map[Code]bool{
	SeqMismatch: true, DuplicateID: true, IdentityConflict: true, WorkflowMismatch: true,
}

// DryRun decides sub as Decide does and then undoes any change it made.
func (e *Engine) DryRun(sub Submission, index uint64, loggedAt time.Time) Decision {
	e.st.startJournal()
	defer e.st.undo()
	return e.Decide(sub, index, loggedAt)
}

// Err returns the Store failure that has stopped the engine from deciding
// (wrapping ErrState), or nil. Discard clears it.
func (e *Engine) Err() error {
	if e.st.err != nil {
		return fmt.Errorf("%w: %v", ErrState, e.st.err)
	}
	return nil
}

// Meta returns the log's parameters, or nil before GENESIS.
func (e *Engine) Meta() *Meta { return get[Meta](e.st, keyMeta) }

// Key returns the binding of a key id, or nil.
func (e *Engine) Key(keyID string) *KeyRec { return get[KeyRec](e.st, prefKey+keyID) }

// Grant returns an accepted grant, or nil.
func (e *Engine) Grant(id string) *GrantRec { return get[GrantRec](e.st, prefGrant+id) }

// Pending returns an accepted pending receipt, or nil.
func (e *Engine) Pending(id string) *PendingRec { return get[PendingRec](e.st, prefPend+id) }

// StopRecord returns an accepted STOP, or nil.
func (e *Engine) StopRecord(id string) *StopRec { return get[StopRec](e.st, prefStop+id) }

// Workflow returns a workflow's record, or nil.
func (e *Engine) Workflow(id string) *WorkflowRec { return get[WorkflowRec](e.st, prefWF+id) }

// StatementIndex returns the index and kind of an accepted statement id.
func (e *Engine) StatementIndex(id string) (uint64, statement.Kind, bool) {
	r := get[IDRec](e.st, prefID+id)
	if r == nil {
		return 0, "", false
	}
	return r.Index, statement.Kind(r.Kind), true
}

// NextSeq is the seq the key's next statement must carry (1 for an unbound key).
func (e *Engine) NextSeq(keyID string) uint64 {
	if k := e.Key(keyID); k != nil {
		return k.LastSeq + 1
	}
	return 1
}

// SigningKey returns the bound key of a key id as signatures are checked
// against it: an Ed25519 key or a passkey.
func (e *Engine) SigningKey(keyID string) (sign.Key, bool) {
	k := e.Key(keyID)
	if k == nil {
		return sign.Key{}, false
	}
	return k.SigningKey()
}

// PublicKey returns the bound Ed25519 public key of a key id (false for a
// passkey: see SigningKey).
func (e *Engine) PublicKey(keyID string) (ed25519.PublicKey, bool) {
	k := e.Key(keyID)
	if k == nil {
		return nil, false
	}
	pub := boundKey(k.PublicKey)
	return pub, pub != nil
}

// skewLimit is clock_skew_seconds as a Duration. It saturates: GENESIS may
// name more seconds than a Duration holds (about 292 years), and a wrapped
// product would silently enforce some other, possibly tiny, tolerance.
func skewLimit(secs int64) time.Duration {
	if secs > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(secs) * time.Second
}

// boundKey decodes the stored public key of a bound key. It passed
// sign.CheckPublicKey when it was bound (DESIGN §1), so it is only decoded
// here: the curve checks cost far more than verifying a signature.
func boundKey(s string) ed25519.PublicKey {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil
	}
	return ed25519.PublicKey(b)
}

// Dirty calls put for every record changed since the last Committed, in a
// fixed order, with its stored bytes (nil never occurs: records are never
// deleted).
func (e *Engine) Dirty(put func(key string, value []byte)) {
	for _, k := range e.st.dirtyKeys() {
		if !IsHint(k) {
			put(k, encode(e.st.cache[k]))
		}
	}
}

// DirtyHints is Dirty for the hint records (HintRec) changed since the
// last Committed: a store that keeps them saves later decisions work, and
// a store that does not loses nothing a decision needs. The ledger keeps
// them; replay does not.
func (e *Engine) DirtyHints(put func(key string, value []byte)) {
	for _, k := range e.st.dirtyKeys() {
		if IsHint(k) {
			put(k, encode(e.st.cache[k]))
		}
	}
}

// Committed tells the engine the dirty records are durable. It also bounds
// the cache: past maxCache records, clean ones are dropped.
func (e *Engine) Committed() {
	e.Written()
	if e.CacheLarge() {
		e.st.cache = map[string]any{}
	}
}

// Written tells the engine the dirty records are on their way to the Store
// (Dirty has been called), without promising they are durable yet: they
// stay cached. A caller that pipelines commits calls Written when it hands
// a batch over and Committed only when nothing is in flight.
func (e *Engine) Written() { clear(e.st.dirty) }

// CacheLarge reports whether Committed would drop the cache.
func (e *Engine) CacheLarge() bool { return len(e.st.cache) > maxCache }

// Discard forgets every change since the last Committed (the batch holding
// them was not committed), so the engine again reflects the Store.
func (e *Engine) Discard() {
	e.st.cache = map[string]any{}
	clear(e.st.dirty)
	e.st.err = nil
}

// maxCache bounds the decoded records kept between batches.
const maxCache = 200_000

// Submission is an envelope whose shape has been checked (DESIGN §4 step 1).
type Submission struct {
	Env *sign.Parsed
	// Verified is true when the caller has already verified Env's signature
	// against the public key whose id is Env.KeyID (the ledger does this in
	// parallel, before sequencing). A key id is the hash of its key, so the
	// key that verified is the key the id names.
	Verified bool
	// Parsed, when set, holds statement.Parse's result for Env's payload
	// (Statement or ParseErr), computed by the caller in parallel; Decide
	// then uses it instead of parsing again. It is only a cache: the rules
	// and their order are the same either way.
	Parsed   bool
	Stmt     statement.Statement
	ParseErr error
}

// Decide decides sub as the leaf at index, accepted at loggedAt. On
// acceptance the state is updated at once, so later submissions of the same
// batch see it. A refused or denied submission changes nothing.
func (e *Engine) Decide(sub Submission, index uint64, loggedAt time.Time) Decision {
	// A record the Store failed to read is not an absent record: a decision
	// that met a failed read is refused, and whatever it changed is undone,
	// so that nothing decided on a partial view is logged or committed.
	outer := e.st.journal == nil // DryRun journals (and undoes) itself
	if outer {
		e.st.startJournal()
	}
	d := e.decide(sub, index, loggedAt)
	if e.st.err != nil {
		if outer {
			e.st.undo()
		}
		return refuse(Decision{SignerKey: sub.Env.KeyID, Kind: d.Kind}, BadEnvelope, fmt.Sprintf("ledger state unavailable: %v", e.st.err))
	}
	if outer {
		e.st.stopJournal()
	}
	return d
}

// decide is Decide over a Store that has not failed.
func (e *Engine) decide(sub Submission, index uint64, loggedAt time.Time) Decision {
	d := Decision{SignerKey: sub.Env.KeyID}
	kind, _ := statement.KindOfPayloadType(sub.Env.PayloadType)
	d.Kind = kind
	if e.st.err != nil {
		return refuse(d, BadEnvelope, fmt.Sprintf("ledger state unavailable: %v", e.st.err))
	}
	meta := e.Meta()

	// Step 2: the signer. GENESIS at index 0 binds its own key.
	if e.own[sub.Env.KeyID] {
		return refuse(d, BadSignature, fmt.Sprintf("key %s is one of the log's checkpoint keys, which sign checkpoints only; an envelope it signed is never a submission", short(sub.Env.KeyID)))
	}
	signer := e.Key(sub.Env.KeyID)
	var pub ed25519.PublicKey
	var key sign.Key
	switch {
	case signer != nil:
		var ok bool
		if key, ok = signer.SigningKey(); !ok {
			return refuse(d, BadSignature, fmt.Sprintf("the key bound to %s cannot be decoded", short(sub.Env.KeyID)))
		}
		pub = key.Ed25519
	case meta == nil && kind == statement.Genesis && index == 0:
		pub = genesisAdminKey(sub.Env)
		if pub == nil || sign.KeyID(pub) != sub.Env.KeyID {
			return refuse(d, UnknownKey, "GENESIS must be signed by the admin_key it names")
		}
		key = sign.Key{Ed25519: pub}
	default:
		return refuse(d, UnknownKey, fmt.Sprintf("key %s is not bound in this log", sub.Env.KeyID))
	}
	// The log's own keys sign DENIALs and checkpoints only: what they sign
	// is never a submission (DESIGN §1), or anyone could post a logged
	// DENIAL back and have it logged again, nested, without a key.
	if signer != nil && LogSigns(signer.Role) {
		return refuse(d, BadSignature, fmt.Sprintf("key %s is the log's own %s key, which signs DENIALs and checkpoints only; an envelope it signed is never a submission", short(sub.Env.KeyID), signer.Role))
	}
	if !sub.Verified {
		// One check for every kind of key (DESIGN §1): Ed25519, or a
		// passkey's WebAuthn assertion (sign.VerifyPasskey's rules).
		if err := sub.Env.VerifyKey(key); err != nil {
			return refuse(d, BadSignature, fmt.Sprintf("signature by key %s does not verify: %v", sub.Env.KeyID, err))
		}
	}
	if meta == nil && kind != statement.Genesis {
		return refuse(d, UnknownKey, "the log has no GENESIS yet")
	}

	// Step 3: schema and canonical form.
	st, err := sub.Stmt, sub.ParseErr
	if !sub.Parsed {
		st, err = statement.Parse(kind, sub.Env.Payload)
	}
	if err != nil {
		code := SchemaInvalid
		var ce *canon.Error
		if errors.As(err, &ce) && ce.Code == canon.CodeNonCanonical {
			code = NonCanonical
		}
		if meta == nil {
			return refuse(d, code, fmt.Sprintf("%s payload: %v", kind, err))
		}
		return deny(d, code, fmt.Sprintf("%s payload: %v", kind, err))
	}
	d.Statement = st
	c := &check{e: e, d: &d, st: st, h: st.Head(), index: index, at: loggedAt, signer: signer, keyID: sub.Env.KeyID, payload: sub.Env.Payload}
	if kind == statement.Genesis {
		c.genesis(pub)
	} else {
		c.meta = meta
		c.common()
		if !c.failed() {
			c.allowedKind()
		}
		if !c.failed() {
			c.byKind()
		}
	}
	if c.failed() {
		if meta == nil {
			// No log exists yet to hold a DENIAL: a bad GENESIS is refused.
			c.d.Verdict = Refused
		}
		return *c.d
	}
	d.Verdict = Accepted
	return d
}

func refuse(d Decision, code Code, reason string) Decision {
	d.Verdict, d.Code, d.Reason = Refused, code, reason
	return d
}

func deny(d Decision, code Code, reason string) Decision {
	d.Verdict, d.Code, d.Reason = Denied, code, reason
	return d
}

func genesisAdminKey(env *sign.Parsed) ed25519.PublicKey {
	st, err := statement.Parse(statement.Genesis, env.Payload)
	if err != nil {
		// Fall back to reading just the key, so that a malformed GENESIS
		// signed by its admin key is denied with its schema error.
		id := statement.PeekField(env.Payload, "admin_key")
		pub, err := sign.ParsePublicKey(id)
		if err != nil {
			return nil
		}
		return pub
	}
	pub, err := sign.ParsePublicKey(st.(*statement.GenesisDoc).AdminKey)
	if err != nil {
		return nil
	}
	return pub
}

// check carries one decision through the rules.
type check struct {
	e       *Engine
	d       *Decision
	st      statement.Statement
	h       *statement.Header
	meta    *Meta
	index   uint64
	at      time.Time
	signer  *KeyRec
	keyID   string
	payload []byte // the envelope's payload bytes
}

func (c *check) failed() bool { return c.d.Verdict == Denied }

// deny records the first failure; later calls do nothing.
func (c *check) deny(code Code, format string, args ...any) {
	if c.failed() {
		return
	}
	c.d.Verdict, c.d.Code = Denied, code
	c.d.Reason = fmt.Sprintf("%s %s: ", c.h.Type, c.st.ID()) + fmt.Sprintf(format, args...)
}

// common runs the step 3 checks every kind shares.
func (c *check) common() {
	h := c.h
	if id := c.st.ID(); strings.HasPrefix(id, DenialIDPrefix) && h.Type != statement.Denial {
		c.deny(SchemaInvalid, "ids beginning %q are reserved for the log's DENIAL entries", DenialIDPrefix)
		return
	}
	if g := statement.GrantOf(c.st); g != nil && g.TTLSeconds > c.meta.MaxTTL {
		c.deny(SchemaInvalid, "ttl_seconds %d is above the log's max_ttl_seconds %d", g.TTLSeconds, c.meta.MaxTTL)
		return
	}
	if h.Log != c.meta.Origin {
		c.deny(WrongLog, "log %q is not this log's origin %q", h.Log, c.meta.Origin)
		return
	}
	if idx, kind, ok := c.e.StatementIndex(c.st.ID()); ok {
		c.deny(DuplicateID, "id %q is already used by the %s at index %d", c.st.ID(), kind, idx)
		return
	}
	if h.Actor != c.signer.Name {
		c.deny(ActorMismatch, "actor %q is not %q, the name bound to signing key %s", h.Actor, c.signer.Name, short(c.keyID))
		return
	}
	want := c.signer.LastSeq + 1
	// In a partial view the key's other statements may lie elsewhere.
	jump := h.Type == statement.Stop || h.Type == statement.Revoke || h.Type == statement.Approval
	gapOK := jump || c.e.partial
	if (gapOK && h.Seq < want) || (!gapOK && h.Seq != want) {
		rule := "exactly"
		if gapOK {
			rule = "at least"
		}
		c.deny(SeqMismatch, "seq %d for key %s must be %s %d", h.Seq, short(c.keyID), rule, want)
		return
	}
	// STOP, REVOKE and APPROVAL may skip seqs, but only so far: a jump to
	// 2^53 must not disable the key (DESIGN §4). A partial view cannot
	// tell, since the key's other statements may lie elsewhere.
	if jump && !c.e.partial && h.Seq-c.signer.LastSeq > MaxSeqJump {
		c.deny(SeqMismatch, "seq %d for key %s jumps %d past the last (%d); a %s may skip at most %d", h.Seq, short(c.keyID), h.Seq-c.signer.LastSeq, c.signer.LastSeq, h.Type, MaxSeqJump)
		return
	}
	ts, _ := statement.ParseTimestamp(h.Timestamp)
	skew := skewLimit(c.meta.ClockSkew)
	if diff := ts.Sub(c.at); diff > skew || diff < -skew {
		c.deny(ClockSkew, "timestamp %s is %s from the ledger's time %s, beyond clock_skew_seconds %d",
			h.Timestamp, diff.Abs().Round(time.Millisecond), statement.FormatLoggedAt(c.at), c.meta.ClockSkew)
	}
}

func (c *check) byKind() {
	switch s := c.st.(type) {
	case *statement.GenesisDoc:
		c.deny(NotAuthorized, "a log has exactly one GENESIS, at index 0")
	case *statement.PrincipalDoc:
		c.principal(s)
	case *statement.ConfirmDoc:
		c.confirm(s)
	case *statement.DelegateDoc:
		c.delegate(s)
	case *statement.RevokeDoc:
		c.revoke(s)
	case *statement.ReceiptDoc:
		if s.IsPending() {
			c.pending(s)
		} else {
			c.outcome(s)
		}
	case *statement.StopDoc:
		c.stop(s)
	case *statement.ResumeDoc:
		c.resume(s)
	case *statement.ApprovalDoc:
		c.approval(s)
	case *statement.DenialDoc:
		c.deny(NotAuthorized, "DENIAL entries are written by the ledger itself, not submitted")
	}
}

// short abbreviates a key id in messages.
func short(keyID string) string {
	if len(keyID) > 16 {
		return keyID[:16]
	}
	return keyID
}

// MaxSeqJump is how far past the key's last seq a STOP, REVOKE or
// APPROVAL may go (DESIGN §4).
const MaxSeqJump = 65536

// DenialIDPrefix starts the id of every DENIAL; other statements may not
// use it, so the log can always name its DENIALs.
const DenialIDPrefix = "denial:"

// scopeCode maps a scope package error to a reason code.
func scopeCode(err error) Code { return Code(scope.CodeOf(err)) }
