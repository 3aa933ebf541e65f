package statement

import (
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
)

// Hand-written decoders for payloads that are already canonical, the form
// every honest signer produces. They replace the reflection path
// (canon.Parse, then Value.Decode) on the ledger's hot path.
//
// A decoder here never rejects anything: it returns nil whenever the input
// is not exactly what it expects (a byte out of canonical form, an escape in
// a string, an unknown or missing field, a wrong type, an optional field
// given its zero value), and Parse then decodes the payload again with the
// reflection path, which produces the error. What a decoder does accept, the
// reflection path accepts too and decodes to the same value; FuzzFastParse
// checks both directions of that against parseReflect.

// decodeFast returns the statement in payload, or nil if the reflection
// path must decide. Validation is the caller's.
func decodeFast(kind Kind, payload []byte) Statement {
	r := canon.NewReader(payload)
	var st Statement
	switch kind {
	case Receipt:
		st = fastReceipt(&r, kind)
	case Confirm:
		st = fastConfirm(&r, kind)
	case Delegate:
		st = fastDelegate(&r, kind)
	case Stop:
		st = fastStop(&r, kind)
	case Resume:
		st = fastResume(&r, kind)
	case Revoke:
		st = fastRevoke(&r, kind)
	case Principal:
		st = fastPrincipal(&r, kind)
	case Genesis:
		st = fastGenesis(&r, kind)
	case Approval:
		st = fastApproval(&r, kind)
	case Denial:
		st = fastDenial(&r, kind)
	}
	if st == nil || !r.Done() {
		return nil
	}
	return st
}

// fields counts the required fields an object held. Keys arrive in strictly
// ascending order, so none is counted twice.
type fields struct{ required int }

// header reads one of the Header's fields; known is false for any other key.
func (f *fields) header(r *canon.Reader, h *Header, kind Kind, key []byte) (known, ok bool) {
	switch string(key) {
	case "actor":
		h.Actor, ok = r.String()
	case "log":
		h.Log, ok = r.String()
	case "seq":
		h.Seq, ok = r.Uint()
	case "timestamp":
		h.Timestamp, ok = r.String()
	case "type":
		var b []byte
		b, ok = r.StringBytes()
		// Parse checks type against the payload type before decoding.
		ok = ok && string(b) == string(kind)
		h.Type = kind
	default:
		return false, false
	}
	f.required++
	return true, ok
}

const headerFields = 5

// str reads a required string field.
func (f *fields) str(r *canon.Reader, dst *string) bool {
	f.required++
	var ok bool
	*dst, ok = r.String()
	return ok
}

// optStr reads an omitempty string field, which must not be "".
func optStr(r *canon.Reader, dst *string) bool {
	var ok bool
	*dst, ok = r.String()
	return ok && *dst != ""
}

// optInt reads an omitempty integer field, which must not be 0.
func optInt(r *canon.Reader, dst *int64) bool {
	var ok bool
	*dst, ok = r.Int()
	return ok && *dst != 0
}

func fastReceipt(r *canon.Reader, kind Kind) Statement {
	d := &ReceiptDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "action":
			return f.str(r, &d.Action)
		case "authorization_ref":
			return f.str(r, &d.AuthorizationRef)
		case "consumed":
			var ok bool
			d.Consumed, ok = r.IntMap()
			return ok
		case "error":
			return optStr(r, &d.Error)
		case "evidence_refs":
			var ok bool
			d.EvidenceRefs, ok = r.Strings()
			return ok
		case "params_sha256":
			return optStr(r, &d.ParamsSHA256)
		case "pending_ref":
			return optStr(r, &d.PendingRef)
		case "receipt_id":
			return f.str(r, &d.ReceiptID)
		case "reserve":
			var ok bool
			d.Reserve, ok = r.IntMap()
			return ok
		case "result":
			return f.str(r, &d.Result)
		case "scope_hash":
			return f.str(r, &d.ScopeHash)
		case "side_effects":
			var ok bool
			d.SideEffects, ok = r.StringMap()
			return ok
		case "step_id":
			return f.str(r, &d.StepID)
		case "target":
			return f.str(r, &d.Target)
		case "workflow_id":
			return f.str(r, &d.Workflow)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+8 {
		return nil
	}
	return d
}

// grant reads one of the Grant's fields; known is false for any other key.
func (f *fields) grant(r *canon.Reader, g *Grant, key []byte) (known, ok bool) {
	switch string(key) {
	case "grantee":
		var gf fields
		ok = r.Object(func(k []byte) bool {
			switch string(k) {
			case "name":
				return gf.str(r, &g.Grantee.Name)
			case "public_key":
				return gf.str(r, &g.Grantee.PublicKey)
			}
			return false
		}) && gf.required == 2
	case "limits":
		g.Limits, ok = r.IntMap()
		return true, ok
	case "revocable":
		g.Revocable, ok = r.Bool()
	case "scope":
		ok = readScope(r, &g.Scope)
	case "scope_hash":
		g.ScopeHash, ok = r.String()
	case "ttl_seconds":
		g.TTLSeconds, ok = r.Int()
	default:
		return false, false
	}
	f.required++
	return true, ok
}

const grantFields = 5

func readScope(r *canon.Reader, s *scope.Scope) bool {
	var n int
	return r.Object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "capabilities":
			n++
			s.Capabilities, ok = r.Strings()
		case "principals":
			s.Principals, ok = r.Strings()
		case "step_ids":
			s.StepIDs, ok = r.Strings()
		case "targets":
			n++
			s.Targets, ok = r.Strings()
		case "workflow_id":
			n++
			s.WorkflowID, ok = r.String()
		}
		return ok
	}) && n == 3
}

func fastConfirm(r *canon.Reader, kind Kind) Statement {
	d := &ConfirmDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "confirm_id":
			return f.str(r, &d.ConfirmID)
		case "risk_level":
			return optStr(r, &d.RiskLevel)
		}
		if known, ok := f.grant(r, &d.Grant, k); known {
			return ok
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+grantFields+1 {
		return nil
	}
	return d
}

func fastDelegate(r *canon.Reader, kind Kind) Statement {
	d := &DelegateDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "delegation_id":
			return f.str(r, &d.DelegationID)
		case "parent_ref":
			return f.str(r, &d.ParentRef)
		case "parent_scope_hash":
			return f.str(r, &d.ParentScopeHash)
		}
		if known, ok := f.grant(r, &d.Grant, k); known {
			return ok
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+grantFields+3 {
		return nil
	}
	return d
}

func fastStop(r *canon.Reader, kind Kind) Statement {
	d := &StopDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "reason":
			return f.str(r, &d.Reason)
		case "request_id":
			return f.str(r, &d.RequestID)
		case "step_id":
			return optStr(r, &d.StepID)
		case "stop_scope":
			return f.str(r, &d.StopScope)
		case "takeover_mode":
			return f.str(r, &d.TakeoverMode)
		case "takeover_to":
			return optStr(r, &d.TakeoverTo)
		case "workflow_id":
			return f.str(r, &d.Workflow)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+5 {
		return nil
	}
	return d
}

func fastResume(r *canon.Reader, kind Kind) Statement {
	d := &ResumeDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "resume_id":
			return f.str(r, &d.ResumeID)
		case "stop_ref":
			return f.str(r, &d.StopRef)
		case "workflow_id":
			return f.str(r, &d.Workflow)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+3 {
		return nil
	}
	return d
}

func fastRevoke(r *canon.Reader, kind Kind) Statement {
	d := &RevokeDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "reason":
			return f.str(r, &d.Reason)
		case "revoke_id":
			return f.str(r, &d.RevokeID)
		case "target_ref":
			return f.str(r, &d.TargetRef)
		case "workflow_id":
			return f.str(r, &d.Workflow)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+4 {
		return nil
	}
	return d
}

func fastPrincipal(r *canon.Reader, kind Kind) Statement {
	d := &PrincipalDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "name":
			return f.str(r, &d.Name)
		case "op":
			return f.str(r, &d.Op)
		case "principal_id":
			return f.str(r, &d.PrincipalID)
		case "public_key":
			return f.str(r, &d.PublicKey)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+4 {
		return nil
	}
	return d
}

func fastGenesis(r *canon.Reader, kind Kind) Statement {
	d := &GenesisDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "admin_key":
			return f.str(r, &d.AdminKey)
		case "clock_skew_seconds":
			return optInt(r, &d.ClockSkewSeconds)
		case "genesis_id":
			return f.str(r, &d.GenesisID)
		case "log_key":
			return f.str(r, &d.LogKey)
		case "max_depth":
			return optInt(r, &d.MaxDepth)
		case "max_ttl_seconds":
			return optInt(r, &d.MaxTTLSeconds)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+3 {
		return nil
	}
	return d
}

func fastDenial(r *canon.Reader, kind Kind) Statement {
	d := &DenialDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "denial_id":
			return f.str(r, &d.DenialID)
		case "envelope":
			env, ok := sign.ReadCanonicalEnvelope(r)
			d.Envelope = &env
			return ok
		case "envelope_size":
			return optInt(r, &d.EnvelopeSize)
		case "envelope_sha256":
			return f.str(r, &d.EnvelopeSHA256)
		case "reason":
			return f.str(r, &d.Reason)
		case "reason_code":
			return f.str(r, &d.ReasonCode)
		case "signer_keyid":
			return f.str(r, &d.SignerKeyID)
		case "statement_id":
			return optStr(r, &d.StatementID)
		case "statement_type":
			f.required++
			s, ok := r.String()
			d.StatementType = Kind(s)
			return ok
		case "workflow_id":
			return optStr(r, &d.Workflow)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+6 {
		return nil
	}
	return d
}

func fastApproval(r *canon.Reader, kind Kind) Statement {
	d := &ApprovalDoc{}
	var f fields
	ok := r.Object(func(k []byte) bool {
		switch string(k) {
		case "approval_id":
			return f.str(r, &d.ApprovalID)
		case "decision":
			return f.str(r, &d.Decision)
		case "reason":
			return optStr(r, &d.Reason)
		case "receipt_ref":
			return f.str(r, &d.ReceiptRef)
		case "receipt_sha256":
			return f.str(r, &d.ReceiptSHA256)
		case "workflow_id":
			return f.str(r, &d.Workflow)
		}
		_, ok := f.header(r, &d.Header, kind, k)
		return ok
	})
	if !ok || f.required != headerFields+5 {
		return nil
	}
	return d
}
