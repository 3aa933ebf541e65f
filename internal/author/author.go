// Package author builds, seals and signs the statements a person or an
// agent authors (PRINCIPAL, CONFIRM, DELEGATE, RECEIPT, STOP, RESUME,
// REVOKE), filling what the log knows, and submits them.
//
// A [Session] is one statement in progress. It fills the header the way a
// signer's own tooling would (the timestamp now, the log's origin, the
// name the log binds to the signer's key, the key's next seq), reads the
// entries a statement refers to (a parent grant, a pending receipt, a
// STOP) for the values it copies from them, refuses before signing what
// the log would certainly deny as malformed ([Session.Precheck]), and
// turns the log's answer into an [Outcome].
//
// It promises that nothing is signed from a value the caller did not give
// or the log did not hold; it decides nothing: every rule is the ledger's
// (authority.Engine), and an [Outcome] reports the ledger's verdict as it
// came. The log is opened only when something needs it, so a statement
// whose every value was given is signed offline.
package author

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Log is what authoring needs of a log: a *ledger.Ledger, or a server
// reached over HTTP whose answers are verified (internal/remotelog).
type Log interface {
	Origin() string
	Entry(index uint64) (*ledger.Entry, error)
	EntryByID(id string) (*ledger.Entry, error)
	KeyBinding(keyID string) (*authority.KeyRec, error)
	NextSeq(keyID string) (uint64, error)
	Append(ctx context.Context, envelope []byte) (*ledger.Result, error)
}

// Session is one statement being authored by the holder of Key.
type Session struct {
	key ed25519.PrivateKey
	pub ed25519.PublicKey

	// Actor, Origin and Seq are the header values the signer gave; the
	// zero value of each is filled from the log.
	Actor, Origin string
	Seq           uint64

	open    func() (Log, error)
	l       Log
	openErr error
	offline bool
}

// New starts a session signing with key. open opens the log the first
// time something needs it. With offline (the envelope is written, not
// appended) an error opening the log says what needed it.
func New(key ed25519.PrivateKey, open func() (Log, error), offline bool) *Session {
	return &Session{key: key, pub: key.Public().(ed25519.PublicKey), open: open, offline: offline}
}

// Close forgets the key and closes the log, if it was opened.
func (s *Session) Close() {
	clear(s.key)
	if c, ok := s.l.(interface{ Close() error }); ok {
		c.Close()
	}
}

// Log opens the log the first time something needs it; why says what for,
// in the error when it cannot be opened offline.
func (s *Session) Log(why string) (Log, error) {
	if s.l != nil || s.openErr != nil {
		return s.l, s.openErr
	}
	s.l, s.openErr = s.open()
	if s.openErr != nil && s.offline {
		s.openErr = fmt.Errorf("%s needs the ledger (%w); give it with --dir or --ledger, or the value with its flag", why, s.openErr)
	}
	return s.l, s.openErr
}

// KeyID is the signer's key id.
func (s *Session) KeyID() string { return sign.KeyID(s.pub) }

// Entry returns the accepted statement id refers to, which must be of one
// of kinds; ref names where id came from (a flag, like --parent), for the
// error.
func (s *Session) Entry(ref, id string, kinds ...statement.Kind) (*ledger.Entry, error) {
	l, err := s.Log("looking up " + ref + " " + id)
	if err != nil {
		return nil, err
	}
	e, err := l.EntryByID(id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	for _, k := range kinds {
		if e.Kind() == k {
			return e, nil
		}
	}
	return nil, fmt.Errorf("%s %s is a %s at index %d, not a %v", ref, id, e.Kind(), e.Index, kinds)
}

// Workflow returns workflow when it is given, or else the workflow of the
// entry id names (of one of kinds).
func (s *Session) Workflow(workflow, ref, id string, kinds ...statement.Kind) (string, error) {
	if workflow != "" {
		return workflow, nil
	}
	e, err := s.Entry(ref, id, kinds...)
	if err != nil {
		return "", err
	}
	return e.Statement.WorkflowID(), nil
}

// Grant returns the grant of the CONFIRM or DELEGATE id names.
func (s *Session) Grant(ref, id string) (*statement.Grant, error) {
	e, err := s.Entry(ref, id, statement.Confirm, statement.Delegate)
	if err != nil {
		return nil, err
	}
	return statement.GrantOf(e.Statement), nil
}

// BoundName returns the name the log binds to keyID ("" when it binds
// none).
func (s *Session) BoundName(keyID, why string) (string, error) {
	l, err := s.Log(why)
	if err != nil {
		return "", err
	}
	rec, err := l.KeyBinding(keyID)
	if err != nil {
		return "", err
	}
	if rec == nil {
		return "", nil
	}
	return rec.Name, nil
}

// Header fills the common fields of a statement of kind k: the timestamp
// now, and Actor, Origin and Seq as given or else from the log.
func (s *Session) Header(k statement.Kind) (statement.Header, error) {
	h := statement.Header{Type: k, Timestamp: statement.FormatTimestamp(time.Now()), Actor: s.Actor, Log: s.Origin, Seq: s.Seq}
	keyID := s.KeyID()
	if h.Log == "" {
		l, err := s.Log("finding the log's origin")
		if err != nil {
			return h, err
		}
		h.Log = l.Origin()
	}
	if h.Actor == "" {
		l, err := s.Log("finding the key's bound name")
		if err != nil {
			return h, err
		}
		rec, err := l.KeyBinding(keyID)
		if err != nil {
			return h, err
		}
		if rec == nil {
			return h, fmt.Errorf("key %s is not bound in the ledger %s: a person's key is enrolled with custody principal enroll, an agent's is bound as the grantee of a grant (or pass --actor)", keyID, l.Origin())
		}
		h.Actor = rec.Name
	}
	if h.Seq == 0 {
		l, err := s.Log("finding the key's next seq")
		if err != nil {
			return h, err
		}
		if h.Seq, err = l.NextSeq(keyID); err != nil {
			return h, err
		}
	}
	return h, nil
}

// TTLError is Precheck's refusal: a grant's ttl above the log's
// max_ttl_seconds, which the ledger would deny.
type TTLError struct {
	TTLSeconds, MaxTTLSeconds int64
}

func (e *TTLError) Error() string {
	return fmt.Sprintf("--ttl %s is longer than this log allows (max_ttl_seconds %d, %s): the ledger would deny it; nothing was signed",
		time.Duration(e.TTLSeconds)*time.Second, e.MaxTTLSeconds, time.Duration(e.MaxTTLSeconds)*time.Second)
}

// Precheck refuses, before anything is signed, what the ledger would
// certainly deny as malformed, so that a typo does not leave a DENIAL in
// the log forever: a grant's ttl above the log's max_ttl_seconds (from its
// GENESIS, a *TTLError). It checks only when the log is open already (not
// for an envelope written offline).
func (s *Session) Precheck(st statement.Statement) error {
	g := statement.GrantOf(st)
	if g == nil || s.l == nil {
		return nil
	}
	e, err := s.l.Entry(0)
	if err != nil {
		return nil // the ledger decides, as ever
	}
	gd, ok := e.Statement.(*statement.GenesisDoc)
	if !ok {
		return nil
	}
	if _, _, maxTTL := gd.Params(); g.TTLSeconds > maxTTL {
		return &TTLError{TTLSeconds: g.TTLSeconds, MaxTTLSeconds: maxTTL}
	}
	return nil
}

// Outcome is what became of an authored statement; it is what the
// authoring commands print with --json.
type Outcome struct {
	Verdict        string         `json:"verdict"`              // accepted, held, denied, refused, written
	ExpiresAt      string         `json:"expires_at,omitempty"` // held: the approval deadline
	Rules          []api.HoldRule `json:"rules,omitempty"`      // held: the rules it waits for
	Kind           string         `json:"kind"`
	ID             string         `json:"id"`
	Seq            uint64         `json:"seq"`
	Index          *uint64        `json:"index,omitempty"`
	ReasonCode     string         `json:"reason_code,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	Duplicate      bool           `json:"duplicate,omitempty"`
	ScopeHash      string         `json:"scope_hash,omitempty"`
	KeyID          string         `json:"keyid,omitempty"` // the key a PRINCIPAL binds, to compare
	Notes          []string       `json:"notes,omitempty"`
	CheckpointSize uint64         `json:"checkpoint_size,omitempty"`
	Checkpoint     string         `json:"checkpoint,omitempty"`
	InclusionProof []string       `json:"inclusion_proof,omitempty"`
	File           string         `json:"file,omitempty"` // written to a file instead of appended
}

// Sign seals st (its scope_hash) and signs it, and returns the envelope
// and the outcome's fields known before the log decides.
func (s *Session) Sign(st statement.Statement) ([]byte, Outcome, error) {
	if err := statement.Seal(st); err != nil {
		return nil, Outcome{}, err
	}
	_, raw, err := statement.Sign(s.key, st)
	if err != nil {
		return nil, Outcome{}, err
	}
	h := st.Head()
	out := Outcome{Kind: string(h.Type), ID: st.ID(), Seq: h.Seq}
	if g := statement.GrantOf(st); g != nil {
		out.ScopeHash = g.ScopeHash
	}
	if p, ok := st.(*statement.PrincipalDoc); ok {
		out.KeyID = PrincipalKeyID(p)
	}
	return raw, out, nil
}

// Append submits the envelope Sign made and fills out with the log's
// answer: accepted, held (a pending receipt waiting for approval), denied
// (a DENIAL was logged) or refused (nothing was logged). The error is
// that of a log that could not answer.
func (s *Session) Append(ctx context.Context, raw []byte, out Outcome) (Outcome, error) {
	l, err := s.Log("appending")
	if err != nil {
		return out, err
	}
	res, err := l.Append(ctx, raw)
	var de *authority.DecisionError
	if errors.As(err, &de) {
		out.Verdict, out.ReasonCode, out.Reason = "refused", string(de.Code), de.Reason
		return out, nil
	}
	if err != nil {
		return out, err
	}
	idx := res.Index
	out.Verdict, out.Index, out.ReasonCode, out.Reason = res.Verdict.String(), &idx, string(res.Code), res.Reason
	out.Duplicate, out.Notes, out.CheckpointSize = res.Duplicate, res.Notes, res.Head.Size
	out.Checkpoint, out.InclusionProof = string(res.Head.Checkpoint), hashStrings(res.Proof)
	if res.Verdict == authority.Accepted && res.Hold != nil {
		out.Verdict, out.ExpiresAt = "held", statement.FormatLoggedAt(res.Hold.ExpiresAt)
		for _, r := range res.Hold.Rules {
			out.Rules = append(out.Rules, api.HoldRule{Grant: r.Grant, RuleID: r.RuleID, Approvers: r.Approvers, Quorum: r.Quorum})
		}
	}
	return out, nil
}

// hashStrings is hs in base64, as proofs are printed.
func hashStrings(hs []merkle.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

// PrincipalKeyID is the key id a PRINCIPAL statement binds ("" when its
// key does not parse).
func PrincipalKeyID(p *statement.PrincipalDoc) string {
	if p.IsPasskey() {
		if k, err := sign.ParsePasskeyKey(p.KeyType, p.PublicKey); err == nil {
			return k.KeyID()
		}
		return ""
	}
	if pub, err := sign.ParsePublicKey(p.PublicKey); err == nil {
		return sign.KeyID(pub)
	}
	return ""
}
