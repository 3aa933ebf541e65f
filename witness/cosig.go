package witness

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Signed-note signature types (C2SP signed-note, tlog-cosignature).
const (
	algEd25519       = 0x01
	algCosignatureV1 = 0x04
	algMLDSA44       = 0x06
)

// sigSize is a cosignature/v1 signature after its key ID: an 8-byte
// timestamp and a 64-byte Ed25519 signature.
const sigSize = 8 + ed25519.SignatureSize

// maxTimestamp is the largest timestamp a cosignature may carry (2^63-1).
const maxTimestamp = 1<<63 - 1

// KeyID is the key ID of an Ed25519 cosignature/v1 key:
// SHA-256(name || "\n" || 0x04 || public key)[:4], big-endian.
func KeyID(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', algCosignatureV1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Message is what a cosignature/v1 signs: the header line, the timestamp
// line, and the checkpoint's body (its text up to, not including, the
// blank line before the signatures; it ends in "\n").
func Message(body []byte, timestamp uint64) []byte {
	m := make([]byte, 0, len("cosignature/v1\ntime \n")+20+len(body))
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, timestamp, 10)
	m = append(m, '\n')
	return append(m, body...)
}

// A Key is a witness's cosignature/v1 verifier key. It is a note.Verifier,
// so note.Open can check cosignatures with it.
type Key struct {
	name string
	id   uint32
	pub  ed25519.PublicKey
}

// Name is the key name (the witness's name in its signature lines).
func (k *Key) Name() string { return k.name }

// KeyHash is the cosignature/v1 key ID.
func (k *Key) KeyHash() uint32 { return k.id }

// PublicKey is the Ed25519 public key.
func (k *Key) PublicKey() ed25519.PublicKey { return k.pub }

// VerifierKey is the key as a signed-note verifier key of type 0x04.
func (k *Key) VerifierKey() string {
	return fmt.Sprintf("%s+%08x+%s", k.name, k.id, base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, k.pub...)))
}

// Verify checks a cosignature (timestamp || Ed25519 signature) over a
// note's text, as note.Open calls it.
func (k *Key) Verify(msg, sig []byte) bool {
	if len(sig) != sigSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > maxTimestamp {
		return false
	}
	return ed25519.Verify(k.pub, Message(msg, t), sig[8:])
}

// ParseKey reads a witness's verifier key: a signed-note verifier key
// <name>+<hex key ID>+<base64 type || public key> of type 0x04
// (cosignature/v1), or of type 0x01 (plain Ed25519), which is read, as
// Tessera reads it, as the cosignature/v1 key of the same public key. The
// key ID written in the key must be the one its type calls for.
func ParseKey(vkey string) (*Key, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%q is not a verifier key (<name>+<key id>+<base64 key>)", vkey)
	}
	if !validName(name) {
		return nil, fmt.Errorf("verifier key %q: invalid key name", vkey)
	}
	id, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil || len(hash16) != 8 {
		return nil, fmt.Errorf("verifier key %q: the key id %q is not 8 hex digits", vkey, hash16)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(key64)
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("verifier key %q: the key is not standard base64", vkey)
	}
	alg, pub := raw[0], raw[1:]
	switch alg {
	case algEd25519, algCosignatureV1:
	case algMLDSA44:
		return nil, fmt.Errorf("verifier key %q: ML-DSA-44 cosignatures (type 0x06) are not supported; give the witness's Ed25519 key", vkey)
	default:
		return nil, fmt.Errorf("verifier key %q: signature type 0x%02x is not a witness key type (0x04 cosignature/v1, or 0x01 Ed25519)", vkey, alg)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("verifier key %q: an Ed25519 key is %d bytes, not %d", vkey, ed25519.PublicKeySize, len(pub))
	}
	k := &Key{name: name, id: KeyID(name, pub), pub: ed25519.PublicKey(pub)}
	want := k.id
	if alg == algEd25519 {
		// SHA-256(name || "\n" || 0x01 || key)[:4], the plain key's id.
		h := sha256.Sum256(append(append([]byte(name+"\n"), algEd25519), pub...))
		want = binary.BigEndian.Uint32(h[:4])
	}
	if uint32(id) != want {
		return nil, fmt.Errorf("verifier key %q: key id %08x does not match the key (want %08x)", vkey, id, want)
	}
	return k, nil
}

// validName reports whether name is a valid signed-note key name:
// non-empty UTF-8 without spaces or "+".
func validName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// A Signer makes cosignature/v1 signatures with an Ed25519 key: what a
// witness does. custody uses it in tests and known-answer checks; it never
// cosigns its own checkpoints.
type Signer struct {
	Key
	priv ed25519.PrivateKey
	// Now is the signing time (default time.Now).
	Now func() time.Time
}

// NewSigner returns a cosigner for the key under the given name.
func NewSigner(name string, priv ed25519.PrivateKey) (*Signer, error) {
	if !validName(name) {
		return nil, fmt.Errorf("invalid key name %q", name)
	}
	if len(priv) != ed25519.PrivateKeySize {
		return nil, errors.New("not an Ed25519 private key")
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &Signer{Key: Key{name: name, id: KeyID(name, pub), pub: pub}, priv: priv}, nil
}

// Sign cosigns a note's text (note.Sign calls it).
func (s *Signer) Sign(msg []byte) ([]byte, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now().Unix()
	if t < 0 {
		return nil, errors.New("cosignature time before 1970")
	}
	sig := binary.BigEndian.AppendUint64(make([]byte, 0, sigSize), uint64(t))
	return append(sig, ed25519.Sign(s.priv, Message(msg, uint64(t)))...), nil
}

var _ note.Signer = (*Signer)(nil)
var _ note.Verifier = (*Key)(nil)

// SignatureTime is the time a cosignature line's signature (base64, key
// ID first, as in note.Signature.Base64) says it was made.
func SignatureTime(b64 string) (time.Time, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 4+sigSize {
		return time.Time{}, errors.New("not a cosignature/v1 signature")
	}
	t := binary.BigEndian.Uint64(raw[4:])
	if t > maxTimestamp {
		return time.Time{}, errors.New("cosignature timestamp past 2^63-1")
	}
	return time.Unix(int64(t), 0).UTC(), nil
}
