package sign

// Point validation for Ed25519 public keys, written with math/big because the
// standard library does not export its edwards25519 field arithmetic and
// filippo.io/edwards25519 is not a dependency. Decoding follows RFC 8032 in
// math/big; the point arithmetic uses the small field in field.go.
//
// Curve: -x^2 + y^2 = 1 + d x^2 y^2 over GF(p), p = 2^255 - 19,
// d = -121665/121666 (RFC 8032 §5.1). Group order 8·L with
// L = 2^252 + 27742317777372353535851937790883648493.

import "math/big"

var (
	edP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	edD = func() *big.Int { // d = -121665 * inverse(121666) mod p
		d := new(big.Int).ModInverse(big.NewInt(121666), edP)
		d.Mul(d, big.NewInt(-121665))
		return d.Mod(d, edP)
	}()
	edD2   = new(big.Int).Mod(new(big.Int).Lsh(edD, 1), edP)
	edL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	// sqrt(-1) = 2^((p-1)/4) mod p (RFC 8032 §5.1.3 step 3).
	edSqrtM1 = new(big.Int).Exp(big.NewInt(2), new(big.Int).Rsh(new(big.Int).Sub(edP, big.NewInt(1)), 2), edP)
	edExp    = new(big.Int).Rsh(new(big.Int).Sub(edP, big.NewInt(5)), 3) // (p-5)/8
)

// pointStatus classifies a 32-byte public key encoding.
type pointStatus int

const (
	pointOK           pointStatus = iota // canonical, on the curve, order L
	pointNonCanonical                    // y >= p, or x = 0 with the sign bit set
	pointNotOnCurve                      // no x satisfies the curve equation
	pointSmallOrder                      // order divides 8 (the 8 torsion points)
	pointMixedOrder                      // order 2L, 4L or 8L: has a torsion component
)

// extended is a point in extended twisted Edwards coordinates
// (X:Y:Z:T) with x = X/Z, y = Y/Z, x·y = T/Z (Hisil–Wong–Carter–Dawson 2008).
type extended struct{ X, Y, Z, T fe }

var (
	feOne = fe{1}
	feD2  = feFromBig(edD2)
)

func mod(x *big.Int) *big.Int { return x.Mod(x, edP) }

// decodePoint implements RFC 8032 §5.1.3 strictly: unlike the decoding in
// crypto/ed25519 (which reduces y mod p), a y >= p is rejected, as is x = 0
// with the sign bit set.
func decodePoint(enc []byte) (*extended, pointStatus) {
	var be [32]byte
	for i := range 32 {
		be[31-i] = enc[i]
	}
	sign := be[0] >> 7
	be[0] &= 0x7f
	y := new(big.Int).SetBytes(be[:])
	if y.Cmp(edP) >= 0 {
		return nil, pointNonCanonical
	}
	// u = y^2 - 1, v = d y^2 + 1
	y2 := mod(new(big.Int).Mul(y, y))
	u := mod(new(big.Int).Sub(y2, big.NewInt(1)))
	v := mod(new(big.Int).Add(mod(new(big.Int).Mul(edD, y2)), big.NewInt(1)))
	// x = u v^3 (u v^7)^((p-5)/8)
	v3 := mod(new(big.Int).Mul(mod(new(big.Int).Mul(v, v)), v))
	v7 := mod(new(big.Int).Mul(mod(new(big.Int).Mul(v3, v3)), v))
	x := new(big.Int).Exp(mod(new(big.Int).Mul(u, v7)), edExp, edP)
	x = mod(x.Mul(x, mod(new(big.Int).Mul(u, v3))))
	vx2 := mod(new(big.Int).Mul(v, mod(new(big.Int).Mul(x, x))))
	negU := mod(new(big.Int).Neg(u))
	switch {
	case vx2.Cmp(u) == 0:
	case vx2.Cmp(negU) == 0:
		x = mod(x.Mul(x, edSqrtM1))
	default:
		return nil, pointNotOnCurve
	}
	if x.Sign() == 0 && sign == 1 {
		return nil, pointNonCanonical
	}
	if uint8(x.Bit(0)) != sign {
		x = mod(x.Neg(x))
	}
	return &extended{X: feFromBig(x), Y: feFromBig(y), Z: feOne, T: feFromBig(new(big.Int).Mul(x, y))}, pointOK
}

// add returns p+q using the unified formula add-2008-hwcd-3 (complete for
// a = -1 and non-square d, so it also doubles):
//
//	A = (Y1-X1)(Y2-X2), B = (Y1+X1)(Y2+X2), C = 2d T1 T2, D = 2 Z1 Z2,
//	E = B-A, F = D-C, G = D+C, H = B+A,
//	X3 = E F, Y3 = G H, T3 = E H, Z3 = F G.
func (p *extended) add(q *extended) *extended {
	a := feMul(feSub(p.Y, p.X), feSub(q.Y, q.X))
	b := feMul(feAdd(p.Y, p.X), feAdd(q.Y, q.X))
	c := feMul(feMul(p.T, feD2), q.T)
	zz := feMul(p.Z, q.Z)
	d := feAdd(zz, zz)
	e, f, g, h := feSub(b, a), feSub(d, c), feAdd(d, c), feAdd(b, a)
	return &extended{X: feMul(e, f), Y: feMul(g, h), T: feMul(e, h), Z: feMul(f, g)}
}

func identity() *extended { return &extended{Y: feOne, Z: feOne} }

// scalarMult returns [k]p by double-and-add (variable time: public data only).
func (p *extended) scalarMult(k *big.Int) *extended {
	r := identity()
	for i := k.BitLen() - 1; i >= 0; i-- {
		r = r.add(r)
		if k.Bit(i) == 1 {
			r = r.add(p)
		}
	}
	return r
}

// isIdentity reports whether p is (0, 1): X = 0 and Y = Z.
func (p *extended) isIdentity() bool {
	d := feSub(p.Y, p.Z)
	return p.X.isZero() && d.isZero()
}

// classifyPoint decodes enc and decides whether it is acceptable as a public
// key: canonical, on the curve, and of prime order L. Rejecting the torsion
// component (order 2L..8L) as well as small order means cofactored and
// cofactorless verifiers agree on every signature under a bound key.
func classifyPoint(enc []byte) pointStatus {
	pt, st := decodePoint(enc)
	if st != pointOK {
		return st
	}
	if pt.scalarMult(big.NewInt(8)).isIdentity() {
		return pointSmallOrder
	}
	if !pt.scalarMult(edL).isIdentity() {
		return pointMixedOrder
	}
	return pointOK
}
