package authority

import (
	"crypto/ed25519"
	"strings"

	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Passkeys and several keys per principal (DESIGN §1).
//
// A principal's name may hold several keys, one per device: the first
// bound by PRINCIPAL enroll, the others by PRINCIPAL add_key. Authority
// that belongs to a principal (owning a workflow, having issued a grant,
// having signed a STOP) belongs to the name, so any of its live keys may
// use it; a key is retired on its own (a lost device), and the grants it
// issued end with it. An approval quorum counts names.
//
// A key's identity is its underlying public key, whatever its encoding:
// an Ed25519 key bound raw and the same key inside a webauthn-ed25519
// SPKI are one key, so binding it under the other encoding (as an agent,
// a principal, the admin) is identity_conflict.

// allowedKind denies a statement its passkey may not sign (DESIGN §1,
// allowed_types). It is a step 4 check (the signer may issue this kind):
// the signature verified, so the signer is accountable and the attempt
// is logged as a DENIAL (not_authorized), which is what an auditor wants
// to see when a compromised page asks a person's passkey for a CONFIRM.
func (c *check) allowedKind() {
	if !c.signer.MaySign(c.h.Type) {
		c.deny(NotAuthorized, "key %s of %q is a passkey allowed to sign only %s, not %s",
			short(c.keyID), c.signer.Name, strings.Join(c.signer.AllowedTypes, ", "), c.h.Type)
	}
}

// sameHolder reports whether keyID is the signer's key, or another key of
// the same principal name.
func (c *check) sameHolder(keyID string) bool {
	if keyID == c.keyID {
		return true
	}
	if c.signer == nil || c.signer.Role != RolePrincipal {
		return false
	}
	k := c.e.Key(keyID)
	return k != nil && k.Role == RolePrincipal && k.Name == c.signer.Name
}

// otherEncoding returns the key id the same underlying Ed25519 key has in
// its other encoding (raw <-> webauthn-ed25519 SPKI), or "" when it has
// none (an ES256 key).
func otherEncoding(p *statement.PrincipalDoc) string {
	switch p.KeyType {
	case "":
		if pub := boundKey(p.PublicKey); pub != nil {
			return sign.Ed25519SPKIKeyID(pub)
		}
	case sign.KeyTypeWebAuthnEd25519:
		if k, err := sign.ParsePasskeyKey(p.KeyType, p.PublicKey); err == nil {
			return sign.KeyID(k.Ed25519())
		}
	}
	return ""
}

// principalKeyID is the key id a PRINCIPAL statement names: the SHA-256 of
// the raw key, or of the SPKI DER for a passkey. statement.Parse checked
// the key.
func principalKeyID(p *statement.PrincipalDoc) string {
	if p.IsPasskey() {
		if k, err := sign.ParsePasskeyKey(p.KeyType, p.PublicKey); err == nil {
			return k.KeyID()
		}
		return ""
	}
	return sign.KeyID(boundKey(p.PublicKey))
}

// boundElsewhere denies a key bound under its other encoding.
func (c *check) boundElsewhere(alias string) bool {
	if alias == "" {
		return false
	}
	if k := c.e.Key(alias); k != nil {
		c.deny(IdentityConflict, "the same key is already bound, in its other encoding (key id %s), as %s %q", short(alias), k.Role, k.Name)
		return true
	}
	return false
}

// granteeElsewhere is boundElsewhere for a grantee's raw Ed25519 key.
func (c *check) granteeElsewhere(pub ed25519.PublicKey) bool {
	if pub == nil {
		return false
	}
	return c.boundElsewhere(sign.Ed25519SPKIKeyID(pub))
}

// bindPrincipal binds a principal key, first or added.
func (c *check) bindPrincipal(kid string, p *statement.PrincipalDoc, n *NameRec) {
	r := &KeyRec{Role: RolePrincipal, Name: p.Name, PublicKey: p.PublicKey}
	if p.IsPasskey() {
		r.KeyType, r.RPID, r.Origins, r.AllowedTypes = p.KeyType, p.RPID, p.Origins, p.Allowed()
	}
	put(c.e.st, prefKey+kid, r)
	if n == nil {
		put(c.e.st, prefName+p.Name, &NameRec{KeyID: kid})
		return
	}
	nn := *n
	nn.Added++
	put(c.e.st, prefName+p.Name, &nn)
}

// liveKeys is how many of a principal name's keys are not retired.
func (e *Engine) liveKeys(n *NameRec) int {
	if n.Added == 0 {
		// One key; a record written before keys were counted has Retired
		// 0 even for a retired key, so ask the key.
		if k := e.Key(n.KeyID); k != nil && !k.Retired {
			return 1
		}
		return 0
	}
	return 1 + n.Added - n.Retired
}

// PrincipalKeys is how many keys a principal name holds, and how many of
// them are live, for tools that show a principal.
func (e *Engine) PrincipalKeys(name string) (total, live int) {
	n := get[NameRec](e.st, prefName+name)
	if n == nil {
		return 0, 0
	}
	return 1 + n.Added, e.liveKeys(n)
}
