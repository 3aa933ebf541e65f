package sign

import (
	"crypto/rand"
	"math/big"
	"testing"
)

func randFieldElems(t *testing.T, n int) []*big.Int {
	t.Helper()
	out := []*big.Int{big.NewInt(0), big.NewInt(1), big.NewInt(19), new(big.Int).Sub(edP, big.NewInt(1)),
		new(big.Int).Sub(edP, big.NewInt(19)), new(big.Int).Lsh(big.NewInt(1), 254)}
	for len(out) < n {
		x, err := rand.Int(rand.Reader, edP)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

// The limb arithmetic agrees with math/big, including on chained results
// (weakly reduced inputs).
func TestFieldAgainstBig(t *testing.T) {
	xs := randFieldElems(t, 40)
	for _, a := range xs {
		for _, b := range xs {
			fa, fb := feFromBig(a), feFromBig(b)
			if got := fa.toBig(); got.Cmp(a) != 0 {
				t.Fatalf("round trip %v -> %v", a, got)
			}
			check := func(op string, got fe, want *big.Int) {
				t.Helper()
				want = mod(want)
				if got.toBig().Cmp(want) != 0 {
					t.Fatalf("%s(%v, %v) = %v, want %v", op, a, b, got.toBig(), want)
				}
			}
			check("mul", feMul(fa, fb), new(big.Int).Mul(a, b))
			check("add", feAdd(fa, fb), new(big.Int).Add(a, b))
			check("sub", feSub(fa, fb), new(big.Int).Sub(a, b))
			// Chains: outputs feed back in without a full reduction.
			m := feMul(feAdd(fa, fb), feSub(fa, fb))
			check("(a+b)(a-b)", m, new(big.Int).Sub(new(big.Int).Mul(a, a), new(big.Int).Mul(b, b)))
			c := fa
			cb := new(big.Int).Set(a)
			for range 20 {
				c = feMul(feAdd(c, c), feSub(c, fb))
				cb = mod(new(big.Int).Mul(new(big.Int).Lsh(cb, 1), new(big.Int).Sub(cb, b)))
			}
			check("chain", c, cb)
		}
	}
}

// bigAffineAdd is the textbook affine addition law, as an oracle for the
// extended-coordinate formula: x3 = (x1y2+y1x2)/(1+d x1x2y1y2),
// y3 = (y1y2+x1x2)/(1-d x1x2y1y2).
func bigAffineAdd(x1, y1, x2, y2 *big.Int) (*big.Int, *big.Int) {
	t := mod(new(big.Int).Mul(edD, mod(new(big.Int).Mul(mod(new(big.Int).Mul(x1, x2)), mod(new(big.Int).Mul(y1, y2))))))
	xn := mod(new(big.Int).Add(new(big.Int).Mul(x1, y2), new(big.Int).Mul(y1, x2)))
	yn := mod(new(big.Int).Add(new(big.Int).Mul(y1, y2), new(big.Int).Mul(x1, x2)))
	xd := new(big.Int).ModInverse(mod(new(big.Int).Add(big.NewInt(1), t)), edP)
	yd := new(big.Int).ModInverse(mod(new(big.Int).Sub(big.NewInt(1), t)), edP)
	return mod(xn.Mul(xn, xd)), mod(yn.Mul(yn, yd))
}

func TestScalarMultAgainstAffine(t *testing.T) {
	for i := 0; i < 5; i++ {
		pub, _, _ := GenerateKey()
		p := mustDecode(t, pub)
		zi := new(big.Int).ModInverse(p.Z.toBig(), edP)
		px, py := mod(new(big.Int).Mul(p.X.toBig(), zi)), mod(new(big.Int).Mul(p.Y.toBig(), zi))
		k, _ := rand.Int(rand.Reader, big.NewInt(1<<20))
		// Oracle: double-and-add in affine coordinates.
		rx, ry := big.NewInt(0), big.NewInt(1)
		for j := k.BitLen() - 1; j >= 0; j-- {
			rx, ry = bigAffineAdd(rx, ry, rx, ry)
			if k.Bit(j) == 1 {
				rx, ry = bigAffineAdd(rx, ry, px, py)
			}
		}
		got := p.scalarMult(k)
		zi = new(big.Int).ModInverse(got.Z.toBig(), edP)
		gx, gy := mod(new(big.Int).Mul(got.X.toBig(), zi)), mod(new(big.Int).Mul(got.Y.toBig(), zi))
		if gx.Cmp(rx) != 0 || gy.Cmp(ry) != 0 {
			t.Fatalf("[%v]P differs from the affine oracle", k)
		}
		// T stays consistent: T/Z = x*y.
		if tz := mod(new(big.Int).Mul(got.T.toBig(), zi)); tz.Cmp(mod(new(big.Int).Mul(gx, gy))) != 0 {
			t.Fatal("T coordinate inconsistent")
		}
		if !p.scalarMult(edL).isIdentity() {
			t.Fatal("[L]P != identity for a generated key")
		}
		if p.scalarMult(new(big.Int).Sub(edL, big.NewInt(1))).isIdentity() {
			t.Fatal("[L-1]P == identity")
		}
	}
}
