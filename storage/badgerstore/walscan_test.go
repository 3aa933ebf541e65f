package badgerstore

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// logWithEntry is a log file's bytes: a header, then one entry (not in a
// transaction, as in a value log) whose checksum ends in two zero bytes.
// It returns the bytes and the entry's end.
func logWithEntry(t *testing.T) ([]byte, int64) {
	t.Helper()
	header := make([]byte, logHeaderSize)
	for i := range header {
		header[i] = byte(i + 1)
	}
	key := append([]byte("medge"), 0, 0, 0, 0, 0, 0, 0, 1)
	for n := uint32(0); n < 1<<24; n++ {
		val := binary.BigEndian.AppendUint32([]byte("tile bytes "), n)
		e := []byte{0, 0}
		e = binary.AppendUvarint(e, uint64(len(key)))
		e = binary.AppendUvarint(e, uint64(len(val)))
		e = binary.AppendUvarint(e, 0)
		e = append(append(e, key...), val...)
		sum := crc32.Checksum(e, castagnoli)
		if sum&0xffff != 0 {
			continue
		}
		e = binary.BigEndian.AppendUint32(e, sum)
		data := append(header, e...)
		return data, int64(len(data))
	}
	t.Fatal("no value gives a checksum ending in zeros")
	return nil, 0
}

// TestCutKeepsEntryEndingInZeros: a log whose last entry's checksum ends
// in zero bytes, followed by the zeros of a preallocated file. Where the
// file's last non-zero byte is is not where its data ends: the scratch
// copy must keep the whole entry and report no cut (it once cut the last
// entry, about one open in 256, and the copy then lacked a committed tile).
func TestCutKeepsEntryEndingInZeros(t *testing.T) {
	data, end := logWithEntry(t)
	dir := t.TempDir()
	from, to := filepath.Join(dir, "000001.vlog"), filepath.Join(dir, "copy.vlog")
	if err := os.WriteFile(from, append(data, make([]byte, 4096)...), 0o600); err != nil {
		t.Fatal(err)
	}
	dataEnd, err := copySparse(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if dataEnd >= end {
		t.Fatalf("the test's entry does not end in zeros (data end %d, entry end %d)", dataEnd, end)
	}
	s := &scratch{dir: dir}
	if err := s.cut(from, to, dataEnd); err != nil {
		t.Fatal(err)
	}
	if len(s.cuts) > 0 || len(s.damage) > 0 {
		t.Fatalf("a whole entry was taken for a torn one: cuts %q, damage %q", s.cuts, s.damage)
	}
	st, err := os.Stat(to)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != end {
		t.Fatalf("the copy was cut to %d bytes, want the entry's end %d", st.Size(), end)
	}
}
