package merkle

import (
	"sync"
	"sync/atomic"
)

// tileKey names a hash tile.
type tileKey struct{ level, index uint64 }

// summaryLevel is the lowest sub-level a cached tile of tree level 0 keeps.
// Those tiles are the many (one per 256 leaves): nodes below summaryLevel
// span at most 2^summaryLevel hashes and are recomputed from the tile's data
// (at most 63 hashes each, from the 2 KiB of the tile around the leaf), so
// such a tile costs 7 hashes (224 B) in the cache instead of 511 (16 KiB).
// At 10M entries the cache holds 39,063 of them: about 13 MiB with the
// cache's own overhead, against 36 MiB when it kept sub-level 4 up, for
// about 5 µs more per proof. That memory counts twice (the collector lets
// the heap grow to twice what is live), and the target for a 10M-entry
// server is 512 MiB in all. Tiles of higher levels are few (1 per 65,536
// leaves and fewer) and are kept whole, so a proof reads at most the one
// level-0 tile of its leaf. A batch's own answers do not pay the
// recomputation (see Prover.Over).
const summaryLevel = 6

// expandedTile holds every complete node of a tile at sub-levels lo..8,
// lowest first. For a partial tile of width w, sub-level s holds its first
// w>>s nodes; by the prefix property, later versions of the tile have the
// same nodes there.
type expandedTile struct {
	width int    // hashes at sub-level 0
	lo    uint64 // the lowest sub-level kept
	h     []Hash
}

// levelOffset returns where sub-level s (lo..8) starts in h: sub-level s
// holds TileWidth>>s hashes.
func (x *expandedTile) levelOffset(s uint64) int {
	return 2*TileWidth>>x.lo - 2*TileWidth>>s
}

// expandTile hashes every complete interior node of a tile, given its data
// (1 to TileWidth hashes), and keeps those at sub-level lo and up.
func expandTile(data []byte, lo uint64) *expandedTile {
	x := &expandedTile{width: len(data) / HashSize, lo: lo, h: make([]Hash, 2*TileWidth>>lo-1)}
	var level [TileWidth]Hash
	n := x.width
	for i := range n {
		level[i] = Hash(data[i*HashSize:])
	}
	for s := uint64(0); s <= TileHeight; s++ {
		if s > 0 {
			n >>= 1
			for i := range n {
				level[i] = NodeHash(level[2*i], level[2*i+1])
			}
		}
		if s >= lo {
			copy(x.h[x.levelOffset(s):], level[:n])
		}
	}
	return x
}

// node returns the node at sub-level s (>= x.lo) of the tile whose index
// within its tree level is index. The node must be complete in x.
func (x *expandedTile) node(s, index uint64) Hash {
	return x.h[x.levelOffset(s)+int(index%(TileWidth>>s))]
}

// keeps reports whether a cached tile at tile level k holds sub-level s.
func keeps(k, s uint64) bool { return k > 0 || s >= summaryLevel }

// lowestKept is the lowest sub-level cached for tiles of tile level k.
func lowestKept(k uint64) uint64 {
	if k > 0 {
		return 0
	}
	return summaryLevel
}

// tileCache is a cache of expanded tiles with CLOCK eviction (an
// approximation of least-recently-used): a hit only sets the entry's
// reference bit under a shared lock, so concurrent proofs do not serialise
// on it; a miss that adds a tile takes the lock exclusively and, when the
// cache is full, sweeps the ring for an entry not referenced since the last
// sweep.
type tileCache struct {
	max int

	mu    sync.RWMutex
	items map[tileKey]*cacheEntry // guarded by mu
	ring  []*cacheEntry           // guarded by mu; the eviction order
	hand  int                     // guarded by mu; the next ring slot to consider
}

type cacheEntry struct {
	key tileKey
	x   atomic.Pointer[expandedTile] // replaced (under mu) by a wider version
	ref atomic.Bool                  // used since the hand last passed
}

func newTileCache(max int) *tileCache {
	return &tileCache{max: max, items: make(map[tileKey]*cacheEntry)}
}

// get returns the cached tile k if it holds at least need hashes.
func (c *tileCache) get(k tileKey, need int) *expandedTile {
	c.mu.RLock()
	e, ok := c.items[k]
	c.mu.RUnlock()
	if !ok {
		return nil
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	if x := e.x.Load(); x.width >= need {
		return x
	}
	return nil
}

// room returns how many tiles the cache can add before it evicts one.
func (c *tileCache) room() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.max - len(c.ring)
}

// add caches x as tile k, unless a version at least as wide is cached.
func (c *tileCache) add(k tileKey, x *expandedTile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		e.ref.Store(true)
		if e.x.Load().width < x.width {
			e.x.Store(x)
		}
		return
	}
	e := &cacheEntry{key: k}
	e.x.Store(x)
	e.ref.Store(true)
	if len(c.ring) < c.max {
		c.ring = append(c.ring, e)
		c.items[k] = e
		return
	}
	// Full: the first entry not referenced since the hand last passed it
	// goes. At most two turns, since the first clears every bit.
	for {
		old := c.ring[c.hand]
		if old.ref.Load() {
			old.ref.Store(false)
			c.hand = (c.hand + 1) % len(c.ring)
			continue
		}
		delete(c.items, old.key)
		c.ring[c.hand] = e
		c.items[k] = e
		c.hand = (c.hand + 1) % len(c.ring)
		return
	}
}
