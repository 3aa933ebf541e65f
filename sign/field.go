package sign

// A minimal GF(2^255-19) for the order checks in edwards.go: five 51-bit
// limbs (the representation of ref10 and filippo.io/edwards25519), because
// math/big's division-based reduction makes [L]P take milliseconds. Only
// mul, add and sub are needed; conversions go through math/big. Variable
// time is fine: public keys are public. Tested against math/big in
// field_test.go.

import (
	"math/big"
	"math/bits"
)

const mask51 = 1<<51 - 1

// fe is a field element, limbs little-endian, each below about 2^51.01
// after carry (weakly reduced: the value may be >= p).
type fe [5]uint64

func feFromBig(x *big.Int) fe {
	v := new(big.Int).Mod(x, edP)
	var f fe
	m := big.NewInt(mask51)
	t := new(big.Int)
	for i := range f {
		f[i] = t.And(v, m).Uint64()
		v.Rsh(v, 51)
	}
	return f
}

func (f *fe) toBig() *big.Int {
	r := new(big.Int)
	for i := 4; i >= 0; i-- {
		r.Lsh(r, 51)
		r.Add(r, new(big.Int).SetUint64(f[i]))
	}
	return r.Mod(r, edP)
}

func (f *fe) isZero() bool { return f.toBig().Sign() == 0 }

func (f *fe) carry() {
	c0, c1, c2, c3, c4 := f[0]>>51, f[1]>>51, f[2]>>51, f[3]>>51, f[4]>>51
	f[0] = f[0]&mask51 + c4*19 // 2^255 = 19 (mod p)
	f[1] = f[1]&mask51 + c0
	f[2] = f[2]&mask51 + c1
	f[3] = f[3]&mask51 + c2
	f[4] = f[4]&mask51 + c3
}

func feAdd(a, b fe) fe {
	r := fe{a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4]}
	r.carry()
	return r
}

// feSub computes a - b as a + 2p - b so that no limb underflows.
func feSub(a, b fe) fe {
	r := fe{
		a[0] + (2*mask51 - 36) - b[0], // 2(2^51 - 19)
		a[1] + 2*mask51 - b[1],
		a[2] + 2*mask51 - b[2],
		a[3] + 2*mask51 - b[3],
		a[4] + 2*mask51 - b[4],
	}
	r.carry()
	return r
}

type u128 struct{ lo, hi uint64 }

func mulAdd(acc u128, a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	lo, c := bits.Add64(acc.lo, lo, 0)
	return u128{lo, acc.hi + hi + c}
}

func (u u128) shr51() uint64 { return u.hi<<13 | u.lo>>51 }

// feMul is schoolbook multiplication with the high products folded back by
// 19 (2^255 = 19 mod p).
func feMul(a, b fe) fe {
	a1_19, a2_19, a3_19, a4_19 := a[1]*19, a[2]*19, a[3]*19, a[4]*19
	var r0, r1, r2, r3, r4 u128
	r0 = mulAdd(r0, a[0], b[0])
	r0 = mulAdd(r0, a1_19, b[4])
	r0 = mulAdd(r0, a2_19, b[3])
	r0 = mulAdd(r0, a3_19, b[2])
	r0 = mulAdd(r0, a4_19, b[1])

	r1 = mulAdd(r1, a[0], b[1])
	r1 = mulAdd(r1, a[1], b[0])
	r1 = mulAdd(r1, a2_19, b[4])
	r1 = mulAdd(r1, a3_19, b[3])
	r1 = mulAdd(r1, a4_19, b[2])

	r2 = mulAdd(r2, a[0], b[2])
	r2 = mulAdd(r2, a[1], b[1])
	r2 = mulAdd(r2, a[2], b[0])
	r2 = mulAdd(r2, a3_19, b[4])
	r2 = mulAdd(r2, a4_19, b[3])

	r3 = mulAdd(r3, a[0], b[3])
	r3 = mulAdd(r3, a[1], b[2])
	r3 = mulAdd(r3, a[2], b[1])
	r3 = mulAdd(r3, a[3], b[0])
	r3 = mulAdd(r3, a4_19, b[4])

	r4 = mulAdd(r4, a[0], b[4])
	r4 = mulAdd(r4, a[1], b[3])
	r4 = mulAdd(r4, a[2], b[2])
	r4 = mulAdd(r4, a[3], b[1])
	r4 = mulAdd(r4, a[4], b[0])

	r := fe{
		r0.lo&mask51 + r4.shr51()*19,
		r1.lo&mask51 + r0.shr51(),
		r2.lo&mask51 + r1.shr51(),
		r3.lo&mask51 + r2.shr51(),
		r4.lo&mask51 + r3.shr51(),
	}
	r.carry()
	return r
}
