package ledger

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
)

// Checkpoint key rotation.
//
// GENESIS binds the log key for ever (DESIGN §2): it signs the ledger's
// DENIALs and, until a rotation, every checkpoint. What rotates is the
// checkpoint key alone. A rotation has two steps, each a short offline
// operation on the data folder:
//
//  1. RotateCheckpointKey adds a new key: from then on every checkpoint is
//     signed by the old and the new key, so readers that know either key
//     keep verifying while the new key is handed out.
//  2. FinishRotation drops the old keys: checkpoints are signed by the new
//     key alone, and each old key is retired, pinned to the head it was
//     retired at (max_size and root): it vouches for that head, and for
//     older checkpoints proven consistent with it, so a thief of it can
//     neither sign the log as it grows nor sign a different past.
//
// Verifiers hold the key set (merkle.KeySet) that Ledger.VerifierKey
// returns and `custody checkpoint --verifier-key` prints.

// Rotation reports a step of a checkpoint key rotation.
type Rotation struct {
	Origin string
	// Size is the tree size of the head signed again by the new keys.
	Size uint64
	// Keys is the key set verifiers need from now on (merkle.KeySet text).
	Keys string
	// Signing lists the verifier keys that sign checkpoints now; Retired
	// those this step retired, with the size they stop at.
	Signing []string
	Retired []string
	// Checkpoint is the head's checkpoint, signed by the keys now in use.
	Checkpoint []byte
	// KeyFile is the new key's file (RotateCheckpointKey only).
	KeyFile string
}

// RotateCheckpointKey starts a checkpoint key rotation of the ledger in
// dir, which must not be open elsewhere: the key in keyFile (a path
// relative to dir, or absolute) joins the checkpoint keys, and the current
// head is signed again by all of them. keyFile must hold a key the log has
// never used for anything. Finish the rotation with FinishRotation once
// verifiers hold the new key.
func RotateCheckpointKey(dir, keyFile string, opts Options) (*Rotation, error) {
	return changeKeys(dir, opts, func(l *Ledger, cfg *config) error {
		if len(l.keys.kr.checkpoint) > 1 {
			return fmt.Errorf("a rotation is under way already (%d checkpoint keys); finish it first", len(l.keys.kr.checkpoint))
		}
		k, err := readKey(l.store, keyFile, opts.Passphrase)
		if err != nil && IsStoreURL(dir) {
			// A log in a database keeps its keys there: the new key is
			// read from this machine and copied in, for every server.
			data, rerr := os.ReadFile(keyFile)
			if rerr != nil {
				return fmt.Errorf("reading the new checkpoint key: %w", rerr)
			}
			if k, err = sign.ParsePrivateKeyPEM(data, opts.Passphrase); err == nil {
				keyFile = "keys/" + filepath.Base(keyFile)
				if _, rerr := l.store.ReadFile(keyFile); rerr == nil {
					return fmt.Errorf("%s exists already in %s; name the new key's file differently", keyFile, l.store.Location())
				}
				err = l.store.WriteFile(keyFile, data)
			}
		}
		if err != nil {
			return fmt.Errorf("reading the new checkpoint key: %w", err)
		}
		pub := k.Public().(ed25519.PublicKey)
		if l.keys.set.Has(pub) { // the log key is always in the set
			return fmt.Errorf("%s holds a key this log has used for checkpoints already: a rotation needs a new key", keyFile)
		}
		if rec, err := l.KeyBinding(sign.KeyID(pub)); err != nil {
			return err
		} else if rec != nil {
			return fmt.Errorf("%s holds a key the log binds already (as %s %q): a key has one role", keyFile, rec.Role, rec.Name)
		}
		if len(cfg.CheckpointKeys) == 0 {
			cfg.CheckpointKeys = []string{cfg.LogKey}
		}
		cfg.CheckpointKeys = append(cfg.CheckpointKeys, keyFile)
		return nil
	})
}

// FinishRotation ends the rotation RotateCheckpointKey started: the newest
// checkpoint key signs alone from now on, and the others are retired at
// the current tree size.
func FinishRotation(dir string, opts Options) (*Rotation, error) {
	return changeKeys(dir, opts, func(l *Ledger, cfg *config) error {
		if len(cfg.CheckpointKeys) < 2 {
			return errors.New("no rotation is under way (one checkpoint key); start one with a new key first")
		}
		h := l.Head()
		last := len(cfg.CheckpointKeys) - 1
		for _, k := range l.keys.kr.checkpoint[:last] {
			vk, err := merkle.VerifierKey(l.origin, k.Public().(ed25519.PublicKey))
			if err != nil {
				return err
			}
			cfg.RetiredKeys = append(cfg.RetiredKeys, retiredKey{VerifierKey: vk, MaxSize: h.Size,
				Root: base64.StdEncoding.EncodeToString(h.Root[:])})
		}
		cfg.CheckpointKeys = cfg.CheckpointKeys[last:]
		return nil
	})
}

// changeKeys opens the ledger (so no other process has it), lets change
// edit its config, writes the config, and opens it again, which signs the
// head with the keys the new config names.
func changeKeys(dir string, opts Options, change func(*Ledger, *config) error) (*Rotation, error) {
	l, err := Open(dir, opts)
	if err != nil {
		return nil, err
	}
	before := l.keys.set
	cfg, err := writeNewConfig(l, dir, opts, change)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if l, err = Open(dir, opts); err != nil {
		return nil, fmt.Errorf("the config names the new keys, but the ledger does not open with them: %w", err)
	}
	defer l.Close()
	h := l.Head()
	r := &Rotation{Origin: l.origin, Size: h.Size, Keys: l.keys.vkey, Signing: l.keys.set.Current(), Checkpoint: h.Checkpoint}
	if len(cfg.CheckpointKeys) > 0 {
		r.KeyFile = cfg.CheckpointKeys[len(cfg.CheckpointKeys)-1]
	}
	for _, vk := range before.Current() {
		if !slices.Contains(r.Signing, vk) {
			r.Retired = append(r.Retired, vk)
		}
	}
	return r, nil
}

// writeNewConfig lets change edit the config of the open ledger l, checks
// that the keys it names can be read, and replaces the config file
// atomically.
func writeNewConfig(l *Ledger, dir string, opts Options, change func(*Ledger, *config) error) (*config, error) {
	cfg, err := readConfig(l.store)
	if err != nil {
		return nil, err
	}
	if err := change(l, cfg); err != nil {
		return nil, err
	}
	if _, err := cfg.keyring(l.store, opts.Passphrase); err != nil {
		return nil, err
	}
	out, _ := json.MarshalIndent(cfg, "", "  ")
	return cfg, l.store.WriteFile(configName, append(out, '\n'))
}
