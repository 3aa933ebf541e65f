package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// GenerateKey returns a new Ed25519 key pair from crypto/rand.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// KeyID returns the key id of pub: the lowercase hex SHA-256 of its 32 raw
// bytes (DESIGN §1 "Keys").
func KeyID(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:])
}

// EncodePublicKey returns the form a public key takes inside a statement:
// the standard base64 of its 32 raw bytes.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey parses the statement form of a public key (standard base64
// of 32 raw bytes) and validates it with CheckPublicKey. The base64 must be
// canonical: padded, no stray padding bits, no line breaks or spaces.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := decodeBase64Strict(s)
	if err != nil {
		return nil, keyErr("public_key", err.Error())
	}
	pub := ed25519.PublicKey(b)
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// CheckPublicKey reports whether pub may be bound as a key: exactly 32 bytes,
// a canonical encoding (y < p, no sign bit on x = 0), a point on the curve,
// not of small order (the 8 torsion points, incl. the identity), and in the
// prime-order subgroup (no torsion component). Keys made by any RFC 8032
// key generation, including Go's and OpenSSL's, always pass.
//
// The answer is a pure function of the 32 bytes and the subgroup check is
// costly (about 0.4 ms), while the same keys recur in every grant and every
// bundle, so results are remembered (up to checkedMax keys).
func CheckPublicKey(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return keyErr("public_key", fmt.Sprintf("must be %d bytes, got %d", ed25519.PublicKeySize, len(pub)))
	}
	k := [32]byte(pub)
	if v, ok := checked.Load(k); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	err := checkPoint(pub)
	if checkedN.Add(1) > checkedMax {
		checked.Clear() // bound memory; forgetting only costs a recheck
		checkedN.Store(0)
	}
	checked.Store(k, err)
	return err
}

// checked remembers CheckPublicKey's answers: [32]byte -> error (nil: ok).
var (
	checked  sync.Map
	checkedN atomic.Int64
)

const checkedMax = 1 << 16

func checkPoint(pub ed25519.PublicKey) error {
	switch classifyPoint(pub) {
	case pointOK:
		return nil
	case pointNonCanonical:
		return keyErr("public_key", "non-canonical point encoding (y >= p, or x = 0 with the sign bit set)")
	case pointNotOnCurve:
		return keyErr("public_key", "not a point on the Ed25519 curve")
	case pointSmallOrder:
		return keyErr("public_key", "small-order point (order divides 8)")
	default:
		return keyErr("public_key", "point has a small-order component (not in the prime-order subgroup)")
	}
}

// smallOrder holds the y-coordinates (little-endian, sign bit cleared) that
// encode the eight torsion points, canonical and non-canonical spellings:
// libsodium's ge25519_has_small_order blocklist
// (src/libsodium/crypto_core/ed25519/ref10/ed25519_ref10.c). It is a cheap
// second line for Verify; CheckPublicKey decides by computing the order.
var smallOrder = [7][32]byte{
	{},     // y = 0: order 4
	{0x01}, // y = 1: the identity
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05}, // order 8
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a}, // order 8
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // y = p-1: order 2
	{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // y = p (= 0): order 4
	{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // y = p+1 (= 1): order 1
}

// hasSmallOrderEncoding reports whether pub is one of the blocklisted
// encodings, with either sign bit.
func hasSmallOrderEncoding(pub []byte) bool {
	if len(pub) != 32 {
		return false
	}
	var y [32]byte
	copy(y[:], pub)
	y[31] &= 0x7f
	for i := range smallOrder {
		if y == smallOrder[i] {
			return true
		}
	}
	return false
}

// decodeBase64Strict decodes standard, padded base64 and requires that the
// input be the canonical encoding of the result: no stray padding bits, and
// none of the CR/LF characters that encoding/base64 otherwise skips.
func decodeBase64Strict(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid standard base64: %v", err)
	}
	// The decoder skips only '\r' and '\n'; without them, strict decoding
	// succeeds only on the one canonical spelling of b.
	if strings.ContainsAny(s, "\r\n") && base64.StdEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("non-canonical base64 (line breaks or other characters)")
	}
	return b, nil
}
