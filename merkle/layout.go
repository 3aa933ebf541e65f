package merkle

import (
	"math/bits"
	"strconv"
	"strings"
)

// Tile geometry fixed by C2SP tlog-tiles.
const (
	// TileHeight is the height of a tile: a tile at tile level k holds
	// hashes of tree level TileHeight*k.
	TileHeight = 8
	// TileWidth is the number of hashes in a full tile (and of entries in a
	// full entry bundle): 2^TileHeight.
	TileWidth = 1 << TileHeight
	// FullTileSize is the size in bytes of a full tile: 8,192.
	FullTileSize = TileWidth * HashSize
	// MaxTileLevel is the highest tile level a path may name (C2SP
	// tlog-tiles: "between 0 and 63").
	MaxTileLevel = 63
)

// A TileRef names a tile or an entry bundle of a tree, as in its C2SP
// tlog-tiles path.
type TileRef struct {
	Level   uint64 // tile level: the tile holds hashes of tree level 8*Level (0 for entry bundles)
	Index   uint64 // the tile's index N within its level
	Width   int    // hashes (or entries) in the tile, 1..TileWidth; TileWidth is a full tile
	Entries bool   // an entry bundle (tile/entries/...) rather than a hash tile
}

// Full reports whether t names a full tile (or full entry bundle).
func (t TileRef) Full() bool { return t.Width == TileWidth }

// Path returns t's C2SP tlog-tiles path, relative to the log prefix.
// It panics if t.Width is not in 1..TileWidth or t.Level exceeds MaxTileLevel.
func (t TileRef) Path() string {
	if t.Entries {
		return EntriesPath(t.Index, t.Width)
	}
	return TilePath(t.Level, t.Index, t.Width)
}

// TilePath returns the C2SP tlog-tiles path of the hash tile at the given
// level and index: tile/<L>/<N>[.p/<W>]. A width of TileWidth names the full
// tile; a smaller width the partial tile of that many hashes.
//
// It panics if width is not in 1..TileWidth or level exceeds MaxTileLevel:
// such a tile cannot exist, so asking for its path is a programming error.
func TilePath(level, index uint64, width int) string {
	if level > MaxTileLevel {
		panic("merkle: TilePath: level " + strconv.FormatUint(level, 10) + " out of range")
	}
	b := make([]byte, 0, 48)
	b = append(b, "tile/"...)
	b = strconv.AppendUint(b, level, 10)
	return string(appendIndexWidth(append(b, '/'), index, width))
}

// EntriesPath returns the C2SP tlog-tiles path of the entry bundle with the
// given index: tile/entries/<N>[.p/<W>]. Width is as for [TilePath].
func EntriesPath(index uint64, width int) string {
	b := make([]byte, 0, 48)
	b = append(b, "tile/entries/"...)
	return string(appendIndexWidth(b, index, width))
}

// appendIndexWidth appends the <N>[.p/<W>] part of a tile path: N in
// zero-padded 3-digit groups, all but the last prefixed with "x"
// (1234067 -> x001/x234/067).
func appendIndexWidth(b []byte, n uint64, width int) []byte {
	if width < 1 || width > TileWidth {
		panic("merkle: tile width " + strconv.Itoa(width) + " out of range 1.." + strconv.Itoa(TileWidth))
	}
	var groups [7]uint64 // 2^64-1 has 20 digits: at most 7 groups
	i := len(groups)
	for {
		i--
		groups[i] = n % 1000
		n /= 1000
		if n == 0 {
			break
		}
	}
	for j := i; j < len(groups); j++ {
		if j < len(groups)-1 {
			b = append(b, 'x')
		}
		g := groups[j]
		b = append(b, byte('0'+g/100), byte('0'+g/10%10), byte('0'+g%10))
		if j < len(groups)-1 {
			b = append(b, '/')
		}
	}
	if width < TileWidth {
		b = append(b, ".p/"...)
		b = strconv.AppendInt(b, int64(width), 10)
	}
	return b
}

// ParseTilePath parses a C2SP tlog-tiles path of a hash tile
// (tile/<L>/<N>[.p/<W>]) or an entry bundle (tile/entries/<N>[.p/<W>]),
// relative to the log prefix (no leading slash).
//
// It is strict: it accepts exactly the paths [TileRef.Path] writes. It
// rejects leading zeros in L or W, an N not in canonical 3-digit groups
// (including a leading x000 group), W outside 1..255, L above 63, and
// tiles that no tree of fewer than 2^64 entries has. Errors are *[PathError].
func ParseTilePath(p string) (TileRef, error) {
	fail := func(reason string) (TileRef, error) {
		return TileRef{}, &PathError{Path: p, Reason: reason}
	}
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return fail(`does not start with "tile/"`)
	}
	var t TileRef
	head, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return fail("no tile index")
	}
	if head == "entries" {
		t.Entries = true
	} else {
		l, ok := parseDecimal(head)
		if !ok || l > MaxTileLevel {
			return fail("level is not a decimal integer 0..63 without leading zeros")
		}
		t.Level = l
	}

	// Width suffix: the last element is W when the one before ends in ".p".
	t.Width = TileWidth
	if i := strings.LastIndex(rest, ".p/"); i >= 0 {
		w, ok := parseDecimal(rest[i+len(".p/"):])
		if !ok || w < 1 || w >= TileWidth {
			return fail("width is not a decimal integer 1..255 without leading zeros")
		}
		t.Width = int(w)
		rest = rest[:i]
	}

	// Index: x-prefixed 3-digit groups, then a final 3-digit group.
	groups := strings.Split(rest, "/")
	if len(groups) > 7 {
		return fail("index has too many groups")
	}
	var n uint64
	for i, g := range groups {
		last := i == len(groups)-1
		if !last {
			var ok bool
			if g, ok = strings.CutPrefix(g, "x"); !ok {
				return fail(`index group lacks its "x" prefix`)
			}
			if i == 0 && g == "000" {
				return fail("index has a leading zero group")
			}
		}
		if len(g) != 3 || !isDigits(g) {
			return fail("index group is not 3 decimal digits")
		}
		hi, lo := bits.Mul64(n, 1000)
		d := uint64(g[0]-'0')*100 + uint64(g[1]-'0')*10 + uint64(g[2]-'0')
		n = lo + d
		if hi != 0 || n < lo {
			return fail("index overflows 64 bits")
		}
	}
	t.Index = n

	// The tile must be able to exist: its last hash must cover entries
	// below 2^64.
	if !tileFits(t) {
		return fail("no tree of fewer than 2^64 entries has this tile")
	}
	if t.Path() != p { // defence in depth: canonical form only
		return fail("not in canonical form")
	}
	return t, nil
}

// tileFits reports whether a tree with a size below 2^64 can contain t, that
// is, whether (Index*256 + Width) * 256^Level entries fit in a uint64.
func tileFits(t TileRef) bool {
	hi, lo := bits.Mul64(t.Index, TileWidth)
	end := lo + uint64(t.Width)
	if hi != 0 || end < lo {
		return false
	}
	shift := TileHeight * t.Level
	if shift >= 64 {
		return false
	}
	return end <= (^uint64(0))>>shift
}

// parseDecimal parses a non-empty decimal number without sign or leading zeros.
func parseDecimal(s string) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// NewTiles lists the hash tiles of the tree of size newSize that the tree of
// size oldSize does not have, or has narrower: the tiles to publish when the
// tree grows from oldSize to newSize. NewTiles(0, size) lists every tile of
// the tree of the given size. Tiles are ordered by level, then index; a
// partial tile comes last in its level. It returns nil if oldSize >= newSize.
//
// Per C2SP tlog-tiles, the tree of size s has, at each level l, the full
// tiles below floor(s/256^l)/256 and a partial tile of width
// floor(s/256^l) mod 256 when that is not zero.
func NewTiles(oldSize, newSize uint64) []TileRef {
	if oldSize >= newSize {
		return nil
	}
	var refs []TileRef
	for level := uint64(0); level*TileHeight < 64 && newSize>>(level*TileHeight) > 0; level++ {
		oldN := oldSize >> (level * TileHeight)
		newN := newSize >> (level * TileHeight)
		if oldN != newN {
			refs = appendLevelTiles(refs, level, oldN, newN, false)
		}
	}
	return refs
}

// NewEntryBundles is like [NewTiles] for the entry bundles
// (tile/entries/...) of the tree.
func NewEntryBundles(oldSize, newSize uint64) []TileRef {
	if oldSize >= newSize {
		return nil
	}
	return appendLevelTiles(nil, 0, oldSize, newSize, true)
}

// appendLevelTiles appends the tiles of one level that change when the number
// of hashes at that level grows from oldN to newN.
func appendLevelTiles(refs []TileRef, level, oldN, newN uint64, entries bool) []TileRef {
	for n := oldN / TileWidth; n < newN/TileWidth; n++ {
		refs = append(refs, TileRef{Level: level, Index: n, Width: TileWidth, Entries: entries})
	}
	if w := int(newN % TileWidth); w > 0 {
		refs = append(refs, TileRef{Level: level, Index: newN / TileWidth, Width: w, Entries: entries})
	}
	return refs
}
