package authority

// What a verifier checks of a DENIAL whose reason it cannot re-derive.
//
// Replay re-decides a DENIAL's envelope whenever it can. When it cannot,
// because the envelope was left out, or because the reason rests on leaves
// outside a partial view (WholeLogCodes, or a DENIAL that joins no
// workflow), it still checks everything the leaves it has can show
// (DESIGN §6): the refused envelope's signature whenever its signer's key
// is bound, that an envelope is left out only when it would not have fit,
// and that a DENIAL on a workflow's chain names a signer who holds or
// issued a grant in that workflow. A rogue log can otherwise plant a DENIAL
// of a statement "by alice" that alice never signed.

import (
	"encoding/base64"
	"fmt"

	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// inWorkflow reports whether the key holds or issued a grant in the
// workflow: the condition for a DENIAL of its submission to join the
// workflow's chain (DESIGN §4).
func (e *Engine) inWorkflow(keyID, wf string) bool {
	r := get[KeyWorkflowRec](e.st, prefKeyWF+keyID+"/"+wf)
	return r != nil && (r.Issued || r.Held > 0) || e.namedApprover(keyID, wf)
}

// checkDenialWorkflow checks a DENIAL's workflow_id against the grants the
// view holds: a DENIAL joins a workflow's chain only if the denied
// statement's signer holds or issued a grant in it.
func (e *Engine) checkDenialWorkflow(doc *statement.DenialDoc) error {
	if doc.Workflow == "" || e.inWorkflow(doc.SignerKeyID, doc.Workflow) {
		return nil
	}
	return fmt.Errorf("workflow_id %s: the denied %s's signer %s holds no grant in that workflow and issued none, so its DENIAL cannot join the workflow's chain",
		doc.Workflow, doc.StatementType, short(doc.SignerKeyID))
}

// checkUnrederived checks a DENIAL that carries its envelope but whose
// reason this view cannot re-derive; d is the view's own decision of the
// envelope.
func (e *Engine) checkUnrederived(doc *statement.DenialDoc, inner *sign.Parsed, d *Decision) error {
	// The view's decision verified the signature whenever it knows the
	// signer's key: a refusal other than an unknown key means the envelope
	// has no accountable signer and should never have been logged.
	if d.Verdict == Refused && d.Code != UnknownKey {
		return fmt.Errorf("the denied envelope would be refused (%s: %s), so it should not have been logged", d.Code, d.Reason)
	}
	if doc.Workflow != "" && d.Verdict == Refused {
		// Every key that holds or issued a grant in a workflow is bound in
		// a view of that workflow.
		return fmt.Errorf("workflow_id %s: the denied envelope's key %s is not bound in this workflow or the trust chain, so its DENIAL cannot join the workflow's chain",
			doc.Workflow, short(inner.KeyID))
	}
	if err := e.checkDenialWorkflow(doc); err != nil {
		return err
	}
	// A workflow the view holds: the DENIAL must join it exactly when its
	// signer belongs to it.
	wf := statement.PeekWorkflow(inner.Payload)
	if d.Statement != nil {
		wf = d.Statement.WorkflowID()
	}
	if doc.Workflow == "" && wf != "" && e.Workflow(wf) != nil && e.inWorkflow(inner.KeyID, wf) {
		return fmt.Errorf("workflow_id is absent, but the denied %s's signer %s holds or issued a grant in workflow %s, so its DENIAL belongs on that chain",
			doc.StatementType, short(inner.KeyID), wf)
	}
	return nil
}

// checkOmitted checks a DENIAL that leaves its envelope out: it must say
// how large the envelope was (envelope_size), an envelope of that size must
// be one the ledger denies rather than refuses as too_large, and the DENIAL
// with it inside must not fit in a leaf. denialEnv is the DENIAL's own
// envelope (which the log key signed) and payloadLen its payload's length.
func (e *Engine) checkOmitted(doc *statement.DenialDoc, denialEnv sign.Envelope, payloadLen int) error {
	if doc.EnvelopeSize == 0 {
		return fmt.Errorf("the denied envelope is left out without an envelope_size, so nothing shows it would not have fit in a leaf; a DENIAL leaves its envelope out only then (DESIGN §4)")
	}
	if doc.EnvelopeSize+statement.LeafOverhead > statement.MaxLeafSize {
		return fmt.Errorf("envelope_size %d: an envelope that large is refused as too_large (at most %d bytes), never denied and logged",
			doc.EnvelopeSize, statement.MaxLeafSize-statement.LeafOverhead)
	}
	n, err := DenialSizeWith(doc, denialEnv, payloadLen)
	if err != nil {
		return err
	}
	if n+statement.LeafOverhead <= statement.MaxLeafSize {
		return fmt.Errorf("the denied envelope (envelope_size %d) is left out, yet the DENIAL with it inside would be %d bytes, within the %d-byte leaf (%d bytes around it); it must be included",
			doc.EnvelopeSize, n, statement.MaxLeafSize, statement.LeafOverhead)
	}
	if !e.partial && e.Key(doc.SignerKeyID) == nil {
		return fmt.Errorf("signer_keyid %s is not bound in this log: such a submission is refused, not logged", short(doc.SignerKeyID))
	}
	return e.checkDenialWorkflow(doc)
}

// DenialSizeWith is the length of the canonical DENIAL envelope the log
// key would have signed had doc carried a refused envelope of
// doc.EnvelopeSize bytes, given the DENIAL's actual envelope denialEnv
// (without it) and its payload's length. Signatures have a fixed length,
// so the only bytes that change are the payload's base64: the payload
// gains the member "envelope":<the envelope>, (and loses envelope_size).
// The ledger decides to leave an envelope out by building the DENIAL with
// it and measuring; this computes the same length without the envelope.
func DenialSizeWith(doc *statement.DenialDoc, denialEnv sign.Envelope, payloadLen int) (int64, error) {
	shell := *doc
	shell.Envelope, shell.EnvelopeSize = nil, 0
	p0, err := statement.Marshal(&shell)
	if err != nil {
		return 0, err
	}
	c, err := denialEnv.Canonical()
	if err != nil {
		return 0, err
	}
	with := int64(len(p0)) + int64(len(`"envelope":,`)) + doc.EnvelopeSize
	b64 := func(n int64) int64 { return int64(base64.StdEncoding.EncodedLen(int(n))) }
	return int64(len(c)) - b64(int64(payloadLen)) + b64(with), nil
}
