package merkle

import (
	"bytes"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// buildWithSummaries appends n test leaves in batches of pseudo-random
// sizes, storing every Flush and Summaries in m, and checks after each batch
// that every summary tile stored is the tree-level-6 nodes of its level-0
// tile as that tile now stands.
func buildWithSummaries(t testing.TB, m memTiles, b *Builder, n uint64, rnd *newRand) {
	t.Helper()
	for b.Size() < n {
		k := min(1+rnd.intn(300), n-b.Size())
		hs := make([]Hash, k)
		for i := range hs {
			hs[i] = LeafHash(testLeaf(b.Size() + uint64(i)))
		}
		if err := b.AppendBatch(hs); err != nil {
			t.Fatal(err)
		}
		m.apply(t, b.Flush())
		for _, s := range b.Summaries() {
			if s.Level != SummaryTileLevel {
				t.Fatalf("Summaries returned a tile of level %d", s.Level)
			}
			k := tileKey{s.Level, s.Index}
			if old, ok := m[k]; ok && (len(s.Data) <= len(old) || !bytes.HasPrefix(s.Data, old)) {
				t.Fatalf("summary %d (%d hashes) does not extend the stored %d", s.Index, len(s.Data)/HashSize, len(old)/HashSize)
			}
			m[k] = s.Data
		}
		checkSummaries(t, m, b.Size(), b.Size()-k)
	}
}

// checkSummaries checks every stored summary of the tiles holding leaves
// from on against its level-0 tile in a tree of the given size: hash j of
// summary i is the root of that tile's hashes 64j..64j+63, and the summary
// of a tile written since summaries exist holds every complete one.
func checkSummaries(t testing.TB, m memTiles, size, from uint64) {
	t.Helper()
	for k, sum := range m {
		if k.level != SummaryTileLevel || k.index < from/TileWidth {
			continue
		}
		tile := m[tileKey{0, k.index}]
		if len(sum) == 0 || len(sum) > SummaryTileSize || len(sum)%HashSize != 0 {
			t.Fatalf("size %d: summary %d has %d bytes", size, k.index, len(sum))
		}
		for j := 0; j < len(sum)/HashSize; j++ {
			want := subtreeHash(tile[j<<summaryLevel*HashSize : (j+1)<<summaryLevel*HashSize])
			if Hash(sum[j*HashSize:]) != want {
				t.Fatalf("size %d: summary %d hash %d is wrong", size, k.index, j)
			}
		}
		if complete := min(size-k.index*TileWidth, TileWidth) >> summaryLevel; uint64(len(sum)/HashSize) != complete {
			t.Fatalf("size %d: summary %d holds %d hashes, the tile has %d complete nodes", size, k.index, len(sum)/HashSize, complete)
		}
	}
}

// TestBuilderSummaries: a Builder's summary tiles hold exactly the complete
// tree-level-6 nodes of each level-0 tile, batch after batch, also after a
// restart from the stored edge and tiles, and from a store written before
// summaries (which then has them for the tiles written since).
func TestBuilderSummaries(t *testing.T) {
	rnd := newRand(11)
	m := memTiles{}
	b, err := NewBuilderSummaries(NewEdge(), m)
	if err != nil {
		t.Fatal(err)
	}
	buildWithSummaries(t, m, b, 1500, &rnd)
	for i := uint64(0); i < 1500/TileWidth; i++ {
		if len(m[tileKey{SummaryTileLevel, i}]) != SummaryTileSize {
			t.Fatalf("summary %d is missing or partial", i)
		}
	}
	// A restart mid-tile: the new Builder continues the summary.
	b2, err := NewBuilderSummaries(b.Edge(), m)
	if err != nil {
		t.Fatal(err)
	}
	buildWithSummaries(t, m, b2, 3000, &rnd)

	// A store without summaries (a log written before them): after a
	// restart mid-tile, the summary of the tile being filled is written in
	// full once a node of it completes, and every later one too.
	old := memTiles{}
	for k, v := range m {
		if k.level != SummaryTileLevel {
			old[k] = v
		}
	}
	const size = 3000
	b3, err := NewBuilderSummaries(b2.Edge(), old)
	if err != nil {
		t.Fatal(err)
	}
	buildWithSummaries(t, old, b3, 5000, &rnd)
	for i := uint64(size / TileWidth); i < 5000/TileWidth; i++ {
		if len(old[tileKey{SummaryTileLevel, i}]) != SummaryTileSize {
			t.Fatalf("after an upgrade, summary %d is missing or partial", i)
		}
	}
	if _, ok := old[tileKey{SummaryTileLevel, size/TileWidth - 1}]; ok {
		t.Fatalf("a summary of a tile completed before the upgrade appeared")
	}
	// Flush alone still returns exactly the tlog-tiles tiles.
	b4, _ := NewBuilderSummaries(NewEdge(), memTiles{})
	b4.AppendBatch(leafHashes(testLeaves(600)))
	var refs []TileRef
	for _, tl := range b4.Flush() {
		refs = append(refs, tl.Ref())
	}
	if want := NewTiles(0, 600); !slices.Equal(refs, want) {
		t.Errorf("Flush after 600 leaves = %v, want %v", refs, want)
	}
	if s := b4.Summaries(); len(s) != 3 || len(s[2].Data) != 1*HashSize {
		t.Errorf("Summaries after 600 leaves: %d tiles", len(s))
	}
	if s := b4.Summaries(); len(s) != 0 {
		t.Errorf("a second Summaries returned %d tiles", len(s))
	}
}

func testLeaves(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = testLeaf(uint64(i))
	}
	return out
}

// TestProverSummaries: a caching Prover over a store with summaries proves
// every leaf as tlog and the uncached Prover do, at many sizes, with a cache
// too small to hold the tree (so it misses and evicts); and it never reads
// a whole level-0 tile to fill its cache, where over the same store without
// summaries it must.
func TestProverSummaries(t *testing.T) {
	rnd := newRand(12)
	m := memTiles{}
	b, _ := NewBuilderSummaries(NewEdge(), m)
	ref := new(refLog)
	const n = 70001 // partial tiles at levels 0, 1 and 2
	buildWithSummaries(t, m, b, n, &rnd)
	checkSummaries(t, m, n, 0)
	for i := range uint64(n) {
		ref.add(testLeaf(i))
	}
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
	provers := []*Prover{NewProver(with, 5), NewProver(with, 1000), NewProver(none, 5), NewProver(batched, 1000), NewProver(batched, 70)}
	for range 400 {
		size := 1 + rnd.intn(n)
		if rnd.intn(5) == 0 {
			size = n - rnd.intn(600) // the right edge: partial summaries
		}
		i := rnd.intn(size)
		want, err := plain.InclusionProof(i, size)
		if err != nil {
			t.Fatal(err)
		}
		thr := tlog.TileHashReader(tlog.Tree{N: int64(size), Hash: tlog.Hash(ref.root(t, size))}, tlogTiles{m})
		tp, err := tlog.ProveRecord(int64(size), int64(i), thr)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(toTlog(want), tp) {
			t.Fatalf("uncached proof of %d at %d differs from tlog's", i, size)
		}
		for j, p := range provers {
			got, err := p.InclusionProof(i, size)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("prover %d: proof of %d at %d differs: %v", j, i, size, err)
			}
		}
		s1 := 1 + rnd.intn(size)
		wantC, err := plain.ConsistencyProof(s1, size)
		if err != nil {
			t.Fatal(err)
		}
		for j, p := range provers {
			got, err := p.ConsistencyProof(s1, size)
			if err != nil || !slices.Equal(got, wantC) {
				t.Fatalf("prover %d: consistency %d..%d differs: %v", j, s1, size, err)
			}
		}
	}
	// Whole reads of level-0 tiles: with summaries only of partial tiles
	// beyond their summary (the right edge of a tree); without, one for
	// nearly every miss.
	w, o := with.whole0.Load(), none.whole0.Load()
	t.Logf("whole level-0 tile reads: %d with summaries, %d without", w, o)
	if w >= o/10 {
		t.Errorf("whole level-0 tile reads: %d with summaries, %d without; want under a tenth", w, o)
	}
	if got := len(provers[0].cache.items); got > 5 {
		t.Errorf("cache of 5 holds %d tiles", got)
	}
	// A batch reader warms the cache a group of summaries at a time: the
	// 274 level-0 tiles in 5 reads (with room in the cache), and never
	// past the cache's bound.
	if got := batched.batches.Load(); got == 0 || got > 2*(n/TileWidth/SummaryGroup+1) {
		t.Errorf("%d batched summary reads", got)
	}
	if got := batched.whole0.Load(); got != 0 {
		t.Errorf("%d whole level-0 tile reads through the batch reader", got)
	}
	if got := len(provers[4].cache.items); got > 70 {
		t.Errorf("cache of 70 holds %d tiles", got)
	}
	// Damaged summaries (wrong length) are not used.
	bad := maps.Clone(m)
	bad[tileKey{SummaryTileLevel, 3}] = make([]byte, 5*HashSize)
	bad[tileKey{SummaryTileLevel, 4}] = make([]byte, 7)
	p := NewProver(bad, 10)
	for _, i := range []uint64{3*TileWidth + 5, 4*TileWidth + 200} {
		got, err := p.InclusionProof(i, n)
		want, _ := plain.InclusionProof(i, n)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("proof of %d over a malformed summary: %v", i, err)
		}
	}
}

// batchTiles is rangeTiles with ReadTiles, counting its calls.
type batchTiles struct {
	rangeTiles
	batches atomic.Int64
}

func (b *batchTiles) ReadTiles(level, from uint64, n int) ([][]byte, error) {
	b.batches.Add(1)
	out := make([][]byte, n)
	for i := range out {
		out[i] = b.m[tileKey{level, from + uint64(i)}]
	}
	return out, nil
}

// TestBuilderWithoutSummaries: a Builder made by NewBuilder keeps no
// summaries (its users that store none hold no more memory than before).
func TestBuilderWithoutSummaries(t *testing.T) {
	b, _ := NewBuilder(NewEdge(), memTiles{})
	if err := b.AppendBatch(leafHashes(testLeaves(3000))); err != nil {
		t.Fatal(err)
	}
	b.Flush()
	if s := b.Summaries(); len(s) != 0 || len(b.sumFull) != 0 || len(b.sum.data) != 0 {
		t.Fatalf("a Builder without summaries made %d", len(s))
	}
}
