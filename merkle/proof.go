package merkle

import (
	"errors"
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
	// sums, when not nil, keeps the summaries of level-0 tiles (see
	// NewSummaryProver); the cache then holds the other tiles.
	sums *summaryCache
	// near, when not nil, keeps the level-0 tiles this Prover reads whole,
	// every node hashed (see Over).
	near *tileCache
}

// nearTiles is how many level-0 tiles a Prover made by Over keeps whole: a
// batch of 1,024 leaves spans at most 5.
const nearTiles = 8

// NewProver returns a Prover reading tiles from r. If cacheTiles > 0, it keeps
// up to that many tiles in memory, with every complete interior node of each
// already hashed (a level-0 tile from sub-level 6 up, 224 B; a
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

// NewSummaryProver is [NewProver] with, besides the tile cache, a cache of
// the summaries (the up to 4 nodes at tree level 6) of level-0 tiles
// 0..summaryTiles-1 in flat arrays: 128 bytes a tile and 4 for its width,
// never evicted, so at most 132 × summaryTiles bytes (5 MiB at 10M
// entries, which have 39,063 level-0 tiles). A proof looks its leaf's tile
// up there in one memory read, where the tile cache's map of expanded
// tiles costs about 340 bytes a tile and more processor cache misses the
// more tiles it holds. A tile's summary comes
// from its summary tile (see [SummaryTileLevel]; with a [TileBatchReader],
// SummaryGroup at a time) or, in a log written before summaries, from the
// tile itself. Level-0 tiles from summaryTiles on are cached in the tile
// cache, as by NewProver.
func NewSummaryProver(r TileReader, cacheTiles, summaryTiles int) *Prover {
	p := NewProver(r, cacheTiles)
	p.sums = newSummaryCache(summaryTiles)
	return p
}

// Over returns a Prover that reads tiles from r and shares p's cache. r must
// serve the same tree as p's reader (for example, the tiles a commit just
// wrote, in memory, in front of the store): the cache holds no tile that
// could differ between the two.
//
// The new Prover is for proving many leaves of a few tiles, such as every
// entry of a batch just committed: it also keeps the last few level-0 tiles
// it read with every node hashed, where p's cache keeps only their upper
// nodes, so each proof after the first in a tile hashes nothing. Make one
// for the batch and share it, rather than one per proof.
func (p *Prover) Over(r TileReader) *Prover {
	return &Prover{r: r, cache: p.cache, sums: p.sums, near: newTileCache(nearTiles)}
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
	_, begin, end := nodes.Ephem()
	return rehash(hashes, begin, end), nil
}

// rehash folds hashes[begin:end], the nodes that cover the ephemeral node
// from the lowest level up, into that node's hash, in place, as
// proof.Nodes.Rehash does.
func rehash(hashes []Hash, begin, end int) []Hash {
	if end-begin < 2 {
		return hashes
	}
	h := hashes[begin]
	for _, left := range hashes[begin+1 : end] {
		h = NodeHash(left, h)
	}
	hashes[begin] = h
	n := copy(hashes[begin+1:], hashes[end:])
	return hashes[:begin+1+n]
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
	key := tileKey{k, ti}
	if p.near != nil && k == 0 {
		x := p.near.get(key, need)
		if x == nil {
			data, _, err := m.read(p.r, key, -1, need)
			if err != nil {
				return Hash{}, err
			}
			x = expandTile(data, 0)
			p.near.add(key, x)
		}
		return x.node(s, index), nil
	}
	if k == 0 && s >= summaryLevel && p.sums.holds(ti) {
		return p.fromSummaries(m, ti, s, index, need)
	}
	if p.cache != nil && keeps(k, s) {
		x := m.expanded(key, need)
		if x == nil {
			if x = p.cache.get(key, need); x == nil {
				if k == 0 {
					x = p.fromSummary(ti, need)
				}
				if x == nil {
					data, _, err := m.read(p.r, key, -1, need)
					if err != nil {
						return Hash{}, err
					}
					x = expandTile(data, lowestKept(k))
				}
				p.cache.add(key, x)
			}
			m.keep(memoTile{key: key, x: x})
		}
		return x.node(s, index), nil
	}
	// A low node spans at most 2^summaryLevel hashes (any number without a
	// cache): hash them directly. A reader that can read part of a tile
	// reads the aligned group of 2^summaryLevel hashes around them, which
	// holds every low node a proof needs from this tile.
	from := -1 // the whole tile
	if span := need - pos; span <= 1<<summaryLevel {
		from = pos &^ (1<<summaryLevel - 1)
	}
	data, from, err := m.read(p.r, key, from, need)
	if err != nil {
		return Hash{}, err
	}
	return subtreeHash(data[(pos-from)*HashSize : (need-from)*HashSize]), nil
}

// A TileBatchReader is a [TileReader] that can also read consecutive
// tiles of one level at once. A caching [Prover] uses it to read the
// summary tiles of [SummaryGroup] level-0 tiles together, so that a tree
// whose level-0 tiles are not yet cached warms the cache in one read per
// group rather than one per tile.
type TileBatchReader interface {
	TileReader
	// ReadTiles returns tiles from..from+n-1 of the given tile level:
	// out[i] is tile from+i as ReadTile would return it, or nil if it does
	// not exist. The rules of ReadTile apply.
	ReadTiles(level, from uint64, n int) ([][]byte, error)
}

// SummaryGroup is how many level-0 tiles' summaries a caching [Prover]
// reads at once from a [TileBatchReader] (16,384 leaves' worth, 8 KiB).
const SummaryGroup = 64

// fromSummary returns level-0 tile ti as the cache keeps it (sub-levels
// summaryLevel up), made from its summary tile (see [SummaryTileLevel]),
// if the reader has one that covers at least need hashes of the tile;
// else nil, and the caller reads the tile. A log written before summaries
// has none for its older tiles: those cost what they did.
//
// With a TileBatchReader, and room in the cache, it reads the summaries of
// ti's whole group of SummaryGroup tiles and caches every one.
func (p *Prover) fromSummary(ti uint64, need int) *expandedTile {
	if br, ok := p.r.(TileBatchReader); ok && p.cache.room() >= SummaryGroup {
		from := ti &^ (SummaryGroup - 1)
		sums, err := br.ReadTiles(SummaryTileLevel, from, SummaryGroup)
		if err == nil && len(sums) == SummaryGroup {
			var x *expandedTile
			for i, data := range sums {
				y := summaryTile(data)
				if y == nil {
					continue
				}
				if from+uint64(i) == ti {
					x = y
					continue // the caller adds it
				}
				p.cache.add(tileKey{0, from + uint64(i)}, y)
			}
			if x != nil && x.width >= need {
				return x
			}
			return nil
		}
	}
	data, err := p.r.ReadTile(SummaryTileLevel, ti)
	if err != nil {
		return nil
	}
	if x := summaryTile(data); x != nil && x.width >= need {
		return x
	}
	return nil
}

// fromSummaries returns the node at sub-level s (summaryLevel up) and
// index of level-0 tile ti, which p.sums may hold, from p.sums: if they
// do not hold enough of the tile yet, it reads the tile's summary tile
// (its group's, with a TileBatchReader) or, if the store has none wide
// enough, the tile, and keeps its summary.
func (p *Prover) fromSummaries(m *tileMemo, ti, s, index uint64, need int) (Hash, error) {
	if h, ok := p.sums.node(ti, s, index, need); ok {
		return h, nil
	}
	if br, ok := p.r.(TileBatchReader); ok {
		from := ti &^ (SummaryGroup - 1)
		if sums, err := br.ReadTiles(SummaryTileLevel, from, SummaryGroup); err == nil && len(sums) == SummaryGroup {
			for i, data := range sums {
				p.sums.addSummary(from+uint64(i), data)
			}
		}
	} else if data, err := p.r.ReadTile(SummaryTileLevel, ti); err == nil {
		p.sums.addSummary(ti, data)
	}
	if h, ok := p.sums.node(ti, s, index, need); ok {
		return h, nil
	}
	data, _, err := m.read(p.r, tileKey{0, ti}, -1, need)
	if err != nil {
		return Hash{}, err
	}
	p.sums.add(ti, levelSixHashes(data))
	if h, ok := p.sums.node(ti, s, index, need); ok {
		return h, nil
	}
	// Unreachable: m.read checked the tile holds need hashes, and need
	// is a multiple of 2^summaryLevel here.
	return Hash{}, &TileError{Level: 0, Index: ti, Have: len(data) / HashSize, Need: need, Err: ErrTileMissing}
}

// levelSixHashes returns the complete nodes at tree level summaryLevel
// of a level-0 tile, given its data: what its summary tile holds.
func levelSixHashes(data []byte) []Hash {
	const group = 1 << summaryLevel * HashSize
	out := make([]Hash, 0, TileWidth>>summaryLevel)
	for i := 0; (i+1)*group <= len(data) && len(out) < cap(out); i++ {
		out = append(out, subtreeHash(data[i*group:(i+1)*group]))
	}
	return out
}

// summaryTile expands a stored summary tile, or returns nil if data is
// not one (absent or malformed).
func summaryTile(data []byte) *expandedTile {
	if len(data) == 0 || len(data)%HashSize != 0 || len(data) > SummaryTileSize {
		return nil
	}
	return expandSummary(data)
}

// expandSummary returns the expanded tile (sub-levels summaryLevel up) of
// a level-0 tile whose summary tile is data (1 to 4 hashes).
func expandSummary(data []byte) *expandedTile {
	n := len(data) / HashSize
	x := &expandedTile{width: n << summaryLevel, lo: summaryLevel, h: make([]Hash, 2*TileWidth>>summaryLevel-1)}
	level := x.h[:n]
	for i := range level {
		level[i] = Hash(data[i*HashSize:])
	}
	for s := uint64(summaryLevel + 1); s <= TileHeight; s++ {
		up := x.h[x.levelOffset(s):][:n>>(s-summaryLevel)]
		for i := range up {
			up[i] = NodeHash(level[2*i], level[2*i+1])
		}
		level = up
	}
	return x
}

// tileMemo remembers the few tiles one computation has used, so that each
// is read, or looked up in the cache, once.
type tileMemo struct {
	n     int
	tiles [8]memoTile // most computations need fewer
	more  []memoTile
}

// memoTile is a tile as one computation has it: expanded, from the cache,
// or hashes it read.
type memoTile struct {
	key  tileKey
	x    *expandedTile // nil: data
	from int           // data holds the tile's hashes from..to-1
	to   int
	data []byte // hash from+i is data[i*HashSize:]
}

func (m *tileMemo) each(f func(t *memoTile) bool) {
	for i := range m.n {
		if f(&m.tiles[i]) {
			return
		}
	}
	for i := range m.more {
		if f(&m.more[i]) {
			return
		}
	}
}

func (m *tileMemo) keep(t memoTile) {
	if m.n < len(m.tiles) {
		m.tiles[m.n] = t
		m.n++
		return
	}
	m.more = append(m.more, t)
}

// expanded returns the expanded tile key if this computation has it with at
// least need hashes.
func (m *tileMemo) expanded(key tileKey, need int) *expandedTile {
	var x *expandedTile
	m.each(func(t *memoTile) bool {
		if t.key == key && t.x != nil && t.x.width >= need {
			x = t.x
			return true
		}
		return false
	})
	return x
}

// read returns hashes of tile key, hash from+i at data[i*HashSize:], up to
// at least need-1. With from -1, or a reader that cannot read part of a
// tile, it reads the whole tile (from 0); a part it has already read may
// start lower than asked (it returns where).
func (m *tileMemo) read(r TileReader, key tileKey, from, need int) (data []byte, start int, err error) {
	found := false
	m.each(func(t *memoTile) bool {
		if t.key == key && t.x == nil && t.from <= max(from, 0) && t.to >= need {
			data, start, found = t.data, t.from, true
			return true
		}
		return false
	})
	if found {
		return data, start, nil
	}
	rr, ok := r.(TileRangeReader)
	if !ok || from < 0 {
		if data, err = readTile(r, key.level, key.index, need); err != nil {
			return nil, 0, err
		}
		m.keep(memoTile{key: key, to: len(data) / HashSize, data: data})
		return data, 0, nil
	}
	to := min(from+1<<summaryLevel, TileWidth)
	if data, err = readTileRange(rr, key.level, key.index, from, to, need); err != nil {
		return nil, 0, err
	}
	m.keep(memoTile{key: key, from: from, to: from + len(data)/HashSize, data: data})
	return data, from, nil
}

// A TileRangeReader is a [TileReader] that can also read part of a tile,
// which spares copying a whole tile to use a few of its hashes.
type TileRangeReader interface {
	TileReader
	// ReadTileRange returns hashes from to to-1 of the hash tile at the
	// given tile level and index, or from to the tile's width if it holds
	// fewer: its bytes from from*HashSize. The rules of ReadTile apply.
	ReadTileRange(level, index uint64, from, to int) ([]byte, error)
}

// readTileRange reads hashes from..to-1 (or fewer, but at least up to
// need-1) of tile (k, index) and checks them.
func readTileRange(r TileRangeReader, k, index uint64, from, to, need int) ([]byte, error) {
	data, err := r.ReadTileRange(k, index, from, to)
	if err != nil {
		return nil, &TileError{Level: k, Index: index, Need: need, Err: err}
	}
	if len(data)%HashSize != 0 || len(data) > (to-from)*HashSize {
		return nil, &TileError{Level: k, Index: index, Have: from + len(data)/HashSize, Err: ErrMalformedTile}
	}
	if from+len(data)/HashSize < need {
		return nil, &TileError{Level: k, Index: index, Have: from + len(data)/HashSize, Need: need, Err: ErrTileMissing}
	}
	return data, nil
}

// VerifyInclusion checks that proof proves the leaf with the given leaf hash
// at index in the tree of the given size and root, per RFC 6962 (through
// transparency-dev/merkle/proof). Errors wrap [ErrProofFailed].
func VerifyInclusion(index, size uint64, leafHash Hash, proof []Hash, root Hash) error {
	if err := verifyInclusion(index, size, leafHash, proof, root); err != nil {
		return fmt.Errorf("%w: inclusion of leaf %d in tree of size %d: %v", ErrProofFailed, index, size, readable(err))
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
		return fmt.Errorf("%w: consistency of tree sizes %d and %d: %v", ErrProofFailed, size1, size2, readable(err))
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

// readable rewrites a root mismatch from transparency-dev/merkle, which
// prints the two roots as Go byte slices on several lines, as one line
// with the roots in base64, as everything else custody prints hashes.
func readable(err error) error {
	var rm proof.RootMismatchError
	if errors.As(err, &rm) && len(rm.CalculatedRoot) == HashSize && len(rm.ExpectedRoot) == HashSize {
		return fmt.Errorf("the proof leads to root %s, not %s", Hash(rm.CalculatedRoot), Hash(rm.ExpectedRoot))
	}
	return err
}
