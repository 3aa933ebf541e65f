package merkle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// A KeySet is the set of checkpoint keys a reader trusts for one log: the
// answer to "which signatures make a checkpoint of this log genuine".
//
// A log that never rotated its checkpoint key has a set of one key, and its
// text form is that key's signed-note verifier key on one line, exactly what
// it always was. After a rotation the set holds the keys that sign the
// log's checkpoints now and the keys that signed them before, each of those
// pinned to the head it was retired at, its tree size and root:
//
//	# custody checkpoint keys of example.com/log
//	example.com/log+3c7e1a2b+AXh0...
//	example.com/log+0d9f44e1+AQJk... max_size=120533 root=kWb2JPKj...=
//
// A checkpoint signed by a current key is genuine. One signed only by a
// retired key is genuine only if it is exactly the head the key is pinned
// to (DESIGN §6): the retired key may still be on a host (the log key signs
// DENIALs), and with it alone a thief could sign a different history of
// any size up to max_size, a whole new log with its own GENESIS. A smaller
// checkpoint the retired key signed before its retirement is trusted only
// once proven consistent with a trusted checkpoint ([KeySet.OpenRetired]
// says which it needs). A retired key without root= (a set written before
// version 3 of the design) vouches for no checkpoint on its own. Every key
// has the same name, the log's origin; blank lines and lines starting with
// # are ignored.
type KeySet struct {
	origin string
	keys   []setKey
}

type setKey struct {
	vkey     string
	verifier note.Verifier
	pub      ed25519.PublicKey
	maxSize  *uint64 // nil: a current key
	root     *Hash   // the root at maxSize; nil if the set does not say
}

// Pin is the head a retired key was retired at: it vouches for this
// checkpoint and, through a consistency proof, for the smaller ones before
// it, never for any other history.
type Pin struct {
	Size uint64
	Root *Hash // nil when the key set does not give it
}

// MaxKeySetKeys bounds the keys one set may hold, so a hostile key file
// cannot make every checkpoint check slow.
const MaxKeySetKeys = 16

// ParseKeySet reads a key set in the text form described at [KeySet].
func ParseKeySet(text string) (*KeySet, error) {
	ks := &KeySet{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 3 {
			return nil, fmt.Errorf("merkle: checkpoint key set, line %d: want a verifier key and at most max_size=N root=R, got %d fields", i+1, len(fields))
		}
		k, err := parseSetKey(fields[0])
		if err != nil {
			return nil, fmt.Errorf("merkle: checkpoint key set, line %d: %w", i+1, err)
		}
		if len(fields) >= 2 {
			v, ok := strings.CutPrefix(fields[1], "max_size=")
			n, err := strconv.ParseUint(v, 10, 64)
			if !ok || err != nil || strconv.FormatUint(n, 10) != v {
				return nil, fmt.Errorf("merkle: checkpoint key set, line %d: %q is not max_size=<decimal tree size>", i+1, fields[1])
			}
			k.maxSize = &n
		}
		if len(fields) == 3 {
			v, ok := strings.CutPrefix(fields[2], "root=")
			raw, err := base64.StdEncoding.Strict().DecodeString(v)
			if !ok || err != nil || len(raw) != HashSize || base64.StdEncoding.EncodeToString(raw) != v {
				return nil, fmt.Errorf("merkle: checkpoint key set, line %d: %q is not root=<base64 SHA-256 root hash>", i+1, fields[2])
			}
			h := Hash(raw)
			k.root = &h
		}
		if ks.origin == "" {
			ks.origin = k.verifier.Name()
		} else if k.verifier.Name() != ks.origin {
			return nil, fmt.Errorf("merkle: checkpoint key set, line %d: key %s is for log %q, the set's first key for %q", i+1, k.vkey, k.verifier.Name(), ks.origin)
		}
		for _, o := range ks.keys {
			if o.pub.Equal(k.pub) {
				return nil, fmt.Errorf("merkle: checkpoint key set, line %d: key %s is listed twice", i+1, k.vkey)
			}
		}
		if len(ks.keys) == MaxKeySetKeys {
			return nil, fmt.Errorf("merkle: checkpoint key set holds more than %d keys", MaxKeySetKeys)
		}
		ks.keys = append(ks.keys, k)
	}
	if len(ks.keys) == 0 {
		return nil, fmt.Errorf("merkle: no checkpoint verifier key given")
	}
	return ks, nil
}

func parseSetKey(vkey string) (setKey, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return setKey{}, fmt.Errorf("%q is not a signed-note verifier key: %v", vkey, err)
	}
	if !isValidKeyName(v.Name()) {
		return setKey{}, fmt.Errorf("%q: invalid key name", vkey)
	}
	_, b64, _ := strings.Cut(vkey[len(v.Name())+1:], "+")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != algEd25519 {
		return setKey{}, fmt.Errorf("%q is not an Ed25519 verifier key", vkey)
	}
	return setKey{vkey: vkey, verifier: v, pub: ed25519.PublicKey(raw[1:])}, nil
}

// Origin is the name every key of the set has: the log's origin.
func (ks *KeySet) Origin() string { return ks.origin }

// Len is the number of keys in the set.
func (ks *KeySet) Len() int { return len(ks.keys) }

// Current returns the verifier keys that may sign checkpoints of any size,
// in the set's order.
func (ks *KeySet) Current() []string {
	var out []string
	for _, k := range ks.keys {
		if k.maxSize == nil {
			out = append(out, k.vkey)
		}
	}
	return out
}

// Has reports whether the Ed25519 public key is in the set, current or
// retired.
func (ks *KeySet) Has(pub ed25519.PublicKey) bool {
	for _, k := range ks.keys {
		if bytes.Equal(k.pub, pub) {
			return true
		}
	}
	return false
}

// Contains reports whether the verifier key is in the set, current or
// retired.
func (ks *KeySet) Contains(vkey string) bool {
	for _, k := range ks.keys {
		if k.vkey == vkey {
			return true
		}
	}
	return false
}

// PublicKeys returns every key's Ed25519 public key, in the set's order.
func (ks *KeySet) PublicKeys() []ed25519.PublicKey {
	out := make([]ed25519.PublicKey, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = k.pub
	}
	return out
}

// Retire returns a copy of the set in which the given current key is
// retired, pinned to the head of the given size and root.
func (ks *KeySet) Retire(vkey string, size uint64, root Hash) (*KeySet, error) {
	out := &KeySet{origin: ks.origin, keys: append([]setKey(nil), ks.keys...)}
	for i, k := range out.keys {
		if k.vkey == vkey {
			if k.maxSize != nil {
				return nil, fmt.Errorf("merkle: key %s was retired already (max_size=%d)", vkey, *k.maxSize)
			}
			out.keys[i].maxSize, out.keys[i].root = &size, &root
			return out, nil
		}
	}
	return nil, fmt.Errorf("merkle: key %s is not in the set", vkey)
}

// RetiredLine is a retired key's line in a key set's text form.
func RetiredLine(vkey string, size uint64, root Hash) string {
	return fmt.Sprintf("%s max_size=%d root=%s", vkey, size, base64.StdEncoding.EncodeToString(root[:]))
}

// Add returns a copy of the set with one more current key.
func (ks *KeySet) Add(vkey string) (*KeySet, error) {
	return ParseKeySet(strings.TrimSpace(ks.String()) + "\n" + vkey)
}

// String is the set's text form, one key a line, which [ParseKeySet]
// reads back. A set of one current key is that key alone, without a line
// break.
func (ks *KeySet) String() string {
	if len(ks.keys) == 1 && ks.keys[0].maxSize == nil {
		return ks.keys[0].vkey
	}
	var b strings.Builder
	for _, k := range ks.keys {
		b.WriteString(k.vkey)
		if k.maxSize != nil {
			fmt.Fprintf(&b, " max_size=%d", *k.maxSize)
			if k.root != nil {
				fmt.Fprintf(&b, " root=%s", base64.StdEncoding.EncodeToString(k.root[:]))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (ks *KeySet) find(name string, hash uint32) *setKey {
	for i := range ks.keys {
		if k := &ks.keys[i]; k.verifier.Name() == name && k.verifier.KeyHash() == hash {
			return k
		}
	}
	return nil
}

// names lists the set's keys as name+hash for messages.
func (ks *KeySet) names() string {
	parts := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		parts[i] = fmt.Sprintf("%s+%08x", k.verifier.Name(), k.verifier.KeyHash())
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "any of " + strings.Join(parts, ", ")
}
