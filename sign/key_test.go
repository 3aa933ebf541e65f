package sign

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/big"
	"strings"
	"testing"
)

// encodePoint is the RFC 8032 §5.1.2 encoding, for building test points.
func encodePoint(p *extended) []byte {
	zinv := new(big.Int).ModInverse(p.Z.toBig(), edP)
	x := mod(new(big.Int).Mul(p.X.toBig(), zinv))
	y := mod(new(big.Int).Mul(p.Y.toBig(), zinv))
	be := make([]byte, 32)
	y.FillBytes(be)
	out := make([]byte, 32)
	for i := range 32 {
		out[i] = be[31-i]
	}
	out[31] |= byte(x.Bit(0)) << 7
	return out
}

func mustDecode(t *testing.T, enc []byte) *extended {
	t.Helper()
	p, st := decodePoint(enc)
	if st != pointOK {
		t.Fatalf("decodePoint(%x) = %v", enc, st)
	}
	return p
}

func seedKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func TestKeyIDAndEncoding(t *testing.T) {
	priv := seedKey(1)
	pub := priv.Public().(ed25519.PublicKey)
	if got, want := KeyID(pub), "65b60673d6ed884bf01c2c222d82ada0740f29ac3355d6a925c81f17f47a27b8"; got != want {
		t.Errorf("KeyID = %s, want %s", got, want)
	}
	if got, want := EncodePublicKey(pub), "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ="; got != want {
		t.Errorf("EncodePublicKey = %s, want %s", got, want)
	}
	back, err := ParsePublicKey(EncodePublicKey(pub))
	if err != nil || !back.Equal(pub) {
		t.Fatalf("ParsePublicKey round trip: %v", err)
	}
}

// Generated keys (Go's and, via the openssl tests, OpenSSL's) always pass,
// and decodePoint agrees with the encoder.
func TestGeneratedKeysAccepted(t *testing.T) {
	for i := 0; i < 50; i++ {
		pub, _, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPublicKey(pub); err != nil {
			t.Fatalf("CheckPublicKey(%x): %v", pub, err)
		}
		if enc := encodePoint(mustDecode(t, pub)); !bytes.Equal(enc, pub) {
			t.Fatalf("decode/encode %x -> %x", pub, enc)
		}
	}
}

// The libsodium blocklist (ge25519_has_small_order), each entry with both
// sign bits: 14 encodings, all rejected, each for the right reason.
func TestSmallOrderBlocklistRejected(t *testing.T) {
	want := map[int][2]pointStatus{ // index -> status with sign bit clear, set
		0: {pointSmallOrder, pointSmallOrder},   // y=0: (±sqrt(-1), 0), order 4
		1: {pointSmallOrder, pointNonCanonical}, // y=1: identity; x=0 so sign bit is non-canonical
		2: {pointSmallOrder, pointSmallOrder},   // order 8
		3: {pointSmallOrder, pointSmallOrder},   // order 8
		4: {pointSmallOrder, pointNonCanonical}, // y=p-1: (0,-1) order 2
		5: {pointNonCanonical, pointNonCanonical},
		6: {pointNonCanonical, pointNonCanonical},
	}
	for i, y := range smallOrder {
		for s := 0; s < 2; s++ {
			enc := y
			enc[31] |= byte(s) << 7
			if got := classifyPoint(enc[:]); got != want[i][s] {
				t.Errorf("classifyPoint(%x) = %v, want %v", enc, got, want[i][s])
			}
			err := CheckPublicKey(enc[:])
			if !errors.Is(err, ErrKey) {
				t.Errorf("CheckPublicKey(%x) = %v, want %s", enc, err, CodeKey)
			}
			if _, err := ParsePublicKey(base64.StdEncoding.EncodeToString(enc[:])); !errors.Is(err, ErrKey) {
				t.Errorf("ParsePublicKey(%x) = %v", enc, err)
			}
			if !hasSmallOrderEncoding(enc[:]) {
				t.Errorf("hasSmallOrderEncoding(%x) = false", enc)
			}
		}
	}
}

// Derive the torsion subgroup independently: the multiples of an order-8
// point are exactly the canonical small-order encodings of the blocklist.
func TestTorsionDerivedMatchesBlocklist(t *testing.T) {
	t8 := mustDecode(t, smallOrder[2][:])
	got := map[string]bool{}
	p := identity()
	for k := 0; k < 8; k++ {
		enc := encodePoint(p)
		got[hex.EncodeToString(enc)] = true
		if classifyPoint(enc) != pointSmallOrder {
			t.Errorf("[%d]T8 = %x not classified small order", k, enc)
		}
		if !hasSmallOrderEncoding(enc) {
			t.Errorf("[%d]T8 = %x not in blocklist", k, enc)
		}
		p = p.add(t8)
	}
	if !p.isIdentity() {
		t.Fatal("[8]T8 != identity")
	}
	if len(got) != 8 {
		t.Fatalf("torsion subgroup has %d distinct points, want 8", len(got))
	}
}

func TestPublicKeyTable(t *testing.T) {
	good := seedKey(1).Public().(ed25519.PublicKey)
	gp := mustDecode(t, good)
	t8 := mustDecode(t, smallOrder[2][:])
	mixed := encodePoint(gp.add(t8)) // A + T: order 8L
	t4 := mustDecode(t, make([]byte, 32))
	mixed4 := encodePoint(gp.add(t4)) // order 4L

	// y >= p: y = p + 2 (all such y are non-canonical whatever the point).
	ygep := bytes.Clone(smallOrder[5][:])
	ygep[0] += 2
	// A canonical key with a flipped sign bit is another valid point (-A);
	// a good key with y replaced by y+p would be non-canonical, but y+p <
	// 2^255 only for y < 19, so use the all-ones y.
	allOnes := bytes.Repeat([]byte{0xff}, 32)

	// Find a y that is not on the curve.
	var offCurve []byte
	for y := byte(2); y < 100; y++ {
		enc := make([]byte, 32)
		enc[0] = y
		if _, st := decodePoint(enc); st == pointNotOnCurve {
			offCurve = enc
			break
		}
	}
	if offCurve == nil {
		t.Fatal("no off-curve y found")
	}

	tests := []struct {
		name string
		in   string
		want pointStatus // pointOK means accepted
		msg  string
	}{
		{"valid key", EncodePublicKey(good), pointOK, ""},
		{"identity 0100..00", base64.StdEncoding.EncodeToString(smallOrder[1][:]), pointSmallOrder, "small-order"},
		{"zero (order 4)", base64.StdEncoding.EncodeToString(make([]byte, 32)), pointSmallOrder, "small-order"},
		{"y=p non-canonical zero", base64.StdEncoding.EncodeToString(smallOrder[5][:]), pointNonCanonical, "non-canonical"},
		{"y=p+2", base64.StdEncoding.EncodeToString(ygep), pointNonCanonical, "non-canonical"},
		{"all ones", base64.StdEncoding.EncodeToString(allOnes), pointNonCanonical, "non-canonical"},
		{"off curve", base64.StdEncoding.EncodeToString(offCurve), pointNotOnCurve, "not a point"},
		{"mixed order 8L", base64.StdEncoding.EncodeToString(mixed), pointMixedOrder, "small-order component"},
		{"mixed order 4L", base64.StdEncoding.EncodeToString(mixed4), pointMixedOrder, "small-order component"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := base64.StdEncoding.DecodeString(tc.in)
			if got := classifyPoint(raw); got != tc.want {
				t.Errorf("classifyPoint = %v, want %v", got, tc.want)
			}
			_, err := ParsePublicKey(tc.in)
			if tc.want == pointOK {
				if err != nil {
					t.Errorf("ParsePublicKey: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("ParsePublicKey = %v, want %s mentioning %q", err, CodeKey, tc.msg)
			}
		})
	}
}

func TestParsePublicKeyStrictBase64(t *testing.T) {
	good := EncodePublicKey(seedKey(1).Public().(ed25519.PublicKey))
	// Flip a padding bit: the last char before '=' carries 2 unused bits.
	last := strings.IndexByte(base64Alphabet, good[42])
	stray := good[:42] + string(base64Alphabet[last|1]) + "="
	if stray == good {
		stray = good[:42] + string(base64Alphabet[last^1]) + "="
	}
	for _, in := range []string{
		good[:43],                     // missing padding
		good[:20] + "\n" + good[20:],  // line break (skipped by encoding/base64)
		" " + good,                    // space
		strings.TrimSuffix(good, "="), // unpadded
		stray,                         // stray padding bits
		base64.StdEncoding.EncodeToString(make([]byte, 31)),
		base64.StdEncoding.EncodeToString(make([]byte, 33)),
		base64.URLEncoding.EncodeToString(seedKey(3).Public().(ed25519.PublicKey)), // may contain - or _
		"",
	} {
		if in == good {
			continue
		}
		if _, err := ParsePublicKey(in); !errors.Is(err, ErrKey) {
			t.Errorf("ParsePublicKey(%q) = %v, want %s", in, err, CodeKey)
		}
	}
}

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// Go's crypto/ed25519 accepts the identity key with the signature
// (R = identity, S = 0) for every message; Verify must not.
func TestVerifyRejectsIdentityKeyForgery(t *testing.T) {
	pub := ed25519.PublicKey(bytes.Clone(smallOrder[1][:]))
	var sig [64]byte
	copy(sig[:32], smallOrder[1][:])
	pt, _ := PayloadType("confirm")
	msg := []byte(`{"any":"thing"}`)
	if !ed25519.Verify(pub, PAE(pt, msg), sig[:]) {
		t.Log("crypto/ed25519 rejects the identity forgery itself (fine)")
	}
	p := &Parsed{Kind: "confirm", PayloadType: pt, Payload: msg, KeyID: KeyID(pub), Sig: sig[:]}
	if err := p.Verify(pub); !errors.Is(err, ErrSignature) {
		t.Fatalf("Verify(identity key, forgery) = %v, want %s", err, CodeSignature)
	}
}

func BenchmarkCheckPublicKey(b *testing.B) {
	pub := seedKey(1).Public().(ed25519.PublicKey)
	for b.Loop() {
		if err := CheckPublicKey(pub); err != nil {
			b.Fatal(err)
		}
	}
}
