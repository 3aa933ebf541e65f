package storagetest

import (
	"github.com/custodylog/custody/merkle"
)

// edgeOf is a valid compact range of size n (of arbitrary hashes).
func edgeOf(n uint64) []byte {
	e := merkle.NewEdge()
	hs := make([]merkle.Hash, n)
	for i := range hs {
		hs[i] = merkle.LeafHash([]byte{byte(i), byte(i >> 8)})
	}
	b, _ := merkle.NewBuilder(e, nil)
	if err := b.AppendBatch(hs); err != nil {
		panic(err)
	}
	out, _ := b.Edge().MarshalBinary()
	return out
}

// Edge is a stand-in compact range of size n, for a batch a test commits
// at the store's seam (the store checks its size only).
func Edge(n uint64) []byte { return edgeOf(n) }
