package badgerstore

import (
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4/skl"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
)

// TestWeigh: Weigh, which counts without building keys, weighs a batch
// exactly as the writes Commit makes, for batches with every kind of
// write, values on both sides of the value threshold, records deleted
// (nil: not written), and the first batch (with the origin).
func TestWeigh(t *testing.T) {
	fromWrites := func(b *storage.Batch) int {
		var bytes int
		w := writes(b)
		for _, kv := range w {
			v := len(kv[1])
			if v >= valueThreshold {
				v = 12
			}
			bytes += len(kv[0]) + v + 2 + 10
		}
		return max(bytes, len(w)*skl.MaxNodeSize)
	}
	big := []byte(strings.Repeat("x", valueThreshold))
	small := []byte(strings.Repeat("y", valueThreshold-1))
	batches := map[string]*storage.Batch{
		"empty": {},
		"first": {Origin: "example.com/log", Edge: small, Checkpoint: small},
		"mixed": {From: 1 << 40,
			Leaves: [][]byte{small, big, nil},
			Dedup:  []storage.Dedup{{Index: 1}, {Index: 2}},
			Tiles: []storage.Tile{{Level: 0, Index: 7, Data: big}, {Level: 3, Index: 1, Data: small},
				{Level: 0, Index: 8, Data: make([]byte, merkle.FullTileSize)}, {Level: 0, Index: 9, Data: make([]byte, 130*merkle.HashSize)},
				{Level: 0, Index: 10, Data: small}},
			Records: []storage.Record{{Key: "wf/a", Value: small}, {Key: "gone", Value: nil}, {Key: "~wfidx/a/00000000", Value: big}},
			Edge:    big, Checkpoint: small},
	}
	for i := 0; i < 3000; i += 97 {
		b := &storage.Batch{Edge: small, Checkpoint: small}
		for j := 0; j < i; j++ {
			b.Leaves = append(b.Leaves, small[:j%len(small)])
			b.Records = append(b.Records, storage.Record{Key: strings.Repeat("k", j%50), Value: []byte("v")})
		}
		batches["many"+strings.Repeat("+", i/97)] = b
	}
	for name, b := range batches {
		if got, want := (&Store{}).Weigh(b), fromWrites(b); got != want {
			t.Errorf("%.20s: Weigh %d, the writes weigh %d", name, got, want)
		}
	}
}

// TestWritesKeys: the keys and dedup values writes cuts from one buffer
// are those the readers look up (leafKey, hashKey, tileKey, stateKey,
// be64), and none shares bytes another can overwrite.
func TestWritesKeys(t *testing.T) {
	tile70 := make([]byte, 70*merkle.HashSize)
	for i := range tile70 {
		tile70[i] = byte(i / merkle.HashSize)
	}
	b := &storage.Batch{From: 1<<40 + 3,
		Leaves: [][]byte{[]byte("a"), []byte("b")},
		Dedup:  []storage.Dedup{{Hash: [32]byte{1}, Index: 7}, {Hash: [32]byte{2}, Index: 1 << 50}},
		Tiles: []storage.Tile{{Level: 0, Index: 9, Data: []byte("t0")}, {Level: 2, Index: 1 << 33, Data: []byte("t2")},
			{Level: 0, Index: 1 << 34, Data: tile70}},
		Records: []storage.Record{{Key: "wf/a", Value: []byte("1")}, {Key: "gone"}, {Key: "~wfidx/a", Value: []byte("2")}},
		Edge:    []byte("e"), Checkpoint: []byte("c")}
	want := [][2][]byte{
		{leafKey(b.From), b.Leaves[0]}, {leafKey(b.From + 1), b.Leaves[1]},
		{hashKey(b.Dedup[0].Hash), be64(7)}, {hashKey(b.Dedup[1].Hash), be64(1 << 50)},
		// A malformed level-0 tile stays whole; a well-formed one of 70
		// hashes is written as quarters 0 (64 hashes) and 1 (6).
		{tileKey(0, 9), b.Tiles[0].Data}, {tileKey(2, 1<<33), b.Tiles[1].Data},
		{quarterKey(1<<34, 0), tile70[:quarterSize]}, {quarterKey(1<<34, 1), tile70[quarterSize:]},
		{stateKey("wf/a"), []byte("1")}, {stateKey("~wfidx/a"), []byte("2")},
		{kEdge, b.Edge}, {kCheckpoint, b.Checkpoint},
	}
	got := writes(b)
	if len(got) != len(want) {
		t.Fatalf("%d writes, want %d", len(got), len(want))
	}
	for i := range got {
		_ = append(got[i][0], 0xff) // must not reach the next key
	}
	for i := range want {
		if string(got[i][0]) != string(want[i][0]) || string(got[i][1]) != string(want[i][1]) {
			t.Errorf("write %d: %q=%q, want %q=%q", i, got[i][0], got[i][1], want[i][0], want[i][1])
		}
	}
}
