package merkle

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"sync"
)

// HashSize is the size in bytes of a [Hash].
const HashSize = sha256.Size

// A Hash is a SHA-256 Merkle tree hash: a leaf hash, an interior node hash or
// a tree root. It is a fixed-size value, so it never aliases and copying it
// does not allocate.
type Hash [HashSize]byte

// String returns the standard base64 encoding of h, as used in checkpoints
// and bundles.
func (h Hash) String() string {
	return base64.StdEncoding.EncodeToString(h[:])
}

// ParseHash parses the standard base64 encoding of a hash. It is strict: the
// encoding must be canonical and decode to exactly [HashSize] bytes.
func ParseHash(s string) (Hash, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != HashSize {
		return Hash{}, fmt.Errorf("merkle: malformed hash %q", s)
	}
	return Hash(b), nil
}

// EmptyRoot is the root of the empty tree: SHA-256() of the empty string,
// per RFC 6962, Section 2.1 (MTH({}) = SHA-256()).
var EmptyRoot = Hash(sha256.Sum256(nil))

// leafHashers recycles SHA-256 states so that LeafHash does not allocate on
// the ledger's hot path.
var leafHashers = sync.Pool{New: func() any { return &leafHasher{h: sha256.New()} }}

// leafPrefix is the RFC 6962 leaf hash prefix; a variable, so that writing it
// does not allocate.
var leafPrefix = [1]byte{0x00}

type leafHasher struct {
	h   hash.Hash
	sum [HashSize]byte
}

// LeafHash returns the RFC 6962 hash of a log entry:
// MTH({d(0)}) = SHA-256(0x00 || d(0)) (RFC 6962, Section 2.1).
func LeafHash(leaf []byte) Hash {
	lh := leafHashers.Get().(*leafHasher)
	lh.h.Reset()
	lh.h.Write(leafPrefix[:])
	lh.h.Write(leaf)
	out := Hash(lh.h.Sum(lh.sum[:0]))
	leafHashers.Put(lh)
	return out
}

// NodeHash returns the RFC 6962 hash of an interior node:
// MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])) (RFC 6962, Section 2.1).
func NodeHash(left, right Hash) Hash {
	var buf [1 + 2*HashSize]byte
	buf[0] = 0x01
	copy(buf[1:], left[:])
	copy(buf[1+HashSize:], right[:])
	return sha256.Sum256(buf[:])
}

// hashChildren is NodeHash over slices, in the shape transparency-dev/merkle
// wants (compact.HashFn, Nodes.Rehash). Both inputs must be HashSize long.
func hashChildren(left, right []byte) []byte {
	h := NodeHash(Hash(left), Hash(right))
	return h[:]
}

// ParseHashes parses a list of hashes (a proof as the HTTP API and the
// bundle formats carry it), each as ParseHash does.
func ParseHashes(in []string) ([]Hash, error) {
	out := make([]Hash, len(in))
	for i, s := range in {
		h, err := ParseHash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}
