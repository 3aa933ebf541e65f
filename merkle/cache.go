package merkle

import (
	"container/list"
	"sync"
)

// tileKey names a hash tile.
type tileKey struct{ level, index uint64 }

// expandedTile holds a tile's hashes and every complete node above them
// inside the tile: for a full tile 256 + 128 + ... + 1 = 511 hashes, bottom
// level first. For a partial tile of width w, sub-level s holds its first
// w>>s nodes; by the prefix property, later versions of the tile have the
// same nodes there.
type expandedTile struct {
	width int // hashes at sub-level 0
	h     [2*TileWidth - 1]Hash
}

// levelOffset returns where sub-level s (0..8) of a tile starts in an
// expandedTile: level s holds TileWidth>>s hashes.
func levelOffset(s uint64) int { return 2*TileWidth - 2*TileWidth>>s }

// expandTile hashes every complete interior node of a tile, given its data
// (1 to TileWidth hashes).
func expandTile(data []byte) *expandedTile {
	x := &expandedTile{width: len(data) / HashSize}
	for i := range x.width {
		x.h[i] = Hash(data[i*HashSize:])
	}
	for s := uint64(1); s <= TileHeight; s++ {
		below, here := levelOffset(s-1), levelOffset(s)
		for i := range x.width >> s {
			x.h[here+i] = NodeHash(x.h[below+2*i], x.h[below+2*i+1])
		}
	}
	return x
}

// node returns the node at sub-level s of the tile whose index within its
// tree level is index. The node must be complete in x: its last hash at
// sub-level 0 must be below x.width.
func (x *expandedTile) node(s, index uint64) Hash {
	return x.h[levelOffset(s)+int(index%(TileWidth>>s))]
}

// tileCache is a least-recently-used cache of expanded tiles.
type tileCache struct {
	max int

	mu    sync.Mutex
	items map[tileKey]*list.Element // guarded by mu
	order *list.List                // guarded by mu; front is most recent
}

type cacheEntry struct {
	key tileKey
	x   *expandedTile
}

func newTileCache(max int) *tileCache {
	return &tileCache{max: max, items: make(map[tileKey]*list.Element), order: list.New()}
}

// get returns the cached tile k if it holds at least need hashes.
func (c *tileCache) get(k tileKey, need int) *expandedTile {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	if x := e.Value.(*cacheEntry).x; x.width >= need {
		return x
	}
	return nil
}

// add caches x as tile k, unless a version at least as wide is cached.
func (c *tileCache) add(k tileKey, x *expandedTile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		if ce := e.Value.(*cacheEntry); ce.x.width < x.width {
			ce.x = x
		}
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{k, x})
	if c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).key)
	}
}
