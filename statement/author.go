package statement

import (
	"crypto/ed25519"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
)

// GrantOf returns the grant fields of a CONFIRM or DELEGATE, or nil.
func GrantOf(st Statement) *Grant {
	switch s := st.(type) {
	case *ConfirmDoc:
		return &s.Grant
	case *DelegateDoc:
		return &s.Grant
	}
	return nil
}

// Seal sets a CONFIRM's or DELEGATE's scope_hash from its scope, limits,
// ttl_seconds and timestamp (DESIGN §3). Other kinds are left unchanged.
func Seal(st Statement) error {
	g := GrantOf(st)
	if g == nil {
		return nil
	}
	ts, err := ParseTimestamp(st.Head().Timestamp)
	if err != nil {
		return invalid("timestamp", "%v", err)
	}
	d, err := scope.Derive(g.Scope, g.Limits, ts, g.TTLSeconds)
	if err != nil {
		return scopeError(err)
	}
	h, err := d.Hash()
	if err != nil {
		return scopeError(err)
	}
	g.ScopeHash = h
	return nil
}

// Descriptor derives a grant's scope descriptor.
func (g *Grant) Descriptor(timestamp string) (scope.Descriptor, error) {
	ts, err := ParseTimestamp(timestamp)
	if err != nil {
		return scope.Descriptor{}, err
	}
	return scope.Derive(g.Scope, g.Limits, ts, g.TTLSeconds)
}

// Sign checks st, signs its canonical bytes with priv and returns the
// envelope and its canonical JSON (what a ledger is sent).
func Sign(priv ed25519.PrivateKey, st Statement) (sign.Envelope, []byte, error) {
	payload, err := Marshal(st)
	if err != nil {
		return sign.Envelope{}, nil, err
	}
	env, err := sign.Sign(priv, st.Head().Type.Lower(), payload)
	if err != nil {
		return sign.Envelope{}, nil, err
	}
	raw, err := env.Canonical()
	return env, raw, err
}
