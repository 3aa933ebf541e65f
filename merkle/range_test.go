package merkle

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

// rangeTiles serves memTiles through TileRangeReader too, counting reads.
type rangeTiles struct {
	m            memTiles
	whole, parts atomic.Int64
	whole0       atomic.Int64 // whole reads of level-0 tiles
	trim         int          // if > 0, ReadTileRange returns at most trim hashes (a broken reader)
}

func (r *rangeTiles) ReadTile(level, index uint64) ([]byte, error) {
	r.whole.Add(1)
	if level == 0 {
		r.whole0.Add(1)
	}
	return r.m.ReadTile(level, index)
}

func (r *rangeTiles) ReadTileRange(level, index uint64, from, to int) ([]byte, error) {
	r.parts.Add(1)
	data, err := r.m.ReadTile(level, index)
	if err != nil {
		return nil, err
	}
	lo, hi := min(from*HashSize, len(data)), min(to*HashSize, len(data))
	if r.trim > 0 {
		hi = min(hi, lo+r.trim*HashSize)
	}
	return slices.Clone(data[lo:hi]), nil
}

// TestProverRangeReader checks proofs, roots and edges computed through a
// TileRangeReader against the plain Prover, with and without a cache, at
// sizes with partial tiles at every level.
func TestProverRangeReader(t *testing.T) {
	const n = 70001
	m, root := buildTiles(t, n)
	plain := NewProver(m, 0)
	rr := &rangeTiles{m: m}
	for _, p := range []*Prover{NewProver(rr, 0), NewProver(rr, 64), NewProver(rr, 100000)} {
		rnd := newRand(5)
		for range 400 {
			size := 1 + rnd.intn(n)
			if rnd.intn(4) == 0 {
				size = n
			}
			i := rnd.intn(size)
			a, err1 := p.InclusionProof(i, size)
			b, err2 := plain.InclusionProof(i, size)
			if err1 != nil || err2 != nil || !slices.Equal(a, b) {
				t.Fatalf("proofs of %d at %d differ: %v, %v", i, size, err1, err2)
			}
			s1 := rnd.intn(size) + 1
			c, err1 := p.ConsistencyProof(s1, size)
			d, err2 := plain.ConsistencyProof(s1, size)
			if err1 != nil || err2 != nil || !slices.Equal(c, d) {
				t.Fatalf("consistency proofs %d..%d differ: %v, %v", s1, size, err1, err2)
			}
		}
		got, err := p.RootAt(n)
		if err != nil || got != root {
			t.Fatalf("RootAt(%d) = %v, %v", n, got, err)
		}
		for i := range uint64(300) {
			a, err := p.InclusionProof(i, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(i, n, LeafHash(testLeaf(i)), a, root); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Once the cache holds every tile, a proof reads one part of its leaf's
	// tile, and one of the partial tile at the right edge for the last leaf
	// (70001 is not a multiple of 16) when the ephemeral node covers it.
	p := NewProver(rr, 100000)
	for i := range uint64(n) {
		if _, err := p.InclusionProof(i, n); err != nil {
			t.Fatal(err)
		}
	}
	whole, parts := rr.whole.Load(), rr.parts.Load()
	for i := uint64(0); i < n; i += 97 {
		if _, err := p.InclusionProof(i, n); err != nil {
			t.Fatal(err)
		}
	}
	if w, q := rr.whole.Load()-whole, rr.parts.Load()-parts; w != 0 || q > 2*(n+96)/97 {
		t.Errorf("%d warm proofs read %d whole tiles and %d parts, want 0 and at most 2 each", (n+96)/97, w, q)
	}
	// A reader that returns fewer hashes than the proof needs is an error,
	// not a wrong proof.
	bad := NewProver(&rangeTiles{m: m, trim: 3}, 0)
	var te *TileError
	if _, err := bad.InclusionProof(12, n); !errors.As(err, &te) || !errors.Is(err, ErrTileMissing) {
		t.Errorf("proof through a short reader: %v", err)
	}
}
