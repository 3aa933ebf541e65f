package author

import (
	"errors"
	"fmt"
	"strings"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/statement"
)

// ParseStatement decodes a statement written by hand or by another tool
// (any whitespace and key order; the strict profile otherwise) into the
// type its "type" field names, and validates it. With seal, a CONFIRM's
// or DELEGATE's scope_hash is computed; without it, a missing one is an
// error that says how to get it, and a wrong one is kept and returned
// with a note (the ledger would deny it as scope_hash_mismatch).
func ParseStatement(data []byte, seal bool) (statement.Statement, string, error) {
	tree, err := canon.ParseRelaxed(data)
	if err != nil {
		return nil, "", err
	}
	t := tree.Get("type")
	if t == nil || t.Kind != canon.String {
		return nil, "", errors.New(`no "type" field: a statement names its kind, like "type": "CONFIRM"`)
	}
	kind := statement.Kind(t.Str)
	if !kind.Valid() {
		return nil, "", fmt.Errorf("type %q is not one of %v", textsafe.Text(t.Str), statement.Kinds)
	}
	grant := kind == statement.Confirm || kind == statement.Delegate
	if grant {
		h := tree.Get("scope_hash")
		missing := h == nil || (h.Kind == canon.String && h.Str == "")
		switch {
		case seal:
			// A placeholder that Seal replaces; it lets the closed schema,
			// which requires the field, decode the rest.
			setMember(tree, "scope_hash", &canon.Value{Kind: canon.String, Str: strings.Repeat("0", 64)})
		case missing:
			cmd := strings.ToLower(string(kind))
			return nil, "", fmt.Errorf("%s has no scope_hash: custody %s fills it from the scope, or pass --seal to compute it here", kind, cmd)
		}
	}
	st := statement.New(kind)
	if err := tree.Decode(st); err != nil {
		return nil, "", err
	}
	var note string
	if grant {
		given := statement.GrantOf(st).ScopeHash
		if err := statement.Seal(st); err != nil {
			return nil, "", err
		}
		if !seal && given != statement.GrantOf(st).ScopeHash {
			note = fmt.Sprintf("warning: scope_hash %s does not match the scope (%s): the ledger will deny it as scope_hash_mismatch; --seal recomputes it", textsafe.Text(given), statement.GrantOf(st).ScopeHash)
			statement.GrantOf(st).ScopeHash = given
		}
	}
	if err := statement.Validate(st); err != nil {
		return nil, "", err
	}
	return st, note, nil
}

// setMember sets (or adds) a member of a JSON object.
func setMember(obj *canon.Value, key string, v *canon.Value) {
	for i := range obj.Members {
		if obj.Members[i].Key == key {
			obj.Members[i].Value = v
			return
		}
	}
	obj.Members = append(obj.Members, canon.Member{Key: key, Value: v})
}
