package merkle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// A Checkpoint is a signed tree head in C2SP tlog-checkpoint form: the log's
// origin, the tree size, and the tree's root hash.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   Hash
}

// algEd25519 is the signed-note signature type of Ed25519 keys.
const algEd25519 = 0x01

// signer is a note.Signer over an Ed25519 private key.
type signer struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
}

func (s *signer) Name() string                    { return s.name }
func (s *signer) KeyHash() uint32                 { return s.hash }
func (s *signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

// NewSigner returns a C2SP signed-note signer that signs with the given
// Ed25519 key under the given key name (for a log: its origin). Its key hash
// is, as in golang.org/x/mod/sumdb/note, the first 4 bytes (big-endian) of
// SHA-256(name || "\n" || 0x01 || public key).
func NewSigner(name string, key ed25519.PrivateKey) (note.Signer, error) {
	if !isValidKeyName(name) {
		return nil, fmt.Errorf("merkle: invalid signed-note key name %q", name)
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("merkle: Ed25519 private key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if !ed25519.NewKeyFromSeed(key.Seed()).Equal(key) {
		return nil, errors.New("merkle: Ed25519 private key does not match its public half")
	}
	pub := key.Public().(ed25519.PublicKey)
	return &signer{name: name, hash: keyHash(name, pub), key: key}, nil
}

// keyHash returns the signed-note key hash of an Ed25519 key:
// SHA-256(name || "\n" || 0x01 || public key)[:4], big-endian.
func keyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', algEd25519})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// VerifierKey returns the signed-note verifier key string
// (<name>+<hex key hash>+<base64 0x01||public key>) for an Ed25519 public
// key, as note.NewEd25519VerifierKey does, after checking the name.
func VerifierKey(name string, pub ed25519.PublicKey) (string, error) {
	if !isValidKeyName(name) {
		return "", fmt.Errorf("merkle: invalid signed-note key name %q", name)
	}
	return note.NewEd25519VerifierKey(name, pub)
}

// isValidKeyName reports whether name is a valid signed-note key name (and so
// a valid origin for this package): non-empty UTF-8 without spaces or "+".
func isValidKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// SignCheckpoint returns the C2SP tlog-checkpoint for the tree of the given
// size and root, signed as a C2SP signed note by signer and any cosigners
// (during a checkpoint key rotation the old and new keys both sign). Every
// signer's key name must be the origin ([ErrWrongOrigin] otherwise).
func SignCheckpoint(origin string, size uint64, root Hash, signer note.Signer, cosigners ...note.Signer) ([]byte, error) {
	if !isValidKeyName(origin) {
		return nil, fmt.Errorf("merkle: invalid checkpoint origin %q", origin)
	}
	signers := append([]note.Signer{signer}, cosigners...)
	for _, s := range signers {
		if s.Name() != origin {
			return nil, fmt.Errorf("%w: signer key name %q, origin %q", ErrWrongOrigin, s.Name(), origin)
		}
	}
	body := log.Checkpoint{Origin: origin, Size: size, Hash: root[:]}.Marshal()
	msg, err := note.Sign(&note.Note{Text: string(body)}, signers...)
	if err != nil {
		return nil, fmt.Errorf("merkle: couldn't sign checkpoint: %w", err)
	}
	return msg, nil
}

// OpenCheckpoint verifies a signed checkpoint of the log with the given
// origin and returns its content. verifierKeys is the log's key set in the
// text form [ParseKeySet] reads: a single signed-note verifier key (whose
// name must be the origin) for a log that never rotated its checkpoint key,
// or one key a line after a rotation.
//
// Signatures by other keys (witness cosignatures) are ignored: they neither
// help nor hurt. It returns an error wrapping [ErrUnsignedCheckpoint] if no
// valid signature by a key of the set is present (or one of them is
// invalid, or only retired keys signed a checkpoint larger than they may
// sign), [ErrWrongOrigin] if the checkpoint or a key names another log, and
// [ErrMalformedCheckpoint] if the signed body is not exactly the three lines
// this log writes (canonical decimal size, canonical base64 of a 32-byte
// root, no extension lines).
func OpenCheckpoint(text []byte, origin string, verifierKeys string) (Checkpoint, error) {
	ks, err := ParseKeySet(verifierKeys)
	if err != nil {
		return Checkpoint{}, err
	}
	if ks.Origin() != origin {
		return Checkpoint{}, fmt.Errorf("%w: verifier key is for %q, want %q", ErrWrongOrigin, ks.Origin(), origin)
	}
	return ks.Open(text)
}

// Open verifies a signed checkpoint against the key set; see
// [OpenCheckpoint]. A checkpoint signed only by retired keys is accepted
// only if it is exactly the head one of them is pinned to; see
// [KeySet.OpenRetired] for a smaller one.
func (ks *KeySet) Open(text []byte) (Checkpoint, error) {
	c, pins, err := ks.OpenRetired(text)
	if err != nil || pins == nil {
		return c, err
	}
	var why []string
	for _, p := range pins {
		if p.Root != nil && p.Size == c.Size && *p.Root == c.Root {
			return c, nil
		}
		why = append(why, p.describe())
	}
	return Checkpoint{}, fmt.Errorf("%w: a checkpoint of size %d, root %s, is signed only by a retired key, which vouches only for the head it was retired at (%s); a checkpoint before it is trusted once proven consistent with a trusted one (custody verify consistency), and a fresh bundle or proof is signed by the current key",
		ErrUnsignedCheckpoint, c.Size, c.Root, strings.Join(why, "; "))
}

func (p Pin) describe() string {
	if p.Root == nil {
		return fmt.Sprintf("size %d, root not given in the key set", p.Size)
	}
	return fmt.Sprintf("size %d, root %s", p.Size, *p.Root)
}

// OpenRetired verifies a signed checkpoint as Open does, but also accepts
// one signed only by retired keys that is no larger than the head they are
// pinned to; it then returns those keys' pins, and the caller must prove
// the checkpoint consistent with one of them (VerifyConsistency to its
// pinned root) or with a checkpoint Open accepted before trusting it. pins
// is nil when a current key signed the checkpoint.
func (ks *KeySet) OpenRetired(text []byte) (c Checkpoint, pins []Pin, err error) {
	vs := make([]note.Verifier, len(ks.keys))
	for i, k := range ks.keys {
		vs[i] = k.verifier
	}
	origin := ks.origin
	n, err := note.Open(text, note.VerifierList(vs...))
	if err != nil {
		return Checkpoint{}, nil, classifyOpenError(ks, err)
	}
	var cp log.Checkpoint
	rest, err := cp.Unmarshal([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("%w: %v", ErrMalformedCheckpoint, err)
	}
	if cp.Origin != origin {
		return Checkpoint{}, nil, fmt.Errorf("%w: checkpoint origin %q, want %q", ErrWrongOrigin, cp.Origin, origin)
	}
	if len(rest) != 0 {
		return Checkpoint{}, nil, fmt.Errorf("%w: body %q is not in canonical form", ErrMalformedCheckpoint, n.Text)
	}
	if len(cp.Hash) != HashSize {
		return Checkpoint{}, nil, fmt.Errorf("%w: root hash is %d bytes, want %d", ErrMalformedCheckpoint, len(cp.Hash), HashSize)
	}
	// Exactly the three lines SignCheckpoint writes: this rejects extension
	// lines, leading zeros and non-canonical base64.
	c = Checkpoint{Origin: cp.Origin, Size: cp.Size, Root: Hash(cp.Hash)}
	if canon := (log.Checkpoint{Origin: c.Origin, Size: c.Size, Hash: c.Root[:]}).Marshal(); !bytes.Equal(canon, []byte(n.Text)) {
		return Checkpoint{}, nil, fmt.Errorf("%w: body %q is not in canonical form", ErrMalformedCheckpoint, n.Text)
	}
	// A retired key vouches at most for the head it was retired at and
	// the checkpoints before it.
	var retired []string
	for _, sig := range n.Sigs {
		k := ks.find(sig.Name, sig.Hash)
		if k == nil {
			continue
		}
		if k.maxSize == nil {
			return c, nil, nil
		}
		if c.Size <= *k.maxSize {
			pins = append(pins, Pin{Size: *k.maxSize, Root: k.root})
			continue
		}
		retired = append(retired, fmt.Sprintf("%s+%08x (retired at size %d)", sig.Name, sig.Hash, *k.maxSize))
	}
	if pins != nil {
		return c, pins, nil
	}
	return Checkpoint{}, nil, fmt.Errorf("%w: a checkpoint of size %d is signed only by %s", ErrUnsignedCheckpoint, c.Size, strings.Join(retired, ", "))
}

// classifyOpenError turns a failure of note.Open into one of this
// package's sentinels.
func classifyOpenError(ks *KeySet, oerr error) error {
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(oerr, &unverified):
		return fmt.Errorf("%w: no signature by %s", ErrUnsignedCheckpoint, ks.names())
	case errors.As(oerr, &invalid):
		return fmt.Errorf("%w: invalid signature by %s+%08x", ErrUnsignedCheckpoint, invalid.Name, invalid.Hash)
	}
	return fmt.Errorf("%w: %v", ErrMalformedCheckpoint, oerr)
}
