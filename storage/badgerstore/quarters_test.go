package badgerstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
)

// hashes returns n distinct 32-byte hashes, numbered from first.
func hashes(first, n int) []byte {
	out := make([]byte, n*merkle.HashSize)
	for i := range n {
		out[i*merkle.HashSize] = byte(first + i)
		out[i*merkle.HashSize+1] = byte((first + i) >> 8)
	}
	return out
}

// TestLevel0Quarters: a level-0 tile is stored as its 64-hash quarters,
// each its own value of at most 2 KiB (a proof's range read fetches one),
// and read back whole, as a range and in a batch of tiles exactly as
// written, as it grows; a whole level-0 tile of a folder written before
// quarters is still read, until the tile is written again as quarters.
func TestLevel0Quarters(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(kv ...[]byte) {
		t.Helper()
		if err := s.db.Update(func(txn *badger.Txn) error {
			for i := 0; i < len(kv); i += 2 {
				if err := txn.Set(kv[i], kv[i+1]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(tiles ...storage.Tile) {
		t.Helper()
		for _, kv := range writes(&storage.Batch{Tiles: tiles, Edge: []byte("e"), Checkpoint: []byte("c")}) {
			put(kv[0], kv[1])
		}
	}
	check := func(index uint64, want []byte) {
		t.Helper()
		got, err := s.Tile(ctx, 0, index)
		if err != nil || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("Tile(0, %d) = %d bytes, %v; want %d bytes", index, len(got), err, len(want))
		}
		all, err := s.Tiles(ctx, 0, index, 1)
		if err != nil || !bytes.Equal(all[0], want) || (all[0] == nil) != (want == nil) {
			t.Fatalf("Tiles(0, %d, 1) = %d bytes, %v; want %d bytes", index, len(all[0]), err, len(want))
		}
		for from := 0; from < merkle.TileWidth; from += 64 {
			got, err := s.TileRange(ctx, 0, index, from, from+64)
			w := want[min(from*merkle.HashSize, len(want)):min((from+64)*merkle.HashSize, len(want))]
			if err != nil || !bytes.Equal(got, w) {
				t.Fatalf("TileRange(0, %d, %d, %d) = %d bytes, %v; want %d bytes", index, from, from+64, len(got), err, len(w))
			}
		}
		if got, err := s.TileRange(ctx, 0, index, 60, 140); err != nil || !bytes.Equal(got, want[min(60*32, len(want)):min(140*32, len(want))]) {
			t.Fatalf("TileRange(0, %d, 60, 140) = %d bytes, %v", index, len(got), err)
		}
	}
	for _, n := range []int{1, 63, 64, 65, 128, 200, 256} {
		data := hashes(0, n)
		commit(storage.Tile{Level: 0, Index: 3, Data: data})
		check(3, data)
		for q := range 4 {
			v, err := s.get(quarterKey(3, q))
			if err != nil || len(v) > quarterSize || (v != nil) != (q*64 < n) {
				t.Fatalf("%d hashes: quarter %d holds %d bytes (%v)", n, q, len(v), err)
			}
		}
		if v, _ := s.get(tileKey(0, 3)); v != nil {
			t.Fatalf("%d hashes: the whole tile was written too", n)
		}
	}
	check(4, nil)

	// A folder from before quarters: tile 5 whole, partial.
	old := hashes(1000, 100)
	put(tileKey(0, 5), old)
	check(5, old)
	all, err := s.Tiles(ctx, 0, 3, 3)
	if err != nil || !bytes.Equal(all[0], hashes(0, 256)) || all[1] != nil || !bytes.Equal(all[2], old) {
		t.Fatalf("Tiles(0, 3, 3): %d, %d, %d bytes, %v", len(all[0]), len(all[1]), len(all[2]), err)
	}
	// It grows in the new code: the quarters win over the stale whole tile.
	grown := hashes(1000, 180)
	commit(storage.Tile{Level: 0, Index: 5, Data: grown})
	check(5, grown)
	// Other levels stay whole.
	commit(storage.Tile{Level: 1, Index: 5, Data: grown})
	if v, err := s.Tile(ctx, 1, 5); err != nil || !bytes.Equal(v, grown) {
		t.Fatalf("Tile(1, 5) = %d bytes, %v", len(v), err)
	}
}

// TestCommitKeepsFullQuarters: as a level-0 tile grows batch by batch
// through Commit, a quarter already stored full is not written again (its
// version stays that of the batch that filled it), while the growing one
// is; and the tile reads back as the last batch wrote it.
func TestCommitKeepsFullQuarters(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	edgeOf := func(n int) []byte {
		hs := make([]merkle.Hash, n)
		for i := range hs {
			hs[i] = merkle.LeafHash([]byte{byte(i), byte(i >> 8)})
		}
		b, _ := merkle.NewBuilder(merkle.NewEdge(), nil)
		if err := b.AppendBatch(hs); err != nil {
			t.Fatal(err)
		}
		out, _ := b.Edge().MarshalBinary()
		return out
	}
	version := func(q int) uint64 {
		var v uint64
		if err := s.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(quarterKey(0, q))
			if err == nil {
				v = item.Version()
			}
			return err
		}); err != nil {
			t.Fatalf("quarter %d: %v", q, err)
		}
		return v
	}
	var filled [4]uint64
	size := 0
	for _, n := range []int{40, 64, 100, 128, 129, 256} {
		leaves := make([][]byte, n-size)
		for i := range leaves {
			leaves[i] = []byte{byte(size + i)}
		}
		b := &storage.Batch{From: uint64(size), Leaves: leaves, Tiles: []storage.Tile{{Level: 0, Index: 0, Data: hashes(0, n)}},
			Edge: edgeOf(n), Checkpoint: []byte("c")}
		if err := s.Commit(ctx, b); err != nil {
			t.Fatalf("%d hashes: %v", n, err)
		}
		prev := size
		size = n
		if got, err := s.Tile(ctx, 0, 0); err != nil || !bytes.Equal(got, hashes(0, n)) {
			t.Fatalf("%d hashes: Tile = %d bytes, %v", n, len(got), err)
		}
		for q := 0; q*64 < n; q++ {
			v := version(q)
			if wasFull := q*64+64 <= prev; !wasFull {
				filled[q] = v // written by this batch
			} else if v != filled[q] {
				t.Fatalf("%d hashes: full quarter %d written again (version %d, filled at %d)", n, q, v, filled[q])
			}
		}
	}
}
