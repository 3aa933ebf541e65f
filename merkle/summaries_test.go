package merkle

import (
	"maps"
	"slices"
	"sync"
	"testing"
)

// TestSummaryProver: a Prover made by NewSummaryProver proves every leaf
// as the uncached Prover does, at many sizes (partial tiles and partial
// summaries on the right edge), over a store with summary tiles, one
// without (a log written before them), and one that reads them in
// groups; it keeps level-0 tiles under its bound in its flat summaries,
// not in the tile cache (whose map grows dearer to look up the more tiles
// it holds), and those beyond the bound in the tile cache; once warm it
// reads neither a summary nor a whole level-0 tile again; and it ignores
// a malformed summary.
func TestSummaryProver(t *testing.T) {
	rnd := newRand(21)
	m := memTiles{}
	b, _ := NewBuilderSummaries(NewEdge(), m)
	const n = 70001 // 274 level-0 tiles, partial tiles at levels 0, 1 and 2
	buildWithSummaries(t, m, b, n, &rnd)
	without := memTiles{}
	for k, v := range m {
		if k.level != SummaryTileLevel {
			without[k] = v
		}
	}
	with := &rangeTiles{m: m}
	none := &rangeTiles{m: without}
	batched := &batchTiles{rangeTiles: rangeTiles{m: m}}
	plain := NewProver(m, 0)
	const bound = 100 // summaries of tiles 0..99; the other 174 in the tile cache
	provers := []*Prover{NewSummaryProver(with, 50, 1000), NewSummaryProver(none, 50, 1000),
		NewSummaryProver(batched, 50, 1000), NewSummaryProver(with, 500, bound), NewSummaryProver(with, 0, 1000)}
	check := func(p *Prover, j int, i, size uint64) {
		t.Helper()
		want, err := plain.InclusionProof(i, size)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.InclusionProof(i, size)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("prover %d: proof of %d at %d differs: %v", j, i, size, err)
		}
		if err := VerifyInclusion(i, size, LeafHash(testLeaf(i)), got, plain.mustRoot(t, size)); err != nil {
			t.Fatal(err)
		}
	}
	for range 600 {
		size := 1 + rnd.intn(n)
		if rnd.intn(4) == 0 {
			size = n - rnd.intn(600) // the right edge: partial summaries
		}
		i := rnd.intn(size)
		for j, p := range provers {
			check(p, j, i, size)
		}
		s1 := 1 + rnd.intn(size)
		wantC, _ := plain.ConsistencyProof(s1, size)
		for j, p := range provers {
			if got, err := p.ConsistencyProof(s1, size); err != nil || !slices.Equal(got, wantC) {
				t.Fatalf("prover %d: consistency %d..%d differs: %v", j, s1, size, err)
			}
		}
	}
	// Every level-0 tile's summary is in the flat arrays (up to the bound),
	// none in the tile cache.
	for j, p := range provers {
		for k := range p.cache.itemsOrNil() {
			if k.level == 0 && (p.sums == nil || k.index < p.sums.max) {
				t.Errorf("prover %d: level-0 tile %d is in the tile cache, under the summaries' bound", j, k.index)
			}
		}
	}
	if got := provers[3].sums.tiles(); got > bound {
		t.Errorf("summaries of %d tiles, bound %d", got, bound)
	}
	beyond := 0
	for k := range provers[3].cache.itemsOrNil() {
		if k.level == 0 {
			beyond++
		}
	}
	if beyond == 0 {
		t.Errorf("no level-0 tile beyond the bound was cached in the tile cache")
	}
	// Warm: proofs of every leaf of a full tree read no summary and no
	// whole level-0 tile (only the 64 hashes around the leaf).
	for j, r := range []*rangeTiles{with, none, &batched.rangeTiles} {
		p := provers[j]
		for i := uint64(0); i < n; i += 97 {
			check(p, j, i, n)
		}
		w0, parts, bat := r.whole0.Load(), r.parts.Load(), batched.batches.Load()
		for i := uint64(0); i < n; i += 97 {
			check(p, j, i, n)
		}
		if got := r.whole0.Load() - w0; got != 0 {
			t.Errorf("prover %d: %d whole level-0 tile reads once warm", j, got)
		}
		if got := batched.batches.Load() - bat; got != 0 {
			t.Errorf("prover %d: %d batched summary reads once warm", j, got)
		}
		if r.parts.Load() == parts {
			t.Errorf("prover %d: no range reads (the low hashes must be read)", j)
		}
	}
	// Concurrent use (run with -race).
	var wg sync.WaitGroup
	fresh := NewSummaryProver(batched, 10, 1000)
	for g := range 4 {
		wg.Go(func() {
			r := newRand(uint64(g) + 40)
			for range 200 {
				size := n - r.intn(300)
				i := r.intn(size)
				p, err := fresh.InclusionProof(i, size)
				if err != nil || VerifyInclusion(i, size, LeafHash(testLeaf(i)), p, plain.mustRoot(t, size)) != nil {
					t.Errorf("concurrent proof of %d at %d: %v", i, size, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Damaged summaries (wrong length) are not used.
	bad := maps.Clone(m)
	bad[tileKey{SummaryTileLevel, 3}] = make([]byte, 5*HashSize)
	bad[tileKey{SummaryTileLevel, 4}] = make([]byte, 7)
	p := NewSummaryProver(bad, 10, 1000)
	for _, i := range []uint64{3*TileWidth + 5, 4*TileWidth + 200} {
		check(p, 9, i, n)
	}
}

// itemsOrNil is the tile cache's map, nil for no cache.
func (c *tileCache) itemsOrNil() map[tileKey]*cacheEntry {
	if c == nil {
		return nil
	}
	return c.items
}

// mustRoot is the root of the tree of the given size.
func (p *Prover) mustRoot(t testing.TB, size uint64) Hash {
	t.Helper()
	r, err := p.RootAt(size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
