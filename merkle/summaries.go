package merkle

import (
	"sync"
	"sync/atomic"
)

// summaryChunkTiles is how many level-0 tiles' summaries one chunk of a
// summaryCache holds (32 KiB of hashes).
const summaryChunkTiles = 256

// summaryCache keeps the summaries (the up to 4 nodes at tree level 6,
// summaryLevel) of level-0 tiles 0..max-1 in flat arrays indexed by the
// tile's index: 128 bytes a tile, with no map, entry or pointer per tile,
// so a lookup is one load from a small directory and one from the chunk.
// A map of expanded tiles (tileCache) costs about 340 bytes a tile and a
// few dependent memory reads per lookup, which at 10M entries (39,063
// level-0 tiles, 13 MiB) miss the processor's caches on most proofs and
// so made a proof dearer the larger the log.
//
// Nothing is evicted: memory is bounded by max (132 B × max, allocated a
// chunk of 256 tiles at a time as tiles are first proved). Like a tile, a
// partial summary is a prefix of every later version of itself, so a slot
// only grows: its hashes are written once, under mu, before its width
// says they are there.
type summaryCache struct {
	max    uint64
	mu     sync.Mutex // serialises writers
	chunks []atomic.Pointer[summaryChunk]
}

type summaryChunk struct {
	width [summaryChunkTiles]atomic.Uint32 // hashes held (0 to 4)
	h     [summaryChunkTiles][TileWidth >> summaryLevel]Hash
}

func newSummaryCache(max int) *summaryCache {
	if max <= 0 {
		return nil
	}
	return &summaryCache{max: uint64(max), chunks: make([]atomic.Pointer[summaryChunk], (max+summaryChunkTiles-1)/summaryChunkTiles)}
}

// holds reports whether level-0 tile ti is one the cache may keep.
func (c *summaryCache) holds(ti uint64) bool { return c != nil && ti < c.max }

// node returns the node at sub-level s (summaryLevel or summaryLevel+1)
// and index (its index within its tree level) of level-0 tile ti, if the
// cache holds at least need hashes' worth of the tile (need counted at
// sub-level 0).
func (c *summaryCache) node(ti uint64, s, index uint64, need int) (Hash, bool) {
	ch := c.chunks[ti/summaryChunkTiles].Load()
	if ch == nil {
		return Hash{}, false
	}
	slot := ti % summaryChunkTiles
	w := int(ch.width[slot].Load())
	if w<<summaryLevel < need {
		return Hash{}, false
	}
	h := &ch.h[slot]
	if s == summaryLevel {
		return h[index%(TileWidth>>summaryLevel)], true
	}
	// Sub-level 7: the parent of two level-6 nodes.
	j := 2 * (index % (TileWidth >> (summaryLevel + 1)))
	return NodeHash(h[j], h[j+1]), true
}

// add keeps the level-6 hashes of level-0 tile ti (1 to 4 of them), unless
// the cache already holds as many.
func (c *summaryCache) add(ti uint64, hashes []Hash) {
	if !c.holds(ti) || len(hashes) == 0 || len(hashes) > TileWidth>>summaryLevel {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.chunks[ti/summaryChunkTiles]
	ch := p.Load()
	if ch == nil {
		ch = new(summaryChunk)
		p.Store(ch)
	}
	slot := ti % summaryChunkTiles
	w := int(ch.width[slot].Load())
	if w >= len(hashes) {
		return
	}
	copy(ch.h[slot][w:], hashes[w:])
	ch.width[slot].Store(uint32(len(hashes)))
}

// addSummary keeps a stored summary tile's hashes, if data is one.
func (c *summaryCache) addSummary(ti uint64, data []byte) {
	if len(data) == 0 || len(data)%HashSize != 0 || len(data) > SummaryTileSize {
		return
	}
	var hs [TileWidth >> summaryLevel]Hash
	n := len(data) / HashSize
	for i := range n {
		hs[i] = Hash(data[i*HashSize:])
	}
	c.add(ti, hs[:n])
}

// tiles returns how many level-0 tiles the cache holds a summary of.
func (c *summaryCache) tiles() int {
	n := 0
	for i := range c.chunks {
		if ch := c.chunks[i].Load(); ch != nil {
			for j := range ch.width {
				if ch.width[j].Load() > 0 {
					n++
				}
			}
		}
	}
	return n
}
