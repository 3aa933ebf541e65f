package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/storage"
)

// keyring is what an open ledger signs with.
type keyring struct {
	log        ed25519.PrivateKey   // GENESIS's log key: DENIALs
	checkpoint []ed25519.PrivateKey // every checkpoint, in order
	retired    []retiredKey
	denial     map[string]ed25519.PrivateKey // key id -> key: the log key and every DENIAL key
}

// signingKeys is the ledger's keys part: the keyring the config names
// (the log key, the checkpoint keys, current and retired, and the DENIAL
// keys), the checkpoint signers made from it, the key set verifiers hold
// (merkle.KeySet, and its text) and the ids of every key the log signs
// with. The offline steps that change which keys these are live in
// rotate.go (checkpoint keys) and denialkey.go (DENIAL keys); each
// changes the config and opens the ledger again.
//
// Locking: none. load sets every field while the ledger opens, before
// the workers and the sequencer start; after that they are read-only (a
// later pinRetired, when the sequencer takes the lease, finds every
// retired key pinned already and changes nothing).
type signingKeys struct {
	origin  string
	kr      keyring
	signer  note.Signer   // the first checkpoint key
	signers []note.Signer // the others, during a rotation
	set     *merkle.KeySet
	vkey    string // set, as text: what verifiers need
	// own holds the key ids of every key the log signs with: the log key,
	// each checkpoint key, current or retired, and every DENIAL key.
	own map[string]bool
}

// oneKey is the keyring of a log that signs checkpoints with its log key.
func oneKey(k ed25519.PrivateKey) keyring {
	return keyring{log: k, checkpoint: []ed25519.PrivateKey{k},
		denial: map[string]ed25519.PrivateKey{sign.KeyID(k.Public().(ed25519.PublicKey)): k}}
}

// readKey reads a private key file the config names: relative names are
// the store's files (the data folder's, or the database's); an absolute
// path is a file on this machine.
func readKey(st configFiles, path string, passphrase func() ([]byte, error)) (ed25519.PrivateKey, error) {
	if filepath.IsAbs(path) {
		return sign.ReadPrivateKeyFile(path, passphrase)
	}
	data, err := st.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read key file %s: %w", path, err)
	}
	defer clear(data)
	k, err := sign.ParsePrivateKeyPEM(data, passphrase)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// keyring reads the key files the config names.
func (cfg *config) keyring(st configFiles, passphrase func() ([]byte, error)) (keyring, error) {
	read := func(what, path string) (ed25519.PrivateKey, error) {
		k, err := readKey(st, path, passphrase)
		if err != nil {
			return nil, fmt.Errorf("reading the %s: %w", what, err)
		}
		return k, nil
	}
	var kr keyring
	var err error
	if kr.log, err = read("log key", cfg.LogKey); err != nil {
		return kr, err
	}
	for _, p := range cfg.CheckpointKeys {
		if p == cfg.LogKey {
			kr.checkpoint = append(kr.checkpoint, kr.log)
			continue
		}
		k, err := read("checkpoint key", p)
		if err != nil {
			return kr, err
		}
		kr.checkpoint = append(kr.checkpoint, k)
	}
	if len(kr.checkpoint) == 0 {
		kr.checkpoint = []ed25519.PrivateKey{kr.log}
	}
	kr.retired = cfg.RetiredKeys
	if err := cfg.denialKeyring(st, passphrase, &kr); err != nil {
		return kr, err
	}
	return kr, nil
}

// load prepares the checkpoint signers and the key set verifiers need.
func (k *signingKeys) load() error {
	k.signer, k.signers = nil, nil
	var lines []string
	for i, key := range k.kr.checkpoint {
		s, err := merkle.NewSigner(k.origin, key)
		if err != nil {
			return fmt.Errorf("checkpoint key %d: %w", i+1, err)
		}
		vk, err := merkle.VerifierKey(k.origin, key.Public().(ed25519.PublicKey))
		if err != nil {
			return fmt.Errorf("checkpoint key %d: %w", i+1, err)
		}
		if i == 0 {
			k.signer = s
		} else {
			k.signers = append(k.signers, s)
		}
		lines = append(lines, vk)
	}
	for _, r := range k.kr.retired {
		line := fmt.Sprintf("%s max_size=%d", r.VerifierKey, r.MaxSize)
		if r.Root != "" {
			line += " root=" + r.Root
		}
		lines = append(lines, line)
	}
	if len(k.kr.log) != ed25519.PrivateKeySize {
		return errors.New("log key: not an Ed25519 private key")
	}
	ks, err := merkle.ParseKeySet(strings.Join(lines, "\n"))
	if err != nil {
		return fmt.Errorf("checkpoint keys: %w", err)
	}
	if ks.Origin() != k.origin {
		return fmt.Errorf("checkpoint keys are for %q, the log is %q", ks.Origin(), k.origin)
	}
	// GENESIS binds the log key as the log's verifier key; readers check
	// it is in the set they hold, so it must never leave it.
	if !ks.Has(k.kr.log.Public().(ed25519.PublicKey)) {
		return errors.New("checkpoint keys: the log key (bound in GENESIS) is neither a checkpoint key nor a retired one")
	}
	k.set, k.vkey = ks, ks.String()
	k.own = map[string]bool{sign.KeyID(k.kr.log.Public().(ed25519.PublicKey)): true}
	for _, pub := range ks.PublicKeys() {
		k.own[sign.KeyID(pub)] = true
	}
	for id := range k.kr.denial { // every DENIAL key, current, retired or about to sign
		k.own[id] = true
	}
	return nil
}

// pinRetired gives every retired key without a recorded root the root of
// the tree of size entries at its size (rootAt: the log's own tiles), and
// loads the keys again: a key set pins each retired key to its (size,
// root) (DESIGN §6). Folders retired since version 3 of the design record
// the root and need nothing here.
func (k *signingKeys) pinRetired(size uint64, rootAt func(uint64) (merkle.Hash, error)) error {
	changed := false
	for i, r := range k.kr.retired {
		if r.Root != "" {
			continue
		}
		if r.MaxSize == 0 || r.MaxSize > size {
			return fmt.Errorf("retired checkpoint key %s: max_size %d is not a size of this log (%d entries)", r.VerifierKey, r.MaxSize, size)
		}
		root, err := rootAt(r.MaxSize)
		if err != nil {
			return fmt.Errorf("retired checkpoint key %s: the root at size %d: %w", r.VerifierKey, r.MaxSize, err)
		}
		k.kr.retired[i].Root = base64.StdEncoding.EncodeToString(root[:])
		changed = true
	}
	if !changed {
		return nil
	}
	return k.load()
}

// sign signs a tree head with every checkpoint key.
func (k *signingKeys) sign(size uint64, root merkle.Hash) ([]byte, error) {
	return merkle.SignCheckpoint(k.origin, size, root, k.signer, k.signers...)
}

// resign returns the stored checkpoint cp signed by the current checkpoint
// keys, storing it in st if that differs from cp.
func (k *signingKeys) resign(st storage.Store, size uint64, root merkle.Hash, cp []byte) ([]byte, error) {
	fresh, err := k.sign(size, root)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(fresh, cp) {
		return cp, nil
	}
	if err := st.SetCheckpoint(context.Background(), size, fresh); err != nil {
		return nil, fmt.Errorf("storing the checkpoint signed by the new checkpoint keys: %w", err)
	}
	return fresh, nil
}

// denial is the private key of the DENIAL key id, or nil if the ledger
// does not hold it.
func (k *signingKeys) denial(id string) ed25519.PrivateKey { return k.kr.denial[id] }
