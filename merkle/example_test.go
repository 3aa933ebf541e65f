package merkle_test

import (
	"crypto/ed25519"
	"fmt"

	"github.com/custodylog/custody/merkle"
)

// tileStore is a stand-in for the ledger's storage: one blob per tile,
// overwritten as a partial tile grows.
type tileStore map[[2]uint64][]byte

func (s tileStore) ReadTile(level, index uint64) ([]byte, error) {
	b, ok := s[[2]uint64{level, index}]
	if !ok {
		return nil, fmt.Errorf("no tile %d/%d", level, index)
	}
	return b, nil
}

// A batch: append leaf hashes, then write the changed tiles and the edge
// together.
func ExampleBuilder() {
	store := tileStore{}
	b, err := merkle.NewBuilder(merkle.NewEdge(), store)
	if err != nil {
		panic(err)
	}
	for i := range 300 {
		b.Append(merkle.LeafHash(fmt.Appendf(nil, "leaf %d", i)))
	}
	for _, t := range b.Flush() {
		store[[2]uint64{t.Level, t.Index}] = t.Data
		fmt.Println(t.Ref().Path(), len(t.Data))
	}
	edge, _ := b.Edge().MarshalBinary()
	fmt.Println("size", b.Size(), "edge bytes", len(edge))
	// Output:
	// tile/0/000 8192
	// tile/0/001.p/44 1408
	// tile/1/000.p/1 32
	// size 300 edge bytes 136
}

func ExampleInclusionProof() {
	store := tileStore{}
	b, _ := merkle.NewBuilder(merkle.NewEdge(), store)
	leaf := []byte("hello")
	for i := range 1000 {
		if i == 123 {
			b.Append(merkle.LeafHash(leaf))
			continue
		}
		b.Append(merkle.LeafHash(fmt.Appendf(nil, "leaf %d", i)))
	}
	for _, t := range b.Flush() {
		store[[2]uint64{t.Level, t.Index}] = t.Data
	}

	proof, err := merkle.InclusionProof(store, 123, 1000)
	if err != nil {
		panic(err)
	}
	err = merkle.VerifyInclusion(123, 1000, merkle.LeafHash(leaf), proof, b.Root())
	fmt.Println(len(proof), "hashes, verified:", err == nil)
	// Output: 10 hashes, verified: true
}

func ExampleSignCheckpoint() {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use a real key
	const origin = "custody.example/log"
	signer, _ := merkle.NewSigner(origin, key)
	vkey, _ := merkle.VerifierKey(origin, key.Public().(ed25519.PublicKey))

	cp, err := merkle.SignCheckpoint(origin, 0, merkle.EmptyRoot, signer)
	if err != nil {
		panic(err)
	}
	c, err := merkle.OpenCheckpoint(cp, origin, vkey)
	fmt.Println(c.Origin, c.Size, c.Root, err)
	// Output: custody.example/log 0 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= <nil>
}

func ExampleParseTilePath() {
	for _, p := range []string{"tile/0/x001/x234/067", "tile/1/x001/x234/067.p/8", "tile/entries/000.p/3", "tile/0/x000/067"} {
		t, err := merkle.ParseTilePath(p)
		fmt.Printf("%+v %v\n", t, err)
	}
	// Output:
	// {Level:0 Index:1234067 Width:256 Entries:false} <nil>
	// {Level:1 Index:1234067 Width:8 Entries:false} <nil>
	// {Level:0 Index:0 Width:3 Entries:true} <nil>
	// {Level:0 Index:0 Width:0 Entries:false} malformed tile path "tile/0/x000/067": index has a leading zero group
}

func ExampleNewTiles() {
	for _, t := range merkle.NewTiles(0, 70000)[272:] {
		fmt.Println(t.Path())
	}
	// Output:
	// tile/0/272
	// tile/0/273.p/112
	// tile/1/000
	// tile/1/001.p/17
	// tile/2/000.p/1
}
