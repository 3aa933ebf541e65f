package merkle

import (
	"encoding/binary"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkAppend measures leaf hashes through a Builder, in batches of 1000
// with a Flush (tile output) per batch, as the ledger uses it.
func BenchmarkAppend(b *testing.B) {
	hashes := make([]Hash, 1000)
	for i := range hashes {
		hashes[i] = LeafHash(testLeaf(uint64(i)))
	}
	bl, _ := NewBuilder(NewEdge(), memTiles{})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := bl.AppendBatch(hashes); err != nil {
			b.Fatal(err)
		}
		bl.Flush()
	}
	b.ReportMetric(float64(b.N)*float64(len(hashes))/b.Elapsed().Seconds(), "leaves/s")
	b.ReportMetric(0, "ns/op")
}

var benchBig = flag.Bool("merkle.big", false, "also benchmark inclusion proofs in a 10M-leaf tree (~0.5 GB)")

var (
	benchMu    sync.Mutex
	benchTrees = map[uint64]memTiles{}
)

// benchTree returns the tiles of a tree of n pseudo-random leaf hashes, built
// once per process. (A proof's cost does not depend on the leaves.)
func benchTree(b *testing.B, n uint64) memTiles {
	benchMu.Lock()
	defer benchMu.Unlock()
	if m, ok := benchTrees[n]; ok {
		return m
	}
	m := memTiles{}
	bl, _ := NewBuilder(NewEdge(), m)
	r := newRand(n)
	hs := make([]Hash, 1<<16)
	for bl.Size() < n {
		batch := hs[:min(uint64(len(hs)), n-bl.Size())]
		for i := range batch {
			for j := 0; j < HashSize; j += 8 {
				binary.LittleEndian.PutUint64(batch[i][j:], r.next())
			}
		}
		if err := bl.AppendBatch(batch); err != nil {
			b.Fatal(err)
		}
		for _, t := range bl.Flush() {
			m[tileKey{t.Level, t.Index}] = t.Data
		}
	}
	benchTrees[n] = m
	return m
}

// BenchmarkInclusionProof measures inclusion proofs of random leaves in a
// tree of 1M leaves (and 10M with -merkle.big) held in an in-memory tile map:
// without a cache, and with a cache large enough for every tile (warmed up),
// serially and in parallel.
func BenchmarkInclusionProof(b *testing.B) {
	sizes := []uint64{1_000_000}
	if *benchBig {
		sizes = append(sizes, 10_000_000)
	}
	for _, size := range sizes {
		m := benchTree(b, size)
		run := func(b *testing.B, p *Prover, parallel bool) {
			b.ReportAllocs()
			if parallel {
				var seed atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					r := newRand(seed.Add(1))
					for pb.Next() {
						if _, err := p.InclusionProof(r.intn(size), size); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				r := newRand(1)
				for b.Loop() {
					if _, err := p.InclusionProof(r.intn(size), size); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
		}
		name := fmt.Sprintf("size=%dM", size/1_000_000)
		b.Run(name+"/nocache", func(b *testing.B) { run(b, NewProver(m, 0), false) })
		warm := NewProver(m, len(m))
		for i := uint64(0); i < size; i += TileWidth {
			warm.InclusionProof(i, size)
		}
		b.Run(name+"/cache", func(b *testing.B) { run(b, warm, false) })
		b.Run(name+"/cache/parallel", func(b *testing.B) { run(b, warm, true) })
	}
}

// BenchmarkBatchProofs measures what a committed batch's answers cost: the
// inclusion proofs of its last 1,024 leaves in a tree of 1M, by the
// ledger's shared Prover (its cache keeps level-0 tiles from summaryLevel
// up) and by one Prover made by Over for the batch.
func BenchmarkBatchProofs(b *testing.B) {
	const size, batch = 1_000_000, 1024
	m := benchTree(b, size)
	shared := NewProver(m, len(m))
	for i := uint64(0); i < size; i += TileWidth {
		shared.InclusionProof(i, size)
	}
	run := func(b *testing.B, prover func() *Prover) {
		b.ReportAllocs()
		for b.Loop() {
			p := prover()
			for i := uint64(size - batch); i < size; i++ {
				if _, err := p.InclusionProof(i, size); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N*batch), "µs/proof")
	}
	b.Run("shared", func(b *testing.B) { run(b, func() *Prover { return shared }) })
	b.Run("over", func(b *testing.B) { run(b, func() *Prover { return shared.Over(m) }) })
}
