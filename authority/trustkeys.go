package authority

// Rotating the key that signs DENIALs (DESIGN §1).
//
// GENESIS binds the log key, which signs the log's DENIALs (and, until a
// checkpoint key rotation, its checkpoints). The admin rotates the DENIAL
// key with a PRINCIPAL statement of op "log_key" in the trust chain: its
// name is the log's origin (the log key's bound name) and its public_key
// the new key. From that entry on only the new key signs DENIALs; the old
// one stays bound in role "log", retired, so that nothing it signs is ever
// a submission and no other role can ever bind it. A verifier follows the
// rotation from the trust chain a bundle carries, like any binding.

import (
	"github.com/custodylog/custody/statement"
)

func (c *check) rotateLogKey(p *statement.PrincipalDoc, kid string, existing *KeyRec) {
	meta := c.meta
	if p.Name != meta.Origin {
		c.deny(IdentityConflict, "the DENIAL key's name is the log's origin %q, not %q", meta.Origin, p.Name)
		return
	}
	if existing != nil {
		c.deny(IdentityConflict, "key %s is already bound as %s %q: a new DENIAL key must be one the log never bound", short(kid), existing.Role, existing.Name)
		return
	}
	old := c.e.Key(meta.LogKeyID)
	if old == nil {
		c.deny(NotAuthorized, "the log has no DENIAL key to rotate") // unreachable after GENESIS
		return
	}
	c.accept()
	r := *old
	r.Retired, r.RetiredAt = true, statement.FormatLoggedAt(c.at)
	put(c.e.st, prefKey+meta.LogKeyID, &r)
	c.e.bind(kid, RoleLog, meta.Origin, p.PublicKey, 0)
	m := *c.e.Meta()
	m.LogKeyID = kid
	put(c.e.st, keyMeta, &m)
}

// DenialKeyID is the key id of the key that signs the log's DENIALs now:
// GENESIS's log key until a PRINCIPAL log_key statement rotates it.
func (e *Engine) DenialKeyID() string {
	if m := e.Meta(); m != nil {
		return m.LogKeyID
	}
	return ""
}
