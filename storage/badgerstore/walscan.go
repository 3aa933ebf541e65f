package badgerstore

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Badger's write-ahead logs (*.mem) and value logs (*.vlog) share one
// format: a 20-byte header, then entries
//
//	meta, userMeta byte; key length, value length, expiry: uvarints
//	key (the user key and 8 bytes of MaxUint64 - commit timestamp)
//	value
//	CRC-32C of all the above, 4 bytes big endian
//
// where the entries of one transaction carry meta bit 0x40 and are closed
// by an entry with bit 0x80 whose value is the timestamp in decimal.
// Opening a folder read-write, Badger keeps each such file up to the end
// of its last complete transaction and cuts the rest (memtable.go and
// value.go, logFile.iterate). scanLog finds that point the same way, so
// that custody can see, before Badger opens the folder, whether the cut
// would drop only what a crash leaves (a transaction torn at the end,
// never acknowledged) or transactions committed after it (damage).

const (
	maxLogKey     = 2048
	maxLogValue   = 16 << 20
	logHeaderSize = 20
	// maxLogEntry bounds one entry's bytes: its header (three uvarints and
	// two bytes), key, value and checksum.
	maxLogEntry = 2 + 3*binary.MaxVarintLen64 + maxLogKey + maxLogValue + 4
	bitTxn      = 1 << 6
	bitFinTxn   = 1 << 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logScan is what scanLog found in a log file.
type logScan struct {
	validEnd int64  // Badger keeps the file up to here
	lastTs   uint64 // the commit timestamp of the last complete transaction
	// later is the offset of a whole entry after validEnd committed by a
	// later transaction than the one that was cut (-1: none): the cut
	// would drop committed writes.
	later int64
}

// logEntry decodes the entry at off: its length and its key, or ok false
// if no whole entry with a valid checksum starts there.
func logEntry(data []byte, off int64) (n int64, meta byte, key, val []byte, ok bool) {
	b := data[off:]
	if len(b) < 2 {
		return 0, 0, nil, nil, false
	}
	meta = b[0]
	i := 2
	klen, c := binary.Uvarint(b[i:])
	if c <= 0 {
		return
	}
	i += c
	vlen, c := binary.Uvarint(b[i:])
	if c <= 0 {
		return
	}
	i += c
	_, c = binary.Uvarint(b[i:])
	if c <= 0 {
		return
	}
	i += c
	// custody's keys are short and its values at most a leaf or a tile;
	// Badger's own keys start with "!badger!".
	if klen < 9 || klen > maxLogKey || vlen > maxLogValue || uint64(i)+klen+vlen+4 > uint64(len(b)) {
		return
	}
	if k0 := b[i]; k0 != pLeaf && k0 != pTile && k0 != pQuarter && k0 != pHash && k0 != pState && k0 != 'm' && k0 != 's' && k0 != '!' {
		return
	}
	end := i + int(klen) + int(vlen)
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:]) {
		return
	}
	return int64(end + 4), meta, b[i : i+int(klen)], b[i+int(klen) : end], true
}

func keyTs(key []byte) uint64 {
	if len(key) <= 8 {
		return 0
	}
	return math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:])
}

// scanLog scans a write-ahead or value log's bytes (up to dataEnd, past
// which the file holds only zeros).
func scanLog(data []byte, dataEnd int64) logScan {
	s := logScan{validEnd: logHeaderSize, later: -1}
	if int64(len(data)) < logHeaderSize {
		return s
	}
	off := int64(logHeaderSize)
	var txn uint64
	for off < int64(len(data)) {
		n, meta, key, val, ok := logEntry(data, off)
		if !ok {
			break
		}
		off += n
		switch {
		case meta&bitTxn != 0:
			ts := keyTs(key)
			if txn == 0 {
				txn = ts
			}
			if ts != txn {
				goto cut
			}
		case meta&bitFinTxn != 0:
			if string(val) != uitoa(txn) {
				goto cut
			}
			s.validEnd, s.lastTs, txn = off, txn, 0
		default:
			if txn != 0 {
				goto cut
			}
			s.validEnd = off
		}
	}
cut:
	// Past the cut, a crash can have left only the rest of the one
	// transaction it tore (timestamp lastTs+1). A whole entry of a later
	// transaction there means committed writes would be dropped.
	for p := s.validEnd; p < dataEnd && p < int64(len(data)); p++ {
		if _, meta, key, _, ok := logEntry(data, p); ok && meta&(bitTxn|bitFinTxn) != 0 {
			if ts := keyTs(key); ts > s.lastTs+1 && s.lastTs > 0 {
				s.later = p
				break
			}
		}
	}
	return s
}

func uitoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}
