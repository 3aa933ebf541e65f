package statement

import (
	"fmt"

	"github.com/custodylog/custody/canon"
)

// Parse reads the payload of an envelope whose payload type names kind.
// The payload must be canonical, of that kind, and well formed.
func Parse(kind Kind, payload []byte) (Statement, error) {
	if st := decodeFast(kind, payload); st != nil {
		if err := st.validate(); err != nil {
			return nil, err
		}
		return st, nil
	}
	return parseReflect(kind, payload)
}

// parseReflect is Parse by way of canon's reflection-based decoder: the
// reference that decodeFast must agree with, and the path that explains
// every rejection.
func parseReflect(kind Kind, payload []byte) (Statement, error) {
	tree, err := canon.Parse(payload)
	if err != nil {
		return nil, err
	}
	return decode(kind, tree)
}

func decode(kind Kind, tree *canon.Value) (Statement, error) {
	t := tree.Get("type")
	if t == nil || t.Kind != canon.String {
		return nil, invalid("type", "required string field \"type\" is missing")
	}
	if Kind(t.Str) != kind {
		return nil, invalid("type", "%q does not match the payload type, which is for %s", t.Str, kind)
	}
	st := New(kind)
	if st == nil {
		return nil, invalid("type", "%q is not a statement kind", kind)
	}
	if err := tree.Decode(st); err != nil {
		return nil, err
	}
	if err := st.validate(); err != nil {
		return nil, err
	}
	return st, nil
}

// PeekID returns the id field of a payload of the given kind if it can be
// read at all, even when the payload is otherwise invalid; a DENIAL uses it
// to name what it refused.
func PeekID(kind Kind, payload []byte) string { return PeekField(payload, idField[kind]) }

// PeekWorkflow returns the workflow a payload names (workflow_id, or
// scope.workflow_id for grants) if it can be read at all.
func PeekWorkflow(payload []byte) string {
	tree, err := canon.ParseRelaxed(payload)
	if err != nil {
		return ""
	}
	if f := tree.Get("workflow_id"); f != nil && f.Kind == canon.String {
		return f.Str
	}
	if f := tree.Get("scope").Get("workflow_id"); f != nil && f.Kind == canon.String {
		return f.Str
	}
	return ""
}

// PeekField returns a top-level string field of a JSON object payload, or
// "" if the payload cannot be read or the field is not a string.
func PeekField(payload []byte, name string) string {
	tree, err := canon.ParseRelaxed(payload)
	if err != nil {
		return ""
	}
	if f := tree.Get(name); f != nil && f.Kind == canon.String {
		return f.Str
	}
	return ""
}

var idField = map[Kind]string{
	Genesis: "genesis_id", Principal: "principal_id", Confirm: "confirm_id",
	Delegate: "delegation_id", Revoke: "revoke_id", Receipt: "receipt_id",
	Stop: "request_id", Resume: "resume_id", Approval: "approval_id", Denial: "denial_id",
}

// Marshal checks st and returns its canonical bytes.
func Marshal(st Statement) ([]byte, error) {
	if err := st.validate(); err != nil {
		return nil, err
	}
	b, err := canon.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", st.Head().Type, err)
	}
	return b, nil
}

// Validate checks st as Parse would, without encoding it.
func Validate(st Statement) error { return st.validate() }
