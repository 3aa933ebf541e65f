package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/storagetest"
)

// BenchmarkPointRead is one read the sequencer makes while it decides a
// submission, one after another: the dedup lookup of a hash that is not
// in the log (the common case) and an absent authority record. Each is a
// round trip to the server; docs/BENCHMARKS.md ("Appends: in process,
// over HTTP, log-only") says what they cost beside the batch cycle.
func BenchmarkPointRead(b *testing.B) {
	s := open(b, storagetest.PostgresURL(b))
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Acquire(ctx, "http://bench", 10*time.Second); err != nil {
		b.Fatal(err)
	}
	var h [32]byte
	b.Run("Dedup", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			binary.BigEndian.PutUint64(h[:], uint64(i))
			if _, _, err := s.Dedup(ctx, sha256.Sum256(h[:8])); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Record", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := s.Record(ctx, "bench/absent"); err != nil {
				b.Fatal(err)
			}
		}
	})
	var _ storage.Store = s
}
