package merkle

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// buildTiles returns the tiles of a tree of n test leaves, and its root.
func buildTiles(t testing.TB, n uint64) (memTiles, Hash) {
	m := memTiles{}
	b, err := NewBuilder(NewEdge(), m)
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]Hash, 0, 4096)
	for i := range n {
		hs = append(hs, LeafHash(testLeaf(i)))
		if len(hs) == cap(hs) || i == n-1 {
			if err := b.AppendBatch(hs); err != nil {
				t.Fatal(err)
			}
			hs = hs[:0]
		}
	}
	m.apply(t, b.Flush())
	return m, b.Root()
}

func TestProofErrors(t *testing.T) {
	m, root := buildTiles(t, 1000)
	if _, err := InclusionProof(m, 1000, 1000); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("InclusionProof(1000, 1000) = %v", err)
	}
	if _, err := ConsistencyProof(m, 11, 10); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ConsistencyProof(11, 10) = %v", err)
	}
	// Beyond the stored tree: the partial tile is too narrow, or absent.
	var te *TileError
	if _, err := InclusionProof(m, 5, 1001); !errors.As(err, &te) || !errors.Is(err, ErrTileMissing) {
		t.Errorf("InclusionProof(5, 1001) = %v, want a TileError", err)
	}
	if _, err := RootAt(m, 5000); !errors.As(err, &te) {
		t.Errorf("RootAt(5000) = %v, want a TileError", err)
	}
	// Reader errors are wrapped.
	boom := errors.New("boom")
	failing := TileReaderFunc(func(level, index uint64) ([]byte, error) { return nil, boom })
	if _, err := InclusionProof(failing, 0, 10); !errors.Is(err, boom) || !errors.As(err, &te) {
		t.Errorf("InclusionProof with a failing reader = %v", err)
	}
	// Malformed blobs.
	for _, n := range []int{33, FullTileSize + HashSize} {
		bad := TileReaderFunc(func(level, index uint64) ([]byte, error) { return make([]byte, n), nil })
		if _, err := InclusionProof(bad, 0, 2); !errors.Is(err, ErrMalformedTile) {
			t.Errorf("InclusionProof over a %d-byte tile = %v", n, err)
		}
	}
	// A corrupt tile yields a proof that does not verify.
	p, err := InclusionProof(m, 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	lh := LeafHash(testLeaf(3))
	if err := VerifyInclusion(3, 1000, lh, p, root); err != nil {
		t.Fatal(err)
	}
	bad := m.clone()
	data := slices.Clone(bad[tileKey{0, 0}])
	data[2*HashSize] ^= 1 // leaf 2, the sibling of leaf 3
	bad[tileKey{0, 0}] = data
	p2, _ := InclusionProof(bad, 3, 1000)
	if err := VerifyInclusion(3, 1000, lh, p2, root); !errors.Is(err, ErrProofFailed) {
		t.Errorf("proof from a corrupt tile: %v", err)
	}
	// Verification failures.
	if err := VerifyInclusion(4, 1000, lh, p, root); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyInclusion at the wrong index: %v", err)
	}
	if err := VerifyInclusion(3, 1000, lh, p[:len(p)-1], root); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyInclusion with a short proof: %v", err)
	}
	if err := VerifyInclusion(3, 1000, lh, p, EmptyRoot); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyInclusion against the wrong root: %v", err)
	}
	if err := VerifyConsistency(0, 1000, nil, root, root); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyConsistency from size 0 with a non-empty root: %v", err)
	}
	if err := VerifyConsistency(0, 1000, nil, EmptyRoot, root); err != nil {
		t.Errorf("VerifyConsistency from the empty tree: %v", err)
	}
	r500, _ := RootAt(m, 500)
	cp, _ := ConsistencyProof(m, 500, 1000)
	if err := VerifyConsistency(500, 1000, cp, r500, root); err != nil {
		t.Fatal(err)
	}
	if err := VerifyConsistency(500, 1000, cp, root, root); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyConsistency with the wrong old root: %v", err)
	}
	if err := VerifyConsistency(501, 1000, cp, r500, root); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyConsistency with the wrong old size: %v", err)
	}
	if err := VerifyConsistency(1000, 1000, nil, root, r500); !errors.Is(err, ErrProofFailed) {
		t.Errorf("VerifyConsistency of equal sizes with different roots: %v", err)
	}
}

func TestProverCache(t *testing.T) {
	const n = 70000
	m, root := buildTiles(t, n)
	var mu sync.Mutex
	reads := 0
	counting := TileReaderFunc(func(level, index uint64) ([]byte, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		return m.ReadTile(level, index)
	})
	cached := NewProver(counting, 3)
	plain := NewProver(m, 0)
	rnd := newRand(3)
	for range 300 {
		i := rnd.intn(n)
		a, err1 := cached.InclusionProof(i, n)
		b, err2 := plain.InclusionProof(i, n)
		if err1 != nil || err2 != nil || !slices.Equal(a, b) {
			t.Fatalf("proofs of %d differ: %v, %v", i, err1, err2)
		}
		if err := VerifyInclusion(i, n, LeafHash(testLeaf(i)), a, root); err != nil {
			t.Fatal(err)
		}
	}
	// Once its tiles are cached, the proof of leaf 7 reads only the level-0
	// tiles holding nodes below sub-level 6 (summaryLevel) that it needs
	// (those are recomputed from the tile's hashes, not cached), once each.
	// It needs tiles 0/0 and 1/0 (full) and, for the ephemeral node covering
	// [65536, 70000), the partial tiles 1/1 (17 hashes) and 0/273 (112):
	// the low siblings of leaf 7 lie in 0/0, and the ephemeral node's part
	// in 0/273 (112 = 64+32+16 hashes) lies at sub-level 6, cached, and 5
	// and 4, read: 2 reads a proof.
	four := NewProver(counting, 4)
	four.InclusionProof(7, n)
	before := reads
	for range 10 {
		p, err := four.InclusionProof(7, n)
		if err != nil || VerifyInclusion(7, n, LeafHash(testLeaf(7)), p, root) != nil {
			t.Fatalf("cached proof of 7: %v", err)
		}
	}
	if got := reads - before; got != 20 {
		t.Errorf("10 cached proofs read %d tiles, want 20 (2 each)", got)
	}
	if got := len(four.cache.items); got != 4 {
		t.Errorf("cache holds %d tiles, want 4", got)
	}
	if got := len(cached.cache.items); got != 3 {
		t.Errorf("cache holds %d tiles, want at most 3", got)
	}
	// Concurrent use.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := newRand(uint64(g))
			for range 100 {
				i := r.intn(n)
				p, err := cached.InclusionProof(i, n)
				if err != nil || VerifyInclusion(i, n, LeafHash(testLeaf(i)), p, root) != nil {
					t.Errorf("concurrent proof of %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestExpandedTile(t *testing.T) {
	m, _ := buildTiles(t, TileWidth)
	for _, w := range []int{1, 2, 3, 100, 255, 256} {
		data := m[tileKey{0, 0}][:w*HashSize]
		x := expandTile(data, 0)
		for s := uint64(0); s <= TileHeight; s++ {
			for i := uint64(0); i < uint64(w)>>s; i++ {
				want := subtreeHash(data[i<<s*HashSize : (i+1)<<s*HashSize])
				if got := x.node(s, i+7*(TileWidth>>s)); got != want {
					t.Fatalf("width %d: node(%d, %d) wrong", w, s, i)
				}
			}
		}
	}
}

// TestProverCacheGrowingTree checks that a cached partial tile is used only
// within its width: proofs stay right while the tree grows under the Prover.
func TestProverCacheGrowingTree(t *testing.T) {
	m := memTiles{}
	b, _ := NewBuilder(NewEdge(), m)
	p := NewProver(m, 100)
	plain := NewProver(m, 0)
	rnd := newRand(5)
	for b.Size() < 5000 {
		for range 1 + rnd.intn(40) {
			b.Append(LeafHash(testLeaf(b.Size())))
		}
		m.apply(t, b.Flush())
		n, root := b.Size(), b.Root()
		for range 5 {
			i := rnd.intn(n)
			got, err := p.InclusionProof(i, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(i, n, LeafHash(testLeaf(i)), got, root); err != nil {
				t.Fatalf("size %d, leaf %d: %v", n, i, err)
			}
			old := 1 + rnd.intn(n)
			oldRoot, err := p.RootAt(old)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := plain.RootAt(old); oldRoot != want {
				t.Fatalf("RootAt(%d) differs between cached and plain Provers", old)
			}
			cp, err := p.ConsistencyProof(old, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyConsistency(old, n, cp, oldRoot, root); err != nil {
				t.Fatalf("consistency %d..%d: %v", old, n, err)
			}
		}
	}
}

func TestExpandedTileSummary(t *testing.T) {
	m, _ := buildTiles(t, TileWidth)
	for _, w := range []int{16, 17, 31, 32, 33, 100, 255, 256} {
		data := m[tileKey{0, 0}][:w*HashSize]
		x := expandTile(data, summaryLevel)
		if want := 2*TileWidth>>summaryLevel - 1; len(x.h) != want {
			t.Fatalf("a summary holds %d hashes, want %d", len(x.h), want)
		}
		for s := uint64(summaryLevel); s <= TileHeight; s++ {
			for i := uint64(0); i < uint64(w)>>s; i++ {
				want := subtreeHash(data[i<<s*HashSize : (i+1)<<s*HashSize])
				if got := x.node(s, i); got != want {
					t.Fatalf("width %d: node(%d, %d) wrong", w, s, i)
				}
			}
		}
	}
}

// TestProverOverBatch: a Prover made by Over for a batch proves every leaf
// of the batch as a Prover with no cache does, and reads each level-0 tile
// once for the whole batch however many of its leaves it proves.
func TestProverOverBatch(t *testing.T) {
	m := memTiles{}
	b, _ := NewBuilder(NewEdge(), m)
	shared := NewProver(m, 100)
	plain := NewProver(m, 0)
	rnd := newRand(11)
	for b.Size() < 6000 {
		from := b.Size()
		for range 1 + rnd.intn(700) {
			b.Append(LeafHash(testLeaf(b.Size())))
		}
		m.apply(t, b.Flush())
		n, root := b.Size(), b.Root()
		reads := map[tileKey]int{}
		var mu sync.Mutex
		over := shared.Over(TileReaderFunc(func(level, index uint64) ([]byte, error) {
			mu.Lock()
			reads[tileKey{level, index}]++
			mu.Unlock()
			return m.ReadTile(level, index)
		}))
		var wg sync.WaitGroup
		for g := range 4 { // the batch's answers prove concurrently
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + uint64(g); i < n; i += 4 {
					got, err := over.InclusionProof(i, n)
					if err != nil {
						t.Error(err)
						return
					}
					want, _ := plain.InclusionProof(i, n)
					if !slices.Equal(got, want) {
						t.Errorf("size %d, leaf %d: the batch's proof differs from a plain one", n, i)
						return
					}
					if err := VerifyInclusion(i, n, LeafHash(testLeaf(i)), got, root); err != nil {
						t.Errorf("size %d, leaf %d: %v", n, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		for k, c := range reads {
			// Concurrent first proofs of a tile may each read it once.
			if k.level == 0 && c > 4 {
				t.Fatalf("size %d: level-0 tile %d read %d times for one batch", n, k.index, c)
			}
		}
	}
}
