package badgerstore

import (
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4/skl"

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
			Leaves:  [][]byte{small, big, nil},
			Dedup:   []storage.Dedup{{Index: 1}, {Index: 2}},
			Tiles:   []storage.Tile{{Level: 0, Index: 7, Data: big}, {Level: 3, Index: 1, Data: small}},
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
