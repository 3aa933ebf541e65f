package merkle

import (
	"bytes"
	"fmt"
	"maps"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// testLeaf returns the i'th test leaf. Lengths vary so that bundle and leaf
// hashing see more than one shape.
func testLeaf(i uint64) []byte {
	b := fmt.Appendf(nil, "custody test leaf %d", i)
	return append(b, bytes.Repeat([]byte{byte(i)}, int(i%37))...)
}

// memTiles is an in-memory tile store: one blob per (level, index),
// overwritten as partial tiles grow, as the ledger does.
type memTiles map[tileKey][]byte

func (m memTiles) ReadTile(level, index uint64) ([]byte, error) {
	b, ok := m[tileKey{level, index}]
	if !ok {
		return nil, fmt.Errorf("tile %d/%d not stored", level, index)
	}
	return b, nil
}

// apply writes tiles, checking the prefix property: a new version of a tile
// extends the stored one.
func (m memTiles) apply(t testing.TB, tiles []Tile) {
	t.Helper()
	for _, tl := range tiles {
		k := tileKey{tl.Level, tl.Index}
		if old, ok := m[k]; ok && (len(tl.Data) <= len(old) || !bytes.HasPrefix(tl.Data, old)) {
			t.Fatalf("tile %s (%d hashes) does not extend the stored %d hashes", tl.Ref().Path(), tl.Width(), len(old)/HashSize)
		}
		if len(tl.Data) == 0 || len(tl.Data)%HashSize != 0 || len(tl.Data) > FullTileSize {
			t.Fatalf("tile %d/%d has %d bytes", tl.Level, tl.Index, len(tl.Data))
		}
		m[k] = tl.Data
	}
}

func (m memTiles) clone() memTiles { return maps.Clone(m) }

// tlogTiles adapts memTiles to tlog.TileReader (height 8), returning for each
// requested tile exactly the width tlog asks for, cut from the stored blob.
type tlogTiles struct{ m memTiles }

func (r tlogTiles) Height() int { return TileHeight }

func (r tlogTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if t.H != TileHeight || t.L < 0 {
			return nil, fmt.Errorf("unexpected tile %v", t.Path())
		}
		b, err := r.m.ReadTile(uint64(t.L), uint64(t.N))
		if err != nil {
			return nil, err
		}
		if len(b) < t.W*HashSize {
			return nil, fmt.Errorf("tile %v: have %d hashes", t.Path(), len(b)/HashSize)
		}
		out[i] = b[:t.W*HashSize]
	}
	return out, nil
}

func (r tlogTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// refLog is the independent reference: the same leaves in a sumdb/tlog
// stored-hash array, built with tlog's own code only.
type refLog struct {
	leaves [][]byte
	hashes []tlog.Hash // indexed by tlog.StoredHashIndex
}

func (r *refLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(r.hashes)) {
				return nil, fmt.Errorf("ref: stored hash %d not present", x)
			}
			out[i] = r.hashes[x]
		}
		return out, nil
	})
}

func (r *refLog) add(leaf []byte) {
	n := int64(len(r.leaves))
	hs, err := tlog.StoredHashes(n, leaf, r.reader())
	if err != nil {
		panic(err)
	}
	r.leaves = append(r.leaves, leaf)
	r.hashes = append(r.hashes, hs...)
}

func (r *refLog) root(t testing.TB, size uint64) Hash {
	t.Helper()
	h, err := tlog.TreeHash(int64(size), r.reader())
	if err != nil {
		t.Fatalf("tlog.TreeHash(%d): %v", size, err)
	}
	return Hash(h)
}

// checkTilesAgainstTlog checks that the store holds exactly the tiles of the
// tree of the given size, byte for byte as tlog.ReadTileData computes them.
func checkTilesAgainstTlog(t testing.TB, m memTiles, ref *refLog, size uint64) {
	t.Helper()
	want := tlog.NewTiles(TileHeight, 0, int64(size))
	if len(m) != len(want) {
		t.Fatalf("size %d: store has %d tiles, tlog.NewTiles lists %d", size, len(m), len(want))
	}
	for _, tt := range want {
		data, err := tlog.ReadTileData(tt, ref.reader())
		if err != nil {
			t.Fatalf("tlog.ReadTileData(%v): %v", tt.Path(), err)
		}
		got, err := m.ReadTile(uint64(tt.L), uint64(tt.N))
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: tile %v differs from tlog's (%d vs %d bytes)", size, tt.Path(), len(got), len(data))
		}
	}
}

func toTlog(hs []Hash) []tlog.Hash {
	out := make([]tlog.Hash, len(hs))
	for i, h := range hs {
		out[i] = tlog.Hash(h)
	}
	return out
}

func leafHashes(leaves [][]byte) []Hash {
	out := make([]Hash, len(leaves))
	for i, l := range leaves {
		out[i] = LeafHash(l)
	}
	return out
}

// newRand is a tiny deterministic PRNG (splitmix64), so failures reproduce.
type newRand uint64

func (r *newRand) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *newRand) intn(n uint64) uint64 { return r.next() % n }
