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
	d, err := scope.DeriveRules(g.Scope, g.Limits, g.Approvals, ts, g.TTLSeconds)
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
	return scope.DeriveRules(g.Scope, g.Limits, g.Approvals, ts, g.TTLSeconds)
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

// LogKeyRotation builds the admin's PRINCIPAL statement of op log_key that
// names pub as the key that signs the log's DENIALs from its entry on
// (DESIGN §1): name is the log's origin (h.Log), public_key the new key,
// principal_id "log_key_" and the first 16 hex digits of its key id. The
// caller fills h (type aside) and signs it with the admin key.
func LogKeyRotation(h Header, pub ed25519.PublicKey) *PrincipalDoc {
	h.Type = Principal
	return &PrincipalDoc{Header: h, PrincipalID: "log_key_" + sign.KeyID(pub)[:16], Op: OpLogKey,
		Name: h.Log, PublicKey: sign.EncodePublicKey(pub)}
}
