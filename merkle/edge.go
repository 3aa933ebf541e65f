package merkle

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/transparency-dev/merkle/compact"
)

// rangeFactory builds compact ranges over RFC 6962 SHA-256 node hashes.
var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

// A Node is a node of the tree that tiles store: the root of a perfect
// subtree at a tree level that is a multiple of [TileHeight].
type Node struct {
	Level uint64 // tree level, a multiple of TileHeight (0 for leaf hashes)
	Index uint64 // index of the node within its level
	Hash  Hash
}

// An Edge is the right edge of the tree of entries [0, Size()): the roots of
// the perfect subtrees that cover it, largest first (a compact range). It is
// all the state needed to append to the tree and to compute its root.
//
// The zero Edge is the empty tree. An Edge is not safe for concurrent use.
type Edge struct {
	r *compact.Range // nil means the empty range [0, 0)
}

// NewEdge returns the edge of the empty tree.
func NewEdge() *Edge { return &Edge{} }

func (e *Edge) rng() *compact.Range {
	if e.r == nil {
		e.r = rangeFactory.NewEmptyRange(0)
	}
	return e.r
}

// RestoreEdge returns the edge of the tree of the given size from its
// persisted hashes, as returned by [Edge.Hashes]: one hash per set bit of
// size, largest subtree first. It returns [ErrMalformedEdge] if the number of
// hashes does not match the size.
func RestoreEdge(size uint64, hashes []Hash) (*Edge, error) {
	if got, want := len(hashes), bits.OnesCount64(size); got != want {
		return nil, fmt.Errorf("%w: %d hashes for tree size %d, want %d", ErrMalformedEdge, got, size, want)
	}
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		h := hashes[i]
		hs[i] = h[:]
	}
	r, err := rangeFactory.NewRange(0, size, hs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEdge, err)
	}
	return &Edge{r: r}, nil
}

// ParseEdge decodes an edge serialised by [Edge.MarshalBinary].
func ParseEdge(data []byte) (*Edge, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, want at least 8", ErrMalformedEdge, len(data))
	}
	size := binary.BigEndian.Uint64(data)
	data = data[8:]
	if n := bits.OnesCount64(size); len(data) != n*HashSize {
		return nil, fmt.Errorf("%w: %d bytes of hashes for tree size %d, want %d", ErrMalformedEdge, len(data), size, n*HashSize)
	}
	hashes := make([]Hash, len(data)/HashSize)
	for i := range hashes {
		hashes[i] = Hash(data[i*HashSize:])
	}
	return RestoreEdge(size, hashes)
}

// MarshalBinary serialises the edge for persistence: the tree size as a
// big-endian uint64, then the hashes of [Edge.Hashes], 32 bytes each. It never
// fails.
func (e *Edge) MarshalBinary() ([]byte, error) {
	r := e.rng()
	b := make([]byte, 8, 8+len(r.Hashes())*HashSize)
	binary.BigEndian.PutUint64(b, r.End())
	for _, h := range r.Hashes() {
		b = append(b, h...)
	}
	return b, nil
}

// UnmarshalBinary replaces e with the edge decoded from data, as
// [ParseEdge] does.
func (e *Edge) UnmarshalBinary(data []byte) error {
	e2, err := ParseEdge(data)
	if err != nil {
		return err
	}
	*e = *e2
	return nil
}

// Size returns the number of entries in the tree.
func (e *Edge) Size() uint64 { return e.rng().End() }

// Hashes returns a copy of the edge's hashes: the roots of the perfect
// subtrees covering [0, Size()), largest (leftmost) first.
func (e *Edge) Hashes() []Hash {
	hs := e.rng().Hashes()
	out := make([]Hash, len(hs))
	for i, h := range hs {
		out[i] = Hash(h)
	}
	return out
}

// Root returns the RFC 6962 root hash of the tree, [EmptyRoot] if it is empty.
func (e *Edge) Root() Hash {
	root, err := e.rng().GetRootHash(nil)
	if err != nil { // unreachable: the range starts at 0
		panic("merkle: " + err.Error())
	}
	if root == nil {
		return EmptyRoot
	}
	return Hash(root)
}

// Clone returns an independent copy of e.
func (e *Edge) Clone() *Edge {
	e2, err := RestoreEdge(e.Size(), e.Hashes())
	if err != nil { // unreachable: e is well formed
		panic("merkle: " + err.Error())
	}
	return e2
}

// Append adds the leaf with the given leaf hash (see [LeafHash]) at index
// Size(). If stored is not nil, it is called, lowest level first, with every
// node that the append completes and that tiles store: the leaf hash itself
// and each new perfect subtree root at tree level 8, 16, ... Nodes at other
// levels, and ephemeral nodes of incomplete subtrees, are never reported.
func (e *Edge) Append(leafHash Hash, stored func(Node)) error {
	return e.AppendBatch([]Hash{leafHash}, stored)
}

// AppendBatch appends the leaves with the given leaf hashes in order, as
// [Edge.Append] does for each.
func (e *Edge) AppendBatch(leafHashes []Hash, stored func(Node)) error {
	return e.appendBatch(leafHashes, false, stored)
}

// appendBatch is AppendBatch; with summaries, stored is also called with
// each new node at tree level 6 (summaryLevel), for summary tiles.
func (e *Edge) appendBatch(leafHashes []Hash, summaries bool, stored func(Node)) error {
	r := e.rng()
	if uint64(len(leafHashes)) > math.MaxUint64-r.End() {
		return fmt.Errorf("%w: tree of size %d cannot grow by %d", ErrOutOfRange, r.End(), len(leafHashes))
	}
	var visit compact.VisitFn
	if stored != nil {
		visit = func(id compact.NodeID, h []byte) {
			if id.Level%TileHeight == 0 || summaries && id.Level == summaryLevel {
				stored(Node{Level: uint64(id.Level), Index: id.Index, Hash: Hash(h)})
			}
		}
	}
	// One backing array for the batch's leaf hashes; the range keeps
	// references to some of them.
	own := make([]Hash, len(leafHashes))
	copy(own, leafHashes)
	for i := range own {
		if err := r.Append(own[i][:], visit); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformedEdge, err)
		}
	}
	return nil
}
