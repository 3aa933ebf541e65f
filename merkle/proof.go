package merkle

import (
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// A TileReader reads hash tiles.
//
// ReadTile returns the stored content of the hash tile at the given tile
// level and index: concatenated 32-byte hashes. Because a partial tile is a
// prefix of every later version of itself, the reader may return a wider
// version than a computation needs (the current one); it must never return
// hashes that differ from what the tree holds, so it must read only tiles of
// committed tree states, never those of a batch that may still roll back (a
// caching Prover would keep them). If the tile does not exist it must return
// an error. The caller does not modify the returned bytes, and
// the reader must not modify them afterwards.
type TileReader interface {
	ReadTile(level, index uint64) ([]byte, error)
}

// A TileReaderFunc is a function implementing [TileReader].
type TileReaderFunc func(level, index uint64) ([]byte, error)

// ReadTile returns f(level, index).
func (f TileReaderFunc) ReadTile(level, index uint64) ([]byte, error) { return f(level, index) }

// A Prover computes proofs and past roots from the tiles of a tree.
//
// It trusts its TileReader: it does not authenticate tiles against a
// checkpoint. A proof computed from corrupt tiles fails verification; it
// never verifies against the true root.
//
// A Prover is safe for concurrent use if its TileReader is.
type Prover struct {
	r     TileReader
	cache *tileCache // nil: no cache
}

// NewProver returns a Prover reading tiles from r. If cacheTiles > 0, it keeps
// up to that many tiles in memory, with every complete interior node of each
// already hashed (a level-0 tile from sub-level 4 up, about 1 KiB; a
// higher tile whole, 16 KiB), evicting the least recently used.
//
// The cache never serves stale data: full tiles never change, and a partial
// tile is cached with its width and used only for nodes inside that width,
// which (by the prefix property of tiles) every later version shares. A
// wider version read later replaces it. So the right edge of the tree, which
// almost every proof needs, is hashed once per tree size rather than once
// per proof.
func NewProver(r TileReader, cacheTiles int) *Prover {
	p := &Prover{r: r}
	if cacheTiles > 0 {
		p.cache = newTileCache(cacheTiles)
	}
	return p
}

// InclusionProof returns the RFC 6962 inclusion proof (audit path) of the
// leaf at index in the tree of the given size, read from the tiles in r,
// nearest sibling first. It is NewProver(r, 0).InclusionProof.
func InclusionProof(r TileReader, index, size uint64) ([]Hash, error) {
	return (&Prover{r: r}).InclusionProof(index, size)
}

// ConsistencyProof returns the RFC 6962 consistency proof between the trees
// of sizes size1 and size2, read from the tiles in r. It is
// NewProver(r, 0).ConsistencyProof.
func ConsistencyProof(r TileReader, size1, size2 uint64) ([]Hash, error) {
	return (&Prover{r: r}).ConsistencyProof(size1, size2)
}

// RootAt returns the root hash of the tree of the given size, read from the
// tiles in r. It is NewProver(r, 0).RootAt.
func RootAt(r TileReader, size uint64) (Hash, error) {
	return (&Prover{r: r}).RootAt(size)
}

// EdgeAt returns the edge of the tree of the given size, read from the tiles
// in r (at most one partial tile per tile level). It is NewProver(r, 0).EdgeAt.
func EdgeAt(r TileReader, size uint64) (*Edge, error) {
	return (&Prover{r: r}).EdgeAt(size)
}

// InclusionProof returns the RFC 6962 inclusion proof of the leaf at index
// in the tree of the given size, nearest sibling first. It returns
// [ErrOutOfRange] unless index < size, and a *[TileError] if a tile it needs
// cannot be read.
func (p *Prover) InclusionProof(index, size uint64) ([]Hash, error) {
	if index >= size {
		return nil, fmt.Errorf("%w: leaf index %d in tree of size %d", ErrOutOfRange, index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOutOfRange, err)
	}
	return p.prove(nodes)
}

// ConsistencyProof returns the RFC 6962 consistency proof between the trees
// of sizes size1 and size2. It returns [ErrOutOfRange] unless
// size1 <= size2. The proof is empty if size1 is 0 or equals size2.
func (p *Prover) ConsistencyProof(size1, size2 uint64) ([]Hash, error) {
	if size1 > size2 {
		return nil, fmt.Errorf("%w: consistency from tree size %d to smaller %d", ErrOutOfRange, size1, size2)
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOutOfRange, err)
	}
	return p.prove(nodes)
}

// prove reads the hashes of the non-ephemeral nodes of a proof and folds the
// ones that stand for the ephemeral node.
func (p *Prover) prove(nodes proof.Nodes) ([]Hash, error) {
	var m tileMemo
	hashes := make([]Hash, len(nodes.IDs))
	for i, id := range nodes.IDs {
		h, err := p.nodeHash(&m, uint64(id.Level), id.Index)
		if err != nil {
			return nil, err
		}
		hashes[i] = h
	}
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		hs[i] = hashes[i][:]
	}
	hs, err := nodes.Rehash(hs, hashChildren)
	if err != nil { // unreachable: len(hs) == len(nodes.IDs)
		return nil, err
	}
	out := make([]Hash, len(hs))
	for i, h := range hs {
		out[i] = Hash(h)
	}
	return out, nil
}

// RootAt returns the root hash of the tree of the given size: [EmptyRoot]
// for 0.
func (p *Prover) RootAt(size uint64) (Hash, error) {
	e, err := p.EdgeAt(size)
	if err != nil {
		return Hash{}, err
	}
	return e.Root(), nil
}

// EdgeAt returns the edge of the tree of the given size.
func (p *Prover) EdgeAt(size uint64) (*Edge, error) {
	var m tileMemo
	ids := compact.RangeNodes(0, size, nil)
	hashes := make([]Hash, len(ids))
	for i, id := range ids {
		h, err := p.nodeHash(&m, uint64(id.Level), id.Index)
		if err != nil {
			return nil, err
		}
		hashes[i] = h
	}
	return RestoreEdge(size, hashes)
}

// nodeHash returns the hash of the perfect node (level, index), from the
// cache or recomputed from the bottom hashes of the tile that holds it.
func (p *Prover) nodeHash(m *tileMemo, level, index uint64) (Hash, error) {
	k, ti, pos, need := nodeSpan(level, index)
	s := level % TileHeight
	if p.cache != nil && keeps(k, s) {
		if x := p.cache.get(tileKey{k, ti}, need); x != nil {
			return x.node(s, index), nil
		}
	}
	data, err := m.read(p.r, k, ti, need)
	if err != nil {
		return Hash{}, err
	}
	if p.cache != nil && keeps(k, s) {
		x := expandTile(data, lowestKept(k))
		p.cache.add(tileKey{k, ti}, x)
		return x.node(s, index), nil
	}
	// A low node spans at most 2^summaryLevel hashes: hash them directly.
	return subtreeHash(data[pos*HashSize : need*HashSize]), nil
}

// tileMemo remembers the few tiles one computation has read, so that each is
// read once.
type tileMemo struct {
	tiles []memoTile
}

type memoTile struct {
	key  tileKey
	data []byte
}

func (m *tileMemo) read(r TileReader, k, index uint64, need int) ([]byte, error) {
	key := tileKey{k, index}
	for _, t := range m.tiles {
		if t.key == key && len(t.data) >= need*HashSize {
			return t.data, nil
		}
	}
	data, err := readTile(r, k, index, need)
	if err != nil {
		return nil, err
	}
	m.tiles = append(m.tiles, memoTile{key, data})
	return data, nil
}

// VerifyInclusion checks that proof proves the leaf with the given leaf hash
// at index in the tree of the given size and root, per RFC 6962 (through
// transparency-dev/merkle/proof). Errors wrap [ErrProofFailed].
func VerifyInclusion(index, size uint64, leafHash Hash, proof []Hash, root Hash) error {
	if err := verifyInclusion(index, size, leafHash, proof, root); err != nil {
		return fmt.Errorf("%w: inclusion of leaf %d in tree of size %d: %v", ErrProofFailed, index, size, err)
	}
	return nil
}

func verifyInclusion(index, size uint64, leafHash Hash, p []Hash, root Hash) error {
	return proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leafHash[:], slicesOf(p), root[:])
}

// VerifyConsistency checks that proof proves the tree of size size1 and root
// root1 is a prefix of the tree of size size2 and root root2, per RFC 6962
// (through transparency-dev/merkle/proof). Unlike the library, it also
// requires root1 to be [EmptyRoot] when size1 is 0. Errors wrap
// [ErrProofFailed].
func VerifyConsistency(size1, size2 uint64, proof []Hash, root1, root2 Hash) error {
	if err := verifyConsistency(size1, size2, proof, root1, root2); err != nil {
		return fmt.Errorf("%w: consistency of tree sizes %d and %d: %v", ErrProofFailed, size1, size2, err)
	}
	return nil
}

func verifyConsistency(size1, size2 uint64, p []Hash, root1, root2 Hash) error {
	if size1 == 0 && root1 != EmptyRoot {
		return fmt.Errorf("root of the empty tree is %s, want %s", root1, EmptyRoot)
	}
	return proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, slicesOf(p), root1[:], root2[:])
}

// slicesOf returns hs as the [][]byte transparency-dev/merkle wants.
func slicesOf(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}
