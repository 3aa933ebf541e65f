package scope

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/custodylog/custody/canon"
)

// HashPrefix separates scope hashes from every other SHA-256 in custody
// (DESIGN §3).
const HashPrefix = "custody/scope/v1\x00"

// Digest is a scope hash in raw form.
type Digest [sha256.Size]byte

// String returns the lowercase hex form used in scope_hash fields.
func (h Digest) String() string { return hex.EncodeToString(h[:]) }

// ParseDigest reads a scope_hash: exactly 64 lowercase hex digits. The
// error is an *Error with CodeNonCanonical.
func ParseDigest(s string) (Digest, error) {
	var h Digest
	if len(s) != 2*len(h) {
		return Digest{}, errorf(CodeNonCanonical, "scope hash %s is not 64 lowercase hex digits", quote(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Digest{}, errorf(CodeNonCanonical, "scope hash %s is not 64 lowercase hex digits", quote(s))
		}
	}
	hex.Decode(h[:], []byte(s))
	return h, nil
}

// Sum returns the scope hash of d:
//
//	SHA-256("custody/scope/v1\x00" || JCS(descriptor))
//
// d must be canonical (Validate); a non-canonical descriptor has no hash,
// since no grant could carry it.
func (d Descriptor) Sum() (Digest, error) {
	if err := d.Validate(); err != nil {
		return Digest{}, err
	}
	b, err := canon.Marshal(d)
	if err != nil {
		return Digest{}, err
	}
	h := sha256.New()
	h.Write([]byte(HashPrefix))
	h.Write(b)
	var out Digest
	h.Sum(out[:0])
	return out, nil
}

// Hash returns the scope hash of d in lowercase hex, as scope_hash fields
// carry it. See Sum.
func (d Descriptor) Hash() (string, error) {
	h, err := d.Sum()
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
