package ledger

// Rotating the DENIAL-signing key (DESIGN §1).
//
// GENESIS binds the log key, which signs DENIALs. The admin rotates it with
// a PRINCIPAL statement of op "log_key" naming a new key (see package
// authority, trustkeys.go); from that entry on the ledger signs DENIALs
// with the new key, and the old one is retired for good. The ledger must
// hold the new key's private key before the statement is sequenced, or it
// could not sign the DENIALs that follow, so:
//
//  1. AddDenialKey lists a new key file in the config (denial_keys), an
//     offline step like a checkpoint key rotation;
//  2. the admin's log_key statement is appended, by RotateDenialKey (both
//     steps at once, `custody key rotate-denial`) or by any client. A
//     log_key statement naming a key the ledger does not hold is refused,
//     not logged.
//
// Every key the config lists stays there: the retired one is still bound
// in role log, so nothing it signs is ever a submission.

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"slices"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// denialKeyring reads the DENIAL keys the config lists after the log key.
func (cfg *config) denialKeyring(st configFiles, passphrase func() ([]byte, error), kr *keyring) error {
	kr.denial = map[string]ed25519.PrivateKey{sign.KeyID(kr.log.Public().(ed25519.PublicKey)): kr.log}
	for _, p := range cfg.DenialKeys {
		k, err := readKey(st, p, passphrase)
		if err != nil {
			return fmt.Errorf("reading the DENIAL key: %w", err)
		}
		kr.denial[sign.KeyID(k.Public().(ed25519.PublicKey))] = k
	}
	return nil
}

// denialKey is the private key of the key that signs DENIALs now, as the
// trust chain says, or nil if the ledger does not hold it.
func (l *sequencer) denialKey() ed25519.PrivateKey {
	return l.keys.denial(l.engine.DenialKeyID())
}

// checkDenialKey fails the opening of a ledger that does not hold the key
// its trust chain says signs DENIALs.
func (l *sequencer) checkDenialKey() error {
	id := l.engine.DenialKeyID()
	if id == "" || l.denialKey() != nil {
		return nil
	}
	return fmt.Errorf("the log's DENIAL key %s (named in its trust chain) is not among the keys %s names (log_key, denial_keys)", id, configName)
}

// foreignDenialKey refuses a PRINCIPAL log_key statement naming a key the
// ledger does not hold: were it accepted, the ledger could sign no DENIAL.
func (l *sequencer) foreignDenialKey(env *sign.Parsed) *authority.DecisionError {
	if env.PayloadType != statement.Principal.PayloadType() || statement.PeekField(env.Payload, "op") != statement.OpLogKey {
		return nil
	}
	pub, err := sign.ParsePublicKey(statement.PeekField(env.Payload, "public_key"))
	if err != nil {
		return nil // the engine denies it for its schema
	}
	if l.keys.denial(sign.KeyID(pub)) != nil {
		return nil
	}
	return refusal(authority.UnknownKey, "the new DENIAL key %s is not one this ledger holds: list its private key file first (custody key rotate-denial, or ledger.AddDenialKey)", sign.KeyID(pub))
}

// AddDenialKey lists the key in keyFile (a path relative to the data
// folder, or absolute) among the ledger's DENIAL keys, so that the admin
// can name it in a PRINCIPAL log_key statement. The ledger in loc must not
// be open elsewhere. The key must be one the log has never used or bound.
func AddDenialKey(loc, keyFile string, opts Options) (keyID string, err error) {
	_, err = changeKeys(loc, opts, func(l *Ledger, cfg *config) error {
		k, err := readKey(l.store, keyFile, opts.Passphrase)
		if err != nil {
			return fmt.Errorf("reading the new DENIAL key: %w", err)
		}
		pub := k.Public().(ed25519.PublicKey)
		keyID = sign.KeyID(pub)
		if l.keys.denial(keyID) != nil || slices.Contains(cfg.DenialKeys, keyFile) {
			return fmt.Errorf("%s holds a key this ledger already lists as a DENIAL key", keyFile)
		}
		if l.keys.set.Has(pub) {
			return fmt.Errorf("%s holds one of this log's checkpoint keys: a key has one role", keyFile)
		}
		if rec, err := l.KeyBinding(keyID); err != nil {
			return err
		} else if rec != nil {
			return fmt.Errorf("%s holds a key the log binds already (as %s %q): a key has one role", keyFile, rec.Role, rec.Name)
		}
		cfg.DenialKeys = append(cfg.DenialKeys, keyFile)
		return nil
	})
	return keyID, err
}

// DenialRotation reports a DENIAL key rotation.
type DenialRotation struct {
	Old, New string // key ids
	// Index is the entry of the admin's PRINCIPAL log_key statement.
	Index uint64
	// KeyFile is the new key's file, as the config lists it.
	KeyFile string
}

// RotateDenialKey rotates the DENIAL-signing key of the ledger in loc,
// which must not be open elsewhere: AddDenialKey(keyFile), then the
// PRINCIPAL log_key statement naming it, signed by admin (the key GENESIS
// binds as admin), appended and accepted. From its index on the new key
// signs every DENIAL.
func RotateDenialKey(loc, keyFile string, admin ed25519.PrivateKey, opts Options) (*DenialRotation, error) {
	adminID := sign.KeyID(admin.Public().(ed25519.PublicKey))
	l, err := Open(loc, opts)
	if err != nil {
		return nil, err
	}
	rec, err := l.KeyBinding(adminID)
	if err == nil && (rec == nil || rec.Role != authority.RoleAdmin) {
		err = fmt.Errorf("the key given as the admin's (%s) is not this log's admin key", adminID)
	}
	var listed bool
	if err == nil {
		// A rotation cut short after step 1 is taken up again.
		var cfg *config
		if cfg, err = readConfig(l.store); err == nil {
			listed = slices.Contains(cfg.DenialKeys, keyFile)
		}
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if !listed {
		if _, err := AddDenialKey(loc, keyFile, opts); err != nil {
			return nil, err
		}
	}
	if l, err = Open(loc, opts); err != nil {
		return nil, err
	}
	defer l.Close()
	k, err := readKey(l.store, keyFile, opts.Passphrase)
	if err != nil {
		return nil, err
	}
	newID := sign.KeyID(k.Public().(ed25519.PublicKey))
	r := &DenialRotation{Old: l.seq.engine.DenialKeyID(), New: newID, KeyFile: keyFile}
	seq, err := l.NextSeq(adminID)
	if err != nil {
		return nil, err
	}
	pub := l.keys.denial(newID).Public().(ed25519.PublicKey)
	now := time.Now
	if opts.Clock != nil {
		now = opts.Clock
	}
	st := statement.LogKeyRotation(statement.Header{Timestamp: statement.FormatTimestamp(now()),
		Log: l.origin, Actor: rec.Name, Seq: seq}, pub)
	_, raw, err := statement.Sign(admin, st)
	if err != nil {
		return nil, err
	}
	res, err := l.Append(context.Background(), raw)
	if err != nil {
		return nil, fmt.Errorf("appending the log_key statement: %w", err)
	}
	if res.Verdict != authority.Accepted {
		return nil, fmt.Errorf("the log_key statement was %s at index %d: %s: %s", res.Verdict, res.Index, res.Code, res.Reason)
	}
	r.Index = res.Index
	if l.seq.engine.DenialKeyID() != newID {
		return nil, errors.New("the log_key statement was accepted, but the DENIAL key did not change") // a bug
	}
	return r, nil
}
