package console

import (
	"encoding/base64"
	"fmt"
	"sync"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// A directory finds the passkeys the log binds to a principal's name:
// the PRINCIPAL enroll and add_key statements with a passkey, read from
// the trust chain (each accepted PRINCIPAL links back to the one before
// it, DESIGN §5), and each key's live state from the ledger's records.
// It remembers the credential ids it has read and the trust head it read
// up to, so that a sign-in reads only the PRINCIPALs appended since: its
// memory is one small record per passkey the admin enrolled.
type directory struct {
	l *ledger.Ledger

	mu     sync.Mutex
	read   bool                    // guarded by mu: the chain was read up to head
	head   uint64                  // guarded by mu
	byName map[string][]credential // guarded by mu
}

// credential is a passkey a PRINCIPAL bound: its key id and credential id.
type credential struct {
	keyID string
	id    []byte
}

// enrolled is a passkey of a name as the ledger holds it now.
type enrolled struct {
	credential
	key     *sign.Passkey
	rec     *authority.KeyRec
	retired bool
}

// passkeys returns the passkeys bound to name, retired ones included, in
// log order; principal reports whether name is an enrolled principal at
// all (with Ed25519 keys only, passkeys is empty).
func (d *directory) passkeys(name string) (keys []enrolled, principal bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.refresh(); err != nil {
		return nil, false, err
	}
	for _, c := range d.byName[name] {
		rec, err := d.l.KeyBinding(c.keyID)
		if err != nil {
			return nil, false, err
		}
		if rec == nil || rec.Role != authority.RolePrincipal || rec.Name != name || !rec.IsPasskey() {
			continue
		}
		k, err := sign.NewPasskey(rec.KeyType, rec.PublicKey, rec.RPID, rec.Origins)
		if err != nil {
			return nil, false, fmt.Errorf("passkey %s of %q as the ledger binds it: %w", c.keyID, name, err)
		}
		keys = append(keys, enrolled{credential: c, key: k, rec: rec, retired: rec.Retired})
	}
	if len(keys) > 0 {
		return keys, true, nil
	}
	v := d.l.StateView()
	total, _ := v.PrincipalKeys(name)
	return nil, total > 0, v.Err()
}

// refresh reads the PRINCIPALs appended since the last read, newest
// first, back to the trust head read before.
func (d *directory) refresh() error {
	v := d.l.StateView()
	meta := v.Meta()
	if err := v.Err(); err != nil {
		return err
	}
	if meta == nil {
		return nil // no GENESIS yet
	}
	top := meta.TrustHead
	if d.read && top <= d.head {
		return nil
	}
	if d.byName == nil {
		d.byName = map[string][]credential{}
	}
	var found []struct {
		name string
		c    credential
	}
	for i := top; i > 0 && (!d.read || i > d.head); {
		e, err := d.l.Entry(i)
		if err != nil {
			return fmt.Errorf("reading the trust chain at %d: %w", i, err)
		}
		if p, ok := e.Statement.(*statement.PrincipalDoc); ok && p.IsPasskey() && (p.Op == statement.OpEnroll || p.Op == statement.OpAddKey) {
			id, err := base64.StdEncoding.DecodeString(p.CredentialID)
			if k, kerr := sign.ParsePasskeyKey(p.KeyType, p.PublicKey); err == nil && kerr == nil {
				found = append(found, struct {
					name string
					c    credential
				}{p.Name, credential{keyID: k.KeyID(), id: id}})
			}
		}
		if e.Prev == nil {
			break
		}
		i = *e.Prev
	}
	for j := len(found) - 1; j >= 0; j-- { // oldest first
		f := found[j]
		d.byName[f.name] = append(d.byName[f.name], f.c)
	}
	d.read, d.head = true, top
	return nil
}
