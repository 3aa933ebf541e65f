package merkle

import (
	"cmp"
	"fmt"
	"slices"
)

// A Tile is the content of a hash tile: the concatenated hashes it holds so
// far, 1 to TileWidth of them. A partial tile's Data is a prefix of every
// later version of the same tile.
type Tile struct {
	Level uint64 // tile level: the hashes are of tree level TileHeight*Level
	Index uint64 // index of the tile within its level
	Data  []byte // Width()*HashSize bytes
}

// Width returns the number of hashes in the tile.
func (t Tile) Width() int { return len(t.Data) / HashSize }

// Ref returns the tile's name.
func (t Tile) Ref() TileRef { return TileRef{Level: t.Level, Index: t.Index, Width: t.Width()} }

// A Builder appends leaves to the tree and accumulates the tiles that change.
// It holds the tree's [Edge] and, for each tile level, the rightmost
// (partial) tile, so a batch costs no tile reads once the Builder exists.
//
// Usage per batch: Append the batch's leaf hashes, then Flush, and store
// every returned tile (one blob per level and index, overwriting the older,
// narrower version) together with Edge().MarshalBinary() in one transaction;
// a Builder made by [NewBuilderSummaries] also returns summary tiles from
// Summaries, to store in the same transaction.
// If that transaction fails, discard the Builder and make a new one from
// what is stored: a Builder cannot roll back.
//
// A Builder is not safe for concurrent use.
type Builder struct {
	edge  *Edge
	tiles []tileBuf // tiles[k]: the rightmost tile at tile level k
	full  []Tile    // tiles completed since the last Flush
	visit func(Node)
	// summaries is set on a Builder made by NewBuilderSummaries; sum is
	// then the summary tile of the rightmost level-0 tile (see
	// SummaryTileLevel), and sumFull the summaries completed since the
	// last call to Summaries.
	summaries bool
	sum       tileBuf
	sumFull   []Tile
}

// tileBuf is the rightmost tile of one tile level.
type tileBuf struct {
	index uint64
	data  []byte // the hashes so far, capacity FullTileSize
	dirty bool   // changed since the last Flush
}

// NewBuilder returns a Builder that extends the tree with the given edge. It
// reads the partial tiles of that tree from r (at most one per tile level; a
// wider blob is cut to the width the tree has), and checks that they agree
// with the edge: it returns an error wrapping [ErrInconsistentTiles] if they do not,
// or a *[TileError] if one cannot be read. The Builder works on a copy of e.
func NewBuilder(e *Edge, r TileReader) (*Builder, error) {
	size := e.Size()
	b := &Builder{edge: e.Clone()}
	b.visit = func(n Node) {
		if n.Level == summaryLevel {
			b.storeSummary(n)
			return
		}
		b.store(n)
	}
	for k := uint64(0); k*TileHeight < 64 && size>>(k*TileHeight) > 0; k++ {
		n := size >> (k * TileHeight)
		t := tileBuf{index: n / TileWidth, data: make([]byte, 0, FullTileSize)}
		if w := int(n % TileWidth); w > 0 {
			data, err := readTile(r, k, t.index, w)
			if err != nil {
				return nil, err
			}
			t.data = append(t.data, data[:w*HashSize]...)
		}
		b.tiles = append(b.tiles, t)
	}
	got, err := edgeHashes(size, func(k, index uint64, need int) ([]byte, error) {
		return b.tiles[k].data, nil
	})
	if err != nil {
		return nil, err
	}
	if want := e.Hashes(); !slices.Equal(got, want) {
		return nil, fmt.Errorf("%w: partial tiles of tree size %d do not hash to the stored edge", ErrInconsistentTiles, size)
	}
	return b, nil
}

// NewBuilderSummaries is [NewBuilder] for a Builder that also makes
// summary tiles, which [Builder.Summaries] returns: call it after each
// Flush and store them with the tiles.
func NewBuilderSummaries(e *Edge, r TileReader) (*Builder, error) {
	b, err := NewBuilder(e, r)
	if err != nil {
		return nil, err
	}
	// The summary of the rightmost level-0 tile, from that tile (checked
	// against the edge), not from the store: a log written before
	// summaries has none.
	b.summaries = true
	b.sum = tileBuf{index: e.Size() / TileWidth, data: make([]byte, 0, SummaryTileSize)}
	if len(b.tiles) > 0 {
		d := b.tiles[0].data
		for i := 0; (i+1)<<summaryLevel*HashSize <= len(d); i++ {
			h := subtreeHash(d[i<<summaryLevel*HashSize : (i+1)<<summaryLevel*HashSize])
			b.sum.data = append(b.sum.data, h[:]...)
		}
	}
	return b, nil
}

// SummaryTileLevel is the tile level under which the summary tiles of a
// Builder made by [NewBuilderSummaries] are stored (see
// [Builder.Summaries]). It is above [MaxTileLevel],
// so no tlog-tiles path names it: summaries are never published.
//
// The summary tile with index i holds the hashes of the complete nodes at
// tree level 6 under level-0 tile i: 1 to 4 of them, hash j the root of
// leaves i*256 + 64j up to 64 more. With them a [Prover] that meets a
// level-0 tile its cache does not hold reads 128 bytes and hashes 3 times
// instead of reading the 8 KiB tile and hashing 255 times. Like a tile, a
// partial summary is a prefix of every later version of itself.
const SummaryTileLevel = MaxTileLevel + 1

// SummaryTileSize is the size in bytes of a full summary tile: 4 hashes.
const SummaryTileSize = TileWidth >> summaryLevel * HashSize

// storeSummary puts a complete tree-level-6 node into its summary tile.
func (b *Builder) storeSummary(n Node) {
	t := &b.sum
	if t.index != n.Index>>(TileHeight-summaryLevel) || uint64(len(t.data)/HashSize) != n.Index%(TileWidth>>summaryLevel) {
		// Unreachable, as for store.
		panic(fmt.Sprintf("merkle: node %d/%d out of order for summary %d of width %d", n.Level, n.Index, t.index, len(t.data)/HashSize))
	}
	t.data = append(t.data, n.Hash[:]...)
	t.dirty = true
	if len(t.data) == SummaryTileSize {
		b.sumFull = append(b.sumFull, Tile{Level: SummaryTileLevel, Index: t.index, Data: t.data})
		*t = tileBuf{index: t.index + 1, data: make([]byte, 0, SummaryTileSize)}
	}
}

// Summaries returns every summary tile (at [SummaryTileLevel]) that
// changed since the Builder was made or Summaries was last called, with
// its complete current content, ordered by index; nil unless the Builder
// was made by [NewBuilderSummaries]. A store that keeps them
// (in the same transaction as the tiles of the same Flush) spares its
// Prover most of the cost of a level-0 tile it has not cached; one that
// does not loses nothing else. The returned Data is never modified by the
// Builder.
func (b *Builder) Summaries() []Tile {
	out := b.sumFull
	b.sumFull = nil
	if t := &b.sum; t.dirty && len(t.data) > 0 {
		out = append(out, Tile{Level: SummaryTileLevel, Index: t.index, Data: slices.Clone(t.data)})
	}
	b.sum.dirty = false
	return out
}

// store puts a stored node into its tile.
func (b *Builder) store(n Node) {
	k := n.Level / TileHeight
	for uint64(len(b.tiles)) <= k {
		b.tiles = append(b.tiles, tileBuf{data: make([]byte, 0, FullTileSize)})
	}
	t := &b.tiles[k]
	if t.index != n.Index/TileWidth || uint64(len(t.data)/HashSize) != n.Index%TileWidth {
		// Unreachable: NewBuilder checked the tiles against the edge, and
		// the edge reports nodes in order.
		panic(fmt.Sprintf("merkle: node %d/%d out of order for tile %d/%d of width %d", n.Level, n.Index, k, t.index, len(t.data)/HashSize))
	}
	t.data = append(t.data, n.Hash[:]...)
	t.dirty = true
	if len(t.data) == FullTileSize {
		b.full = append(b.full, Tile{Level: k, Index: t.index, Data: t.data})
		*t = tileBuf{index: t.index + 1, data: make([]byte, 0, FullTileSize)}
	}
}

// Append adds one leaf, given its leaf hash (see [LeafHash]).
func (b *Builder) Append(leafHash Hash) error {
	return b.edge.appendBatch([]Hash{leafHash}, b.summaries, b.visit)
}

// AppendBatch adds leaves, given their leaf hashes, in order.
func (b *Builder) AppendBatch(leafHashes []Hash) error {
	return b.edge.appendBatch(leafHashes, b.summaries, b.visit)
}

// Flush returns every tile that changed since the Builder was made or last
// flushed, with its complete current content, ordered by level then index:
// the tiles completed in between (full, each once), then the current partial
// tile of each level that gained hashes. The returned Data is never modified
// by the Builder.
func (b *Builder) Flush() []Tile {
	out := b.full
	b.full = nil
	for k := range b.tiles {
		t := &b.tiles[k]
		if t.dirty && len(t.data) > 0 {
			out = append(out, Tile{Level: uint64(k), Index: t.index, Data: slices.Clone(t.data)})
		}
		t.dirty = false
	}
	slices.SortFunc(out, func(x, y Tile) int {
		return cmp.Or(cmp.Compare(x.Level, y.Level), cmp.Compare(x.Index, y.Index))
	})
	return out
}

// Size returns the number of leaves in the tree.
func (b *Builder) Size() uint64 { return b.edge.Size() }

// Root returns the tree's root hash.
func (b *Builder) Root() Hash { return b.edge.Root() }

// Edge returns a copy of the tree's edge, to persist with the flushed tiles.
func (b *Builder) Edge() *Edge { return b.edge.Clone() }

// edgeHashes computes the edge of the tree of the given size (the roots of
// the perfect subtrees covering [0, size), largest first) from the tiles that
// hold them. tile returns the content of tile (k, index), which must hold at
// least need hashes.
//
// Each edge node at tree level 8k+s lies inside the partial tile at tile
// level k of that tree, so at most one tile per tile level is read.
func edgeHashes(size uint64, tile func(k, index uint64, need int) ([]byte, error)) ([]Hash, error) {
	var out []Hash
	for l := 63; l >= 0; l-- {
		if size>>l&1 == 0 {
			continue
		}
		h, err := nodeFromTile(uint64(l), size>>l-1, tile)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// nodeFromTile returns the hash of the perfect node (level, index), computed
// from the hashes of the tile that holds its bottom level.
func nodeFromTile(level, index uint64, tile func(k, index uint64, need int) ([]byte, error)) (Hash, error) {
	k, ti, pos, need := nodeSpan(level, index)
	data, err := tile(k, ti, need)
	if err != nil {
		return Hash{}, err
	}
	if len(data) < need*HashSize {
		return Hash{}, &TileError{Level: k, Index: ti, Have: len(data) / HashSize, Need: need, Err: ErrTileMissing}
	}
	return subtreeHash(data[pos*HashSize : need*HashSize]), nil
}

// nodeSpan locates the bottom hashes of the perfect node (level, index): they
// are hashes pos to need-1 of tile ti at tile level k.
func nodeSpan(level, index uint64) (k, ti uint64, pos, need int) {
	k, s := level/TileHeight, level%TileHeight
	first := index << s // the node's first hash at tree level TileHeight*k
	ti, pos = first/TileWidth, int(first%TileWidth)
	return k, ti, pos, pos + 1<<s
}

// subtreeHash returns the root of the perfect subtree whose bottom hashes are
// the concatenated hashes in data; their number must be a power of two, at
// most TileWidth.
func subtreeHash(data []byte) Hash {
	var buf [TileWidth / 2]Hash
	n := len(data) / HashSize
	if n == 1 {
		return Hash(data)
	}
	for i := 0; i < n/2; i++ {
		buf[i] = NodeHash(Hash(data[2*i*HashSize:]), Hash(data[(2*i+1)*HashSize:]))
	}
	for n /= 2; n > 1; n /= 2 {
		for i := 0; i < n/2; i++ {
			buf[i] = NodeHash(buf[2*i], buf[2*i+1])
		}
	}
	return buf[0]
}

// readTile reads tile (k, index) from r and checks that it is well formed and
// holds at least need hashes.
func readTile(r TileReader, k, index uint64, need int) ([]byte, error) {
	data, err := r.ReadTile(k, index)
	if err != nil {
		return nil, &TileError{Level: k, Index: index, Need: need, Err: err}
	}
	if len(data)%HashSize != 0 || len(data) > FullTileSize {
		return nil, &TileError{Level: k, Index: index, Have: len(data), Err: ErrMalformedTile}
	}
	if len(data) < need*HashSize {
		return nil, &TileError{Level: k, Index: index, Have: len(data) / HashSize, Need: need, Err: ErrTileMissing}
	}
	return data, nil
}
