package merkle

import (
	"encoding/binary"
	"fmt"
)

// MaxLeafSize is the largest leaf an entry bundle can carry: its length is a
// big-endian uint16 (C2SP tlog-tiles).
const MaxLeafSize = 1<<16 - 1

// AppendEntry appends leaf to an entry bundle: a big-endian uint16 length,
// then the leaf bytes (C2SP tlog-tiles, "Log entries"). It returns
// [ErrLeafTooLarge] for a leaf over [MaxLeafSize] bytes. It does not limit
// the number of entries; a bundle holds at most [TileWidth].
func AppendEntry(bundle, leaf []byte) ([]byte, error) {
	if len(leaf) > MaxLeafSize {
		return bundle, fmt.Errorf("%w: %d bytes, at most %d", ErrLeafTooLarge, len(leaf), MaxLeafSize)
	}
	bundle = binary.BigEndian.AppendUint16(bundle, uint16(len(leaf)))
	return append(bundle, leaf...), nil
}

// EncodeEntryBundle returns the entry bundle holding leaves, which must
// number 1 to [TileWidth], each at most [MaxLeafSize] bytes.
func EncodeEntryBundle(leaves [][]byte) ([]byte, error) {
	if len(leaves) == 0 || len(leaves) > TileWidth {
		return nil, fmt.Errorf("%w: %d entries, want 1..%d", ErrMalformedBundle, len(leaves), TileWidth)
	}
	n := 0
	for _, l := range leaves {
		n += 2 + len(l)
	}
	b := make([]byte, 0, n)
	for i, l := range leaves {
		var err error
		if b, err = AppendEntry(b, l); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
	}
	return b, nil
}

// DecodeEntryBundle splits an entry bundle into its leaves. It is strict: the
// bundle must hold 1 to [TileWidth] entries and nothing after the last one.
// The returned leaves alias data.
func DecodeEntryBundle(data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformedBundle)
	}
	var leaves [][]byte
	for off := 0; off < len(data); {
		if len(leaves) == TileWidth {
			return nil, fmt.Errorf("%w: more than %d entries", ErrMalformedBundle, TileWidth)
		}
		if len(data)-off < 2 {
			return nil, fmt.Errorf("%w: truncated length of entry %d at offset %d", ErrMalformedBundle, len(leaves), off)
		}
		n := int(binary.BigEndian.Uint16(data[off:]))
		off += 2
		if len(data)-off < n {
			return nil, fmt.Errorf("%w: entry %d at offset %d has length %d, only %d bytes left", ErrMalformedBundle, len(leaves), off-2, n, len(data)-off)
		}
		leaves = append(leaves, data[off:off+n:off+n])
		off += n
	}
	return leaves, nil
}
