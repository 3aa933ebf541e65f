package authority

import (
	"slices"
	"strconv"

	"github.com/custodylog/custody/scope"
)

// # Encoding the records a batch changes
//
// Every append rewrites a few records (its id, the workflow, the signer's
// key, the grant it spends, the pending receipt), and encoding them with
// encoding/json's reflection was a tenth of an append's CPU. appendRecord
// writes the same bytes as json.Marshal for those kinds directly; any
// record it is not sure of (another kind, a string that json.Marshal
// would escape, a grant with approval rules) is left to json.Marshal.
// encode_test.go compares the two.

// appendRecord appends rec's json.Marshal encoding to b, or reports false
// (b unchanged in meaning) when it leaves rec to json.Marshal.
func appendRecord(b []byte, rec any) ([]byte, bool) {
	e := recEncoder{b: b, ok: true}
	switch r := rec.(type) {
	case *IDRec:
		e.open("kind").str(r.Kind).next("index").uint(r.Index).close()
	case *WorkflowRec:
		e.open("owner_keyid").str(r.Owner).next("last").uint(r.Last)
		if r.StepStops != 0 {
			e.next("step_stops").int(r.StepStops)
		}
		if r.LastStop != 0 {
			e.next("last_stop").uint(r.LastStop)
		}
		e.close()
	case *KeyRec:
		if r.KeyType != "" || r.RPID != "" || len(r.Origins) > 0 || len(r.AllowedTypes) > 0 {
			return b, false // a passkey: rare
		}
		e.open("role").str(r.Role).next("name").str(r.Name).next("public_key").str(r.PublicKey).next("last_seq").uint(r.LastSeq)
		if r.BoundAt != 0 {
			e.next("bound_at").uint(r.BoundAt)
		}
		if r.Retired {
			e.next("retired").raw("true")
		}
		if r.RetiredAt != "" {
			e.next("retired_at").str(r.RetiredAt)
		}
		e.close()
	case *PendingRec:
		if r.Hold != nil {
			return b, false
		}
		e.open("id").str(r.ID).next("index").uint(r.Index).next("signer_keyid").str(r.SignerKey).
			next("workflow").str(r.Workflow).next("grant").str(r.Grant).next("step").str(r.Step).
			next("action").str(r.Action).next("target").str(r.Target)
		if len(r.Reserve) > 0 {
			e.next("reserve").limits(r.Reserve)
		}
		if r.Outcome != "" {
			e.next("outcome").str(r.Outcome)
		}
		if r.Overrun {
			e.next("overrun").raw("true")
		}
		e.close()
	case *GrantRec:
		if len(r.Descriptor.Approvals) > 0 {
			return b, false
		}
		e.open("id").str(r.ID).next("kind").str(r.Kind).next("index").uint(r.Index).next("workflow").str(r.Workflow)
		if r.Parent != "" {
			e.next("parent").str(r.Parent)
		}
		e.next("depth").int(r.Depth).next("issuer_keyid").str(r.IssuerKey).next("grantee_keyid").str(r.GranteeKey).
			next("grantee_name").str(r.GranteeName).next("root_keyid").str(r.RootKey).next("descriptor").descriptor(&r.Descriptor).
			next("revocable").bool(r.Revocable).next("scope_hash").str(r.ScopeHash)
		if r.Revoked {
			e.next("revoked").raw("true")
		}
		if r.RevokedAt != "" {
			e.next("revoked_at").str(r.RevokedAt)
		}
		if r.RevokedBy != "" {
			e.next("revoked_by").str(r.RevokedBy)
		}
		if len(r.Spent) > 0 {
			e.next("spent").limits(r.Spent)
		}
		if r.NewerHeld != "" {
			e.next("newer_held").str(r.NewerHeld)
		}
		if r.OlderHeld != "" {
			e.next("older_held").str(r.OlderHeld)
		}
		if r.OffHeld {
			e.next("off_held").raw("true")
		}
		if len(r.OnHold) > 0 {
			e.next("on_hold").strs(r.OnHold)
		}
		e.close()
	default:
		return b, false
	}
	if !e.ok {
		return b, false
	}
	return e.b, true
}

// recEncoder appends one JSON object; ok turns false at a string it
// cannot write as json.Marshal would without escaping.
type recEncoder struct {
	b  []byte
	ok bool
}

func (e *recEncoder) open(name string) *recEncoder {
	e.b = append(e.b, '{', '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
	return e
}

func (e *recEncoder) next(name string) *recEncoder {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
	return e
}

func (e *recEncoder) close() { e.b = append(e.b, '}') }

func (e *recEncoder) raw(s string) *recEncoder {
	e.b = append(e.b, s...)
	return e
}

func (e *recEncoder) uint(v uint64) *recEncoder {
	e.b = strconv.AppendUint(e.b, v, 10)
	return e
}

func (e *recEncoder) int(v int64) *recEncoder {
	e.b = strconv.AppendInt(e.b, v, 10)
	return e
}

func (e *recEncoder) bool(v bool) *recEncoder {
	if v {
		return e.raw("true")
	}
	return e.raw("false")
}

// str writes s quoted when no byte of it needs escaping (printable ASCII
// other than the quote, the backslash and json.Marshal's HTML escapes).
func (e *recEncoder) str(s string) *recEncoder {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			e.ok = false
			return e
		}
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
	return e
}

// strs writes a string list, null when nil (as json.Marshal does).
func (e *recEncoder) strs(v []string) *recEncoder {
	if v == nil {
		return e.raw("null")
	}
	e.b = append(e.b, '[')
	for i, s := range v {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
	return e
}

// limits writes a map of int64 by key, its keys sorted (as json.Marshal
// does); the caller omits a nil or empty one.
func (e *recEncoder) limits(m map[string]int64) *recEncoder {
	var arr [8]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.b = append(e.b, '{')
	for i, k := range keys {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(k)
		e.b = append(e.b, ':')
		e.int(m[k])
	}
	e.b = append(e.b, '}')
	return e
}

// descriptor writes a descriptor without approval rules.
func (e *recEncoder) descriptor(d *scope.Descriptor) *recEncoder {
	e.b = append(e.b, '{')
	e.b = append(e.b, `"capabilities":`...)
	e.strs(d.Capabilities).next("expires_at").str(d.ExpiresAt)
	if len(d.Limits) > 0 {
		e.next("limits").limits(d.Limits)
	}
	if len(d.Principals) > 0 {
		e.next("principals").strs(d.Principals)
	}
	if len(d.StepIDs) > 0 {
		e.next("step_ids").strs(d.StepIDs)
	}
	e.next("targets").strs(d.Targets).next("workflow_id").str(d.WorkflowID)
	e.b = append(e.b, '}')
	return e
}
