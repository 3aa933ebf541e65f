package ledger

import "encoding/binary"

// Badger key layout. One byte of prefix, then fixed-width or free fields.
//
//	l <index u64>            leaf bytes
//	t <level u8> <index u64> hash tile (up to 256 hashes, grows in place)
//	h <dedup hash 32>        index of the leaf holding the decision
//	s <keyid hex> <seq u64>  (no longer written: an index nothing read; a
//	                         key's seq lives in its authority record)
//	a <state key>            authority state record (JSON)
//	m edge                   the tree's compact range
//	m checkpoint             the latest signed checkpoint
//	m origin                 the log's origin
const (
	pLeaf  = 'l'
	pTile  = 't'
	pHash  = 'h'
	pState = 'a'
)

var (
	kEdge       = []byte("medge")
	kCheckpoint = []byte("mcheckpoint")
	kOrigin     = []byte("morigin")
)

func leafKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = pLeaf
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

func tileKey(level, index uint64) []byte {
	k := make([]byte, 10)
	k[0] = pTile
	k[1] = byte(level)
	binary.BigEndian.PutUint64(k[2:], index)
	return k
}

func hashKey(h [32]byte) []byte {
	return append([]byte{pHash}, h[:]...)
}

func stateKey(key string) []byte {
	return append([]byte{pState}, key...)
}

func u64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

func be64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
