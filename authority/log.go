package authority

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Link is where a leaf sits in the back-link chains of DESIGN §5.
type Link struct {
	PrevInWorkflow *uint64
	TrustHead      uint64
}

// Link records the leaf at index, holding an accepted statement st (or a
// DENIAL), as the newest of its chain, and returns its back-links. It must
// be called once for every leaf, in order, right after its decision.
func (e *Engine) Link(index uint64, loggedAt time.Time, st statement.Statement) Link {
	meta := *e.Meta()
	var l Link
	switch st.Head().Type {
	case statement.Genesis:
		meta.TrustHead = 0
	case statement.Principal:
		prev := meta.TrustHead
		l = Link{PrevInWorkflow: &prev, TrustHead: prev}
		meta.TrustHead = index
	default:
		l.TrustHead = meta.TrustHead
		if wfID := st.WorkflowID(); wfID != "" {
			if wf := e.Workflow(wfID); wf != nil {
				nw := *wf
				if wf.Last != index { // the CONFIRM that created it starts the chain
					prev := wf.Last
					l.PrevInWorkflow = &prev
				}
				nw.Last = index
				put(e.st, prefWF+wfID, &nw)
			}
		}
	}
	meta.Size = index + 1
	meta.LastLoggedAt = statement.FormatLoggedAt(loggedAt)
	put(e.st, keyMeta, &meta)
	return l
}

// DenialID is the id of the DENIAL at index.
func DenialID(index uint64) string { return DenialIDPrefix + strconv.FormatUint(index, 10) }

// Denial builds the DENIAL statement the ledger logs at index for a denied
// decision d about envelope env. The log key signs it. withEnvelope is
// false when the DENIAL would not fit in a leaf with the envelope inside.
func (e *Engine) Denial(d *Decision, env *sign.Parsed, index uint64, loggedAt time.Time, withEnvelope bool) *statement.DenialDoc {
	meta := e.Meta()
	if meta == nil {
		return nil // no log before GENESIS: the ledger refuses instead
	}
	logKey := e.Key(meta.LogKeyID)
	if logKey == nil {
		// The log key's record could not be read (Err says why: a store
		// that stopped answering, a read ended by a lost lease) or is
		// missing: no DENIAL can be built.
		return nil
	}
	canonEnv, _ := env.Envelope.Canonical()
	sum := sha256.Sum256(canonEnv)
	doc := &statement.DenialDoc{
		Header: statement.Header{Type: statement.Denial, Timestamp: statement.FormatTimestamp(loggedAt),
			Log: meta.Origin, Actor: logKey.Name, Seq: logKey.LastSeq + 1},
		DenialID:       DenialID(index),
		EnvelopeSHA256: hex.EncodeToString(sum[:]),
		SignerKeyID:    env.KeyID,
		StatementType:  d.Kind,
		ReasonCode:     string(d.Code),
		Reason:         clipReason(d.Reason),
		Workflow:       e.denialWorkflow(d, env),
	}
	if id := statement.PeekID(d.Kind, env.Payload); scope.CheckIdentifier(id) == nil {
		doc.StatementID = id
	}
	if withEnvelope {
		cp := env.Envelope
		doc.Envelope = &cp
	} else {
		doc.EnvelopeSize = int64(len(canonEnv))
	}
	return doc
}

// maxDenialReason bounds the reason a DENIAL records. A reason may quote
// the refused payload (an unknown field's name, for one), and a DENIAL must
// always fit in a leaf once its envelope is left out (DESIGN §5); otherwise
// the submission would be blocked without being logged.
const maxDenialReason = 2048

// clipReason cuts a reason to maxDenialReason bytes on a UTF-8 boundary.
func clipReason(s string) string {
	if len(s) <= maxDenialReason {
		return s
	}
	cut := maxDenialReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " [cut]"
}

// denialWorkflow is the workflow a DENIAL joins: the one its statement
// names, if the signer holds or issued a grant in it (DESIGN §4).
func (e *Engine) denialWorkflow(d *Decision, env *sign.Parsed) string {
	wf := ""
	if d.Statement != nil {
		wf = d.Statement.WorkflowID()
	} else {
		wf = statement.PeekWorkflow(env.Payload)
	}
	if wf == "" || scope.CheckIdentifier(wf) != nil {
		return ""
	}
	if r := get[KeyWorkflowRec](e.st, prefKeyWF+env.KeyID+"/"+wf); r != nil && (r.Issued || r.Held > 0) {
		return wf
	}
	return ""
}

// AcceptDenial records the DENIAL the ledger logged at index: its id and
// the log key's seq.
func (e *Engine) AcceptDenial(doc *statement.DenialDoc, index uint64) {
	meta := e.Meta()
	k := *e.Key(meta.LogKeyID)
	k.LastSeq = doc.Seq
	put(e.st, prefKey+meta.LogKeyID, &k)
	e.takeID(doc.DenialID, statement.Denial, index)
}

// ReplayError is a leaf that is not what the decision function would have
// written at its place.
type ReplayError struct {
	Index uint64
	Check string // which check failed, e.g. "decision", "prev_in_workflow"
	Msg   string
}

func (e *ReplayError) Error() string {
	return fmt.Sprintf("leaf %d: %s: %s", e.Index, e.Check, e.Msg)
}

// Replay re-decides the leaf at index exactly as the ledger must have and
// applies it: an accepted statement must be accepted again; a DENIAL must
// be signed by the log key and its envelope denied again with the same
// reason code; acceptance times must not go backwards; back-links must be
// right. After a ReplayError the engine's state is unspecified.
func (e *Engine) Replay(index uint64, leafBytes []byte) (*Decision, error) {
	fail := func(check, format string, args ...any) (*Decision, error) {
		return nil, &ReplayError{Index: index, Check: check, Msg: fmt.Sprintf(format, args...)}
	}
	leaf, at, err := statement.ParseLeaf(leafBytes)
	if err != nil {
		return fail("leaf", "%v", err)
	}
	meta := e.Meta()
	if meta != nil {
		if (!e.partial && meta.Size != index) || index < meta.Size {
			return fail("order", "expected leaf %d next", meta.Size)
		}
		last, _ := statement.ParseLoggedAt(meta.LastLoggedAt)
		if at.Before(last) {
			return fail("logged_at", "%s is before the previous leaf's %s", leaf.LoggedAt, meta.LastLoggedAt)
		}
	}
	env, err := sign.ParseEnvelope(leaf.Envelope)
	if err != nil {
		return fail("envelope", "%v", err)
	}
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	var d Decision
	var st statement.Statement
	if kind == statement.Denial && meta != nil {
		doc, dd, err := e.replayDenial(env, index, at)
		if err != nil {
			return fail("denial", "%v", err)
		}
		d, st = *dd, doc
	} else {
		d = e.Decide(Submission{Env: env}, index, at)
		if d.Verdict != Accepted {
			return fail("decision", "the statement would be %s: %s: %s", d.Verdict, d.Code, d.Reason)
		}
		st = d.Statement
	}
	l := e.Link(index, at, st)
	if !samePrev(l.PrevInWorkflow, leaf.PrevInWorkflow) {
		return fail("prev_in_workflow", "leaf has %s, the chain says %s", fmtPrev(leaf.PrevInWorkflow), fmtPrev(l.PrevInWorkflow))
	}
	if l.TrustHead != leaf.TrustHead {
		return fail("trust_head", "leaf has %d, the trust chain says %d", leaf.TrustHead, l.TrustHead)
	}
	return &d, nil
}

func (e *Engine) replayDenial(env *sign.Parsed, index uint64, at time.Time) (*statement.DenialDoc, *Decision, error) {
	meta := e.Meta()
	if env.KeyID != meta.LogKeyID {
		return nil, nil, fmt.Errorf("DENIAL signed by key %s, not the log key %s", short(env.KeyID), short(meta.LogKeyID))
	}
	pub, _ := e.PublicKey(meta.LogKeyID)
	if err := env.Verify(pub); err != nil {
		return nil, nil, fmt.Errorf("log key signature: %v", err)
	}
	st, err := statement.Parse(statement.Denial, env.Payload)
	if err != nil {
		return nil, nil, err
	}
	doc := st.(*statement.DenialDoc)
	if doc.Envelope == nil {
		// Nothing to re-decide; the DENIAL's own fields must still be right.
		want := e.denialShell(doc, index, at)
		if err := e.sameDenial(doc, want, false); err != nil {
			return nil, nil, err
		}
		if err := e.checkOmitted(doc, env.Envelope, len(env.Payload)); err != nil {
			return nil, nil, err
		}
		e.AcceptDenial(doc, index)
		return doc, &Decision{Verdict: Denied, Code: Code(doc.ReasonCode), Reason: doc.Reason, Kind: doc.StatementType,
			SignerKey: doc.SignerKeyID, Notes: []string{"the denied envelope was omitted (too large); its reason cannot be re-checked"}}, nil
	}
	inner, err := sign.ParseEnvelopeValue(*doc.Envelope)
	if err != nil {
		return nil, nil, fmt.Errorf("denied envelope: %v", err)
	}
	d := e.DryRun(Submission{Env: inner}, index, at)
	outside := WholeLogCodes[Code(doc.ReasonCode)]
	if e.partial && doc.Workflow == "" {
		// A DENIAL outside every workflow comes with the trust chain alone:
		// its signer's key and the workflow it names may be bound elsewhere.
		wf := statement.PeekWorkflow(inner.Payload)
		outside = outside || (d.Verdict == Refused && d.Code == UnknownKey) || (wf != "" && e.Workflow(wf) == nil)
	}
	if e.partial && (d.Verdict != Denied || string(d.Code) != doc.ReasonCode) && outside {
		// The reason rests on leaves outside this view: take the DENIAL's
		// word for it, and say so. What it says of the envelope it carries
		// is still checked.
		want := e.denialShell(doc, index, at)
		if err := e.sameDenial(doc, want, false); err != nil {
			return nil, nil, err
		}
		canonEnv, _ := inner.Envelope.Canonical()
		sum := sha256.Sum256(canonEnv)
		kind, _ := statement.KindOfPayloadType(inner.PayloadType)
		switch {
		case doc.EnvelopeSHA256 != hex.EncodeToString(sum[:]):
			return nil, nil, fmt.Errorf("envelope_sha256 %s is not the hash of the envelope it carries", doc.EnvelopeSHA256)
		case doc.SignerKeyID != inner.KeyID:
			return nil, nil, fmt.Errorf("signer_keyid %s is not the key of the envelope it carries (%s)", doc.SignerKeyID, inner.KeyID)
		case doc.StatementType != kind:
			return nil, nil, fmt.Errorf("statement_type %s is not the kind of the envelope it carries (%s)", doc.StatementType, kind)
		}
		if err := e.checkUnrederived(doc, inner, &d); err != nil {
			return nil, nil, err
		}
		e.AcceptDenial(doc, index)
		notes := []string{fmt.Sprintf("reason %s rests on leaves outside this bundle; custody audit checks it over the whole log", doc.ReasonCode)}
		if d.Verdict == Refused { // checkUnrederived allowed only unknown_key
			notes = append(notes, fmt.Sprintf("the denied envelope's key %s is bound outside this bundle, so its signature is left to custody audit", short(inner.KeyID)))
		}
		return doc, &Decision{Verdict: Denied, Code: Code(doc.ReasonCode), Reason: doc.Reason, Kind: doc.StatementType,
			SignerKey: doc.SignerKeyID, Notes: notes}, nil
	}
	if d.Verdict != Denied {
		if d.Verdict == Accepted {
			return nil, nil, fmt.Errorf("unjustified: %s %s would be accepted, yet the log denied it (%s)", d.Kind, d.Statement.ID(), doc.ReasonCode)
		}
		return nil, nil, fmt.Errorf("the denied envelope would be refused (%s: %s), so it should not have been logged", d.Code, d.Reason)
	}
	if string(d.Code) != doc.ReasonCode {
		return nil, nil, fmt.Errorf("reason_code %s, but the decision function says %s: %s", doc.ReasonCode, d.Code, d.Reason)
	}
	want := e.Denial(&d, inner, index, at, true)
	if want == nil {
		if err := e.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("no record of the log key %s", e.Meta().LogKeyID)
	}
	if err := e.sameDenial(doc, want, true); err != nil {
		return nil, nil, err
	}
	e.AcceptDenial(doc, index)
	return doc, &d, nil
}

// denialShell is what a DENIAL without its envelope must say of itself.
func (e *Engine) denialShell(doc *statement.DenialDoc, index uint64, at time.Time) *statement.DenialDoc {
	meta := e.Meta()
	logKey := e.Key(meta.LogKeyID)
	w := *doc
	w.Header = statement.Header{Type: statement.Denial, Timestamp: statement.FormatTimestamp(at),
		Log: meta.Origin, Actor: logKey.Name, Seq: logKey.LastSeq + 1}
	w.DenialID = DenialID(index)
	return &w
}

func (e *Engine) sameDenial(got, want *statement.DenialDoc, full bool) error {
	// In a partial view the log key's other DENIALs may lie elsewhere: its
	// seq must only grow, as for any other key (see common).
	if e.partial && got.Seq > want.Seq {
		want.Seq = got.Seq
	}
	type pair struct{ name, got, want string }
	checks := []pair{
		{"timestamp", got.Timestamp, want.Timestamp},
		{"log", got.Log, want.Log},
		{"actor", got.Actor, want.Actor},
		{"seq", strconv.FormatUint(got.Seq, 10), strconv.FormatUint(want.Seq, 10)},
		{"denial_id", got.DenialID, want.DenialID},
	}
	if full {
		checks = append(checks,
			pair{"envelope_sha256", got.EnvelopeSHA256, want.EnvelopeSHA256},
			pair{"signer_keyid", got.SignerKeyID, want.SignerKeyID},
			pair{"statement_type", string(got.StatementType), string(want.StatementType)},
			pair{"statement_id", got.StatementID, want.StatementID},
			pair{"workflow_id", got.Workflow, want.Workflow},
		)
	}
	for _, c := range checks {
		if c.got != c.want {
			return fmt.Errorf("%s is %q, should be %q", c.name, c.got, c.want)
		}
	}
	return nil
}

func samePrev(a, b *uint64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func fmtPrev(p *uint64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatUint(*p, 10)
}
