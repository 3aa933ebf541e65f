package merkle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestHashes(t *testing.T) {
	// RFC 6962 empty root: SHA-256 of the empty string.
	if got, want := hex.EncodeToString(EmptyRoot[:]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("EmptyRoot = %s, want %s", got, want)
	}
	for _, leaf := range [][]byte{nil, {}, []byte("a"), bytes.Repeat([]byte("x"), 70000)} {
		if got, want := LeafHash(leaf), Hash(tlog.RecordHash(leaf)); got != want {
			t.Errorf("LeafHash(%d bytes) = %x, tlog says %x", len(leaf), got, want)
		}
		if got, want := LeafHash(leaf), Hash(sha256.Sum256(append([]byte{0}, leaf...))); got != want {
			t.Errorf("LeafHash(%d bytes) = %x, SHA-256(0x00||leaf) = %x", len(leaf), got, want)
		}
	}
	l, r := LeafHash([]byte("l")), LeafHash([]byte("r"))
	if got, want := NodeHash(l, r), Hash(tlog.NodeHash(tlog.Hash(l), tlog.Hash(r))); got != want {
		t.Errorf("NodeHash = %x, tlog says %x", got, want)
	}
	if NodeHash(l, r) == NodeHash(r, l) {
		t.Error("NodeHash is symmetric")
	}
	h, err := ParseHash(l.String())
	if err != nil || h != l {
		t.Errorf("ParseHash(String()) = %x, %v", h, err)
	}
	for _, bad := range []string{"", "AAAA", l.String()[:43] + "B", l.String() + "="} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) succeeded", bad)
		}
	}
}

func TestHashesDoNotAllocate(t *testing.T) {
	leaf := make([]byte, 2000)
	var h Hash
	if n := testing.AllocsPerRun(100, func() { h = LeafHash(leaf) }); n != 0 {
		t.Errorf("LeafHash allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { h = NodeHash(h, h) }); n != 0 {
		t.Errorf("NodeHash allocates %v times", n)
	}
}

// TestSmallTrees builds trees of every size 1..300 one leaf at a time, and
// checks every root, every tile, every inclusion proof and every consistency
// proof, with transparency-dev/merkle and independently with sumdb/tlog.
func TestSmallTrees(t *testing.T) {
	t.Parallel()
	const maxSize = 300
	ref := new(refLog)
	m := memTiles{}
	b, err := NewBuilder(NewEdge(), m)
	if err != nil {
		t.Fatal(err)
	}
	roots := []Hash{EmptyRoot}
	for size := uint64(1); size <= maxSize; size++ {
		leaf := testLeaf(size - 1)
		ref.add(leaf)
		if err := b.Append(LeafHash(leaf)); err != nil {
			t.Fatal(err)
		}
		m.apply(t, b.Flush())
		root := ref.root(t, size)
		if got := b.Root(); got != root {
			t.Fatalf("size %d: root %x, tlog.TreeHash %x", size, got, root)
		}
		roots = append(roots, root)
		checkTilesAgainstTlog(t, m, ref, size)
	}

	// All proofs are read from the final store, whose partial tiles are
	// wider than the smaller trees need.
	tr := tlogTiles{m}
	// Alternate between an uncached and a caching Prover.
	provers := []*Prover{NewProver(m, 0), NewProver(m, 4)}
	for n := uint64(1); n <= maxSize; n++ {
		if got, err := RootAt(m, n); err != nil || got != roots[n] {
			t.Fatalf("RootAt(%d) = %x, %v; want %x", n, got, err, roots[n])
		}
		// tlog authenticates our tiles against the independent root.
		thr := tlog.TileHashReader(tlog.Tree{N: int64(n), Hash: tlog.Hash(roots[n])}, tr)
		if h, err := tlog.TreeHash(int64(n), thr); err != nil || Hash(h) != roots[n] {
			t.Fatalf("tlog.TreeHash(%d) over our tiles = %x, %v", n, h, err)
		}
		for i := uint64(0); i < n; i++ {
			p, err := provers[(i+n)%2].InclusionProof(i, n)
			if err != nil {
				t.Fatalf("InclusionProof(%d, %d): %v", i, n, err)
			}
			lh := LeafHash(ref.leaves[i])
			if err := VerifyInclusion(i, n, lh, p, roots[n]); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", i, n, err)
			}
			if err := tlog.CheckRecord(toTlog(p), int64(n), tlog.Hash(roots[n]), int64(i), tlog.Hash(lh)); err != nil {
				t.Fatalf("tlog.CheckRecord(%d, %d): %v", i, n, err)
			}
			// tlog's proof from its own stored hashes, and (for a
			// sample, as it costs a tree hash per call) from our tiles.
			want, err := tlog.ProveRecord(int64(n), int64(i), ref.reader())
			if err != nil {
				t.Fatalf("tlog.ProveRecord(%d, %d): %v", n, i, err)
			}
			if !slices.Equal(toTlog(p), want) {
				t.Fatalf("InclusionProof(%d, %d) differs from tlog.ProveRecord", i, n)
			}
			if i%16 == 0 || i == n-1 {
				want, err := tlog.ProveRecord(int64(n), int64(i), thr)
				if err != nil || !slices.Equal(toTlog(p), want) {
					t.Fatalf("InclusionProof(%d, %d) differs from tlog.ProveRecord over our tiles (%v)", i, n, err)
				}
			}
		}
		for m1 := uint64(0); m1 <= n; m1++ {
			p, err := provers[(m1+n)%2].ConsistencyProof(m1, n)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", m1, n, err)
			}
			if err := VerifyConsistency(m1, n, p, roots[m1], roots[n]); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", m1, n, err)
			}
			if m1 == 0 {
				if len(p) != 0 {
					t.Fatalf("ConsistencyProof(0, %d) has %d hashes", n, len(p))
				}
				continue
			}
			if err := tlog.CheckTree(toTlog(p), int64(n), tlog.Hash(roots[n]), int64(m1), tlog.Hash(roots[m1])); err != nil {
				t.Fatalf("tlog.CheckTree(%d, %d): %v", m1, n, err)
			}
			want, err := tlog.ProveTree(int64(n), int64(m1), ref.reader())
			if err != nil {
				t.Fatalf("tlog.ProveTree(%d, %d): %v", n, m1, err)
			}
			if !slices.Equal(toTlog(p), want) {
				t.Fatalf("ConsistencyProof(%d, %d) differs from tlog.ProveTree", m1, n)
			}
		}
	}
}

// TestLargeTree appends up to 100,000 leaves in random batches and checks
// tiles, roots, and random proofs against sumdb/tlog.
func TestLargeTree(t *testing.T) {
	t.Parallel()
	total, samples := uint64(100_000), 1500
	if testing.Short() {
		total, samples = 20_000, 300
	}
	rnd := newRand(1)
	ref := new(refLog)
	m := memTiles{}
	b, err := NewBuilder(NewEdge(), m)
	if err != nil {
		t.Fatal(err)
	}
	roots := map[uint64]Hash{0: EmptyRoot}
	var sizes []uint64
	for b.Size() < total {
		n := min(1+rnd.intn(3000), total-b.Size())
		leaves := make([][]byte, n)
		for i := range leaves {
			leaves[i] = testLeaf(b.Size() + uint64(i))
			ref.add(leaves[i])
		}
		if err := b.AppendBatch(leafHashes(leaves)); err != nil {
			t.Fatal(err)
		}
		m.apply(t, b.Flush())
		roots[b.Size()] = b.Root()
		sizes = append(sizes, b.Size())
	}
	checkTilesAgainstTlog(t, m, ref, total)
	for _, s := range sizes {
		if want := ref.root(t, s); roots[s] != want {
			t.Fatalf("root at size %d = %x, tlog.TreeHash %x", s, roots[s], want)
		}
	}
	tr := tlogTiles{m}
	p := NewProver(m, 64)
	for range samples {
		n := sizes[rnd.intn(uint64(len(sizes)))]
		i := rnd.intn(n)
		proof, err := p.InclusionProof(i, n)
		if err != nil {
			t.Fatal(err)
		}
		lh := LeafHash(ref.leaves[i])
		if err := VerifyInclusion(i, n, lh, proof, roots[n]); err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(toTlog(proof), int64(n), tlog.Hash(roots[n]), int64(i), tlog.Hash(lh)); err != nil {
			t.Fatalf("tlog.CheckRecord(%d, %d): %v", i, n, err)
		}
		n1 := sizes[rnd.intn(uint64(len(sizes)))]
		n1, n2 := min(n, n1), max(n, n1)
		cp, err := p.ConsistencyProof(n1, n2)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyConsistency(n1, n2, cp, roots[n1], roots[n2]); err != nil {
			t.Fatal(err)
		}
		if n1 < n2 {
			if err := tlog.CheckTree(toTlog(cp), int64(n2), tlog.Hash(roots[n2]), int64(n1), tlog.Hash(roots[n1])); err != nil {
				t.Fatalf("tlog.CheckTree(%d, %d): %v", n1, n2, err)
			}
		}
		// Proofs at arbitrary sizes, not only at batch boundaries.
		n3 := 1 + rnd.intn(total)
		i3 := rnd.intn(n3)
		thr := tlog.TileHashReader(tlog.Tree{N: int64(n3), Hash: tlog.Hash(ref.root(t, n3))}, tr)
		want, err := tlog.ProveRecord(int64(n3), int64(i3), thr)
		if err != nil {
			t.Fatalf("tlog.ProveRecord(%d, %d) over our tiles: %v", n3, i3, err)
		}
		got, err := p.InclusionProof(i3, n3)
		if err != nil || !slices.Equal(toTlog(got), want) {
			t.Fatalf("InclusionProof(%d, %d) = %v differs from tlog.ProveRecord", i3, n3, err)
		}
		if r, err := p.RootAt(n3); err != nil || r != ref.root(t, n3) {
			t.Fatalf("RootAt(%d) = %x, %v", n3, r, err)
		}
	}
}

// TestBatchesAndRestore appends in batches of varying size, persisting and
// restoring the edge (and rebuilding the Builder from stored tiles) between
// batches, and checks that tiles and roots equal those of appending leaf by
// leaf.
func TestBatchesAndRestore(t *testing.T) {
	batches := []int{1, 7, 256, 1000, 3, 255, 257, 1, 511, 2, 65536 - 2290, 1, 300, 4096}
	var total int
	for _, n := range batches {
		total += n
	}
	leaves := make([][]byte, total)
	for i := range leaves {
		leaves[i] = testLeaf(uint64(i))
	}
	hashes := leafHashes(leaves)

	// Leaf by leaf, flushing after each.
	one := memTiles{}
	b, _ := NewBuilder(NewEdge(), one)
	roots := []Hash{EmptyRoot}
	for _, h := range hashes {
		if err := b.Append(h); err != nil {
			t.Fatal(err)
		}
		one.apply(t, b.Flush())
		roots = append(roots, b.Root())
	}

	// In batches, through the serialised edge.
	batched := memTiles{}
	persisted, _ := NewEdge().MarshalBinary()
	size := 0
	for _, n := range batches {
		e, err := ParseEdge(persisted)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBuilder(e, batched)
		if err != nil {
			t.Fatalf("NewBuilder at size %d: %v", size, err)
		}
		if err := b.AppendBatch(hashes[size : size+n]); err != nil {
			t.Fatal(err)
		}
		size += n
		batched.apply(t, b.Flush())
		if got := b.Root(); got != roots[size] {
			t.Fatalf("size %d: batched root %x, one-by-one %x", size, got, roots[size])
		}
		if got, err := RootAt(batched, uint64(size)); err != nil || got != roots[size] {
			t.Fatalf("RootAt(%d) = %x, %v", size, got, err)
		}
		e2, err := EdgeAt(batched, uint64(size))
		if err != nil || !slices.Equal(e2.Hashes(), b.Edge().Hashes()) {
			t.Fatalf("EdgeAt(%d) differs from the Builder's edge: %v", size, err)
		}
		persisted, _ = b.Edge().MarshalBinary()
	}
	if len(one) != len(batched) {
		t.Fatalf("one-by-one stored %d tiles, batched %d", len(one), len(batched))
	}
	for k, v := range one {
		if !bytes.Equal(batched[k], v) {
			t.Fatalf("tile %d/%d differs", k.level, k.index)
		}
	}

	// A second batch on the same Builder, without flushing in between,
	// reports a tile completed and then extended once, full.
	b2, _ := NewBuilder(NewEdge(), memTiles{})
	b2.AppendBatch(hashes[:300])
	b2.AppendBatch(hashes[300:600])
	tiles := b2.Flush()
	var refs []TileRef
	for _, tl := range tiles {
		refs = append(refs, tl.Ref())
	}
	if want := NewTiles(0, 600); !slices.Equal(refs, want) {
		t.Errorf("Flush after 600 leaves = %v, want %v", refs, want)
	}
	if tiles := b2.Flush(); len(tiles) != 0 {
		t.Errorf("second Flush returned %d tiles", len(tiles))
	}
}

// TestEdgeStoredNodes checks that Append reports exactly the nodes at tree
// levels 0, 8, 16 that each leaf completes, with tlog's hashes for them.
func TestEdgeStoredNodes(t *testing.T) {
	ref := new(refLog)
	e := NewEdge()
	const n = 3 * 65536 / 2
	for i := uint64(0); i < n; i++ {
		leaf := testLeaf(i)
		before := len(ref.hashes)
		ref.add(leaf)
		var got []Node
		if err := e.Append(LeafHash(leaf), func(n Node) { got = append(got, n) }); err != nil {
			t.Fatal(err)
		}
		// tlog stores, for record i, its hash and the roots of the
		// subtrees it completes at levels 1, 2, ...
		var want []Node
		for l, h := range ref.hashes[before:] {
			if l%TileHeight == 0 {
				want = append(want, Node{Level: uint64(l), Index: i >> l, Hash: Hash(h)})
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("leaf %d: stored nodes %v, want %v", i, got, want)
		}
	}
	if e.Size() != n {
		t.Fatalf("Size = %d", e.Size())
	}
}

func TestEdgeSerialisation(t *testing.T) {
	e := NewEdge()
	var zero Edge
	if zero.Size() != 0 || zero.Root() != EmptyRoot || e.Root() != EmptyRoot {
		t.Fatal("empty edge is not the empty tree")
	}
	for i := range uint64(1000) {
		e.Append(LeafHash(testLeaf(i)), nil)
	}
	data, _ := e.MarshalBinary()
	if len(data) != 8+HashSize*6 { // 1000 = 0b1111101000
		t.Fatalf("serialised edge is %d bytes", len(data))
	}
	var e2 Edge
	if err := e2.UnmarshalBinary(data); err != nil || e2.Root() != e.Root() || e2.Size() != 1000 {
		t.Fatalf("round trip: %v", err)
	}
	c := e.Clone()
	c.Append(Hash{}, nil)
	if e.Size() != 1000 || c.Size() != 1001 {
		t.Fatal("Clone is not independent")
	}
	for _, bad := range [][]byte{nil, data[:7], data[:len(data)-1], append(slices.Clone(data), 0), data[:8]} {
		if _, err := ParseEdge(bad); !errors.Is(err, ErrMalformedEdge) {
			t.Errorf("ParseEdge(%d bytes) = %v, want ErrMalformedEdge", len(bad), err)
		}
	}
	if _, err := RestoreEdge(3, []Hash{{}}); !errors.Is(err, ErrMalformedEdge) {
		t.Errorf("RestoreEdge with too few hashes: %v", err)
	}
	full, err := RestoreEdge(1<<64-1, make([]Hash, 64))
	if err != nil {
		t.Fatal(err)
	}
	if err := full.Append(Hash{}, nil); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Append to a tree of size 2^64-1: %v", err)
	}
}

func TestBuilderRejectsInconsistentTiles(t *testing.T) {
	m := memTiles{}
	b, _ := NewBuilder(NewEdge(), m)
	for i := range uint64(70000) {
		b.Append(LeafHash(testLeaf(i)))
	}
	m.apply(t, b.Flush())
	e := b.Edge()
	if _, err := NewBuilder(e, m); err != nil {
		t.Fatalf("NewBuilder on consistent tiles: %v", err)
	}
	// 70000 = 273*256 + 112: partial tiles 0/273 (112), 1/1 (17), 2/0 (1).
	for _, k := range []tileKey{{0, 273}, {1, 1}, {2, 0}} {
		bad := m.clone()
		data := slices.Clone(bad[k])
		data[len(data)-1] ^= 1
		bad[k] = data
		if _, err := NewBuilder(e, bad); !errors.Is(err, ErrInconsistentTiles) {
			t.Errorf("corrupt tile %v: NewBuilder = %v, want ErrInconsistentTiles", k, err)
		}
		short := m.clone()
		short[k] = short[k][:len(short[k])-HashSize]
		var te *TileError
		if _, err := NewBuilder(e, short); !errors.As(err, &te) || !errors.Is(err, ErrTileMissing) || te.Level != k.level || te.Index != k.index {
			t.Errorf("short tile %v: NewBuilder = %v, want a TileError for it", k, err)
		}
		missing := m.clone()
		delete(missing, k)
		if _, err := NewBuilder(e, missing); !errors.As(err, &te) {
			t.Errorf("missing tile %v: NewBuilder = %v, want a TileError", k, err)
		}
	}
	// An edge that disagrees with the tiles.
	hs := e.Hashes()
	hs[0][0] ^= 1
	e2, _ := RestoreEdge(e.Size(), hs)
	if _, err := NewBuilder(e2, m); !errors.Is(err, ErrInconsistentTiles) {
		t.Errorf("corrupt edge: NewBuilder = %v", err)
	}
}
