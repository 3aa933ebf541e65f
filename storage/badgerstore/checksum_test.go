package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/custodylog/custody/storage"
)

// tableFolder makes a data folder whose records sit in table files (a
// clean Close flushes the memtable into one), and returns the largest.
func tableFolder(t *testing.T) (dir, sst string) {
	t.Helper()
	dir = t.TempDir()
	s, err := Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	edge := make([]byte, 8) // the edge of an empty tree
	val := []byte(strings.Repeat("r", 200))
	for b := 0; b < 20; b++ {
		batch := &storage.Batch{Edge: edge, Checkpoint: []byte("cp")}
		for i := 0; i < 500; i++ {
			batch.Records = append(batch.Records, storage.Record{Key: fmt.Sprintf("rec/%05d", b*500+i), Value: val})
		}
		if err := s.Commit(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table file after a clean close")
	}
	size := func(p string) int64 { st, _ := os.Stat(p); return st.Size() }
	sort.Slice(ssts, func(i, j int) bool { return size(ssts[i]) > size(ssts[j]) })
	return dir, ssts[0]
}

// xor64 inverts 64 bytes of path at off.
func xor64(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 64)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedTableRefused: 64 bytes inverted inside a data block of a
// table file (not its index, whose checksum Badger always checked). A
// read-write open must fail and name the file; a read-only open must
// report it as damage (so that a ledger refuses to serve it, and signs
// nothing over it), and reading every record must not panic (Badger reads
// a damaged block's keys as absent: the damage report is what tells).
func TestDamagedTableRefused(t *testing.T) {
	dir, sst := tableFolder(t)
	st, _ := os.Stat(sst)
	xor64(t, sst, st.Size()/4)

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	damage := strings.Join(ro.Damaged(), "; ")
	for i := 0; i < 10000; i++ {
		ro.Record(context.Background(), fmt.Sprintf("rec/%05d", i))
	}
	if d := strings.Join(ro.Diagnose(), "; "); !strings.Contains(d, filepath.Base(sst)) {
		t.Errorf("Diagnose does not name the damaged table: %q", d)
	}
	ro.Close()
	if !strings.Contains(damage, filepath.Base(sst)) {
		t.Errorf("a read-only open does not report the damaged table %s (damage: %q)", filepath.Base(sst), damage)
	}

	s, err := Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
	if err == nil {
		s.Close()
		t.Fatal("a folder with a damaged table file opened read-write")
	}
	var oe *OpenError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), filepath.Base(sst)) {
		t.Fatalf("want an OpenError naming %s, got %v", filepath.Base(sst), err)
	}
	t.Logf("refused: %v", err)
}

// BenchmarkCheckTables measures what checking every table file costs an
// open: the tables of CUSTODY_TABLES_DIR (a data folder, such as the
// ledger benchmarks' CUSTODY_BENCH_DIR/x), or 150,000 400-byte records.
func BenchmarkCheckTables(b *testing.B) {
	if d := os.Getenv("CUSTODY_TABLES_DIR"); d != "" {
		benchCheckTables(b, filepath.Join(d, "db"))
		return
	}
	dir := b.TempDir()
	s, err := Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	edge := make([]byte, 8)
	val := make([]byte, 400)
	for n := 0; n < 150; n++ {
		batch := &storage.Batch{Edge: edge, Checkpoint: []byte("cp")}
		for i := 0; i < 1000; i++ {
			copy(val, fmt.Sprintf("%08d%08d", n, i)) // not all alike: Snappy must not shrink them away
			for j := 16; j < len(val); j++ {
				val[j] = byte(j*7 + i + n)
			}
			batch.Records = append(batch.Records, storage.Record{Key: fmt.Sprintf("rec/%03d/%04d", n, i), Value: append([]byte(nil), val...)})
		}
		if err := s.Commit(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	benchCheckTables(b, filepath.Join(dir, "db"))
}

func benchCheckTables(b *testing.B, db string) {
	var total int64
	ssts, _ := filepath.Glob(filepath.Join(db, "*.sst"))
	for _, p := range ssts {
		st, _ := os.Stat(p)
		total += st.Size()
	}
	b.SetBytes(total)
	b.ReportMetric(float64(total)/(1<<20), "MiB-tables")
	bo := badgerOptions(db, Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := checkTables(db, bo, nil, nil); len(d) > 0 {
			b.Fatal(d)
		}
	}
}

// TestVerifiedTablesNotReadAgain: a read-write open records the table
// files it found whole (tables.verified), and the next open, in another
// process as after a restart, reads none of them again; a table damaged
// after that record (a write changes its change time) is read and
// refused all the same.
func TestVerifiedTablesNotReadAgain(t *testing.T) {
	dir, sst := tableFolder(t)
	ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
	open := func() (*Store, int64, error) {
		checkedTables = &tableSet{m: map[tableID]bool{}} // as in a new process
		before := tablesRead.Load()
		s, err := Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
		return s, tablesRead.Load() - before, err
	}
	s, read, err := open()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if read != int64(len(ssts)) {
		t.Fatalf("the first open read %d table files, want all %d", read, len(ssts))
	}
	if n := len(loadVerified(dir).m); n != len(ssts) {
		t.Fatalf("%s records %d tables, want %d", verifiedName, n, len(ssts))
	}
	s, read, err = open()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if read != 0 {
		t.Fatalf("an open after a clean one read %d table files again, want 0", read)
	}

	st, _ := os.Stat(sst)
	xor64(t, sst, st.Size()/4)
	s, read, err = open()
	if err == nil {
		s.Close()
		t.Fatal("a table damaged after it was recorded as whole opened read-write")
	}
	var oe *OpenError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), filepath.Base(sst)) || read != 1 {
		t.Fatalf("want an OpenError naming %s after reading 1 table, got %v after %d", filepath.Base(sst), err, read)
	}

	// A record that does not parse means every table is read.
	if err := os.WriteFile(filepath.Join(dir, verifiedName), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(loadVerified(dir).m); n != 0 {
		t.Fatalf("a damaged record gave %d tables", n)
	}
}

// TestVerifiedRecordFormat reads testdata/tables.verified, the record as
// docs/FORMATS.md gives it: each line's name, device, inode, size,
// modification and change times.
func TestVerifiedRecordFormat(t *testing.T) {
	s := loadVerified("testdata")
	want := []tableID{
		{dev: 64769, ino: 1311798, size: 8388608, mtime: 1764641234123456789, ctime: 1764641234123456789},
		{dev: 64769, ino: 1311799, size: 4194304, mtime: 1764641235000000000, ctime: 1764641235000000001},
	}
	if len(s.m) != len(want) {
		t.Fatalf("read %d tables, want %d: %v", len(s.m), len(want), s.m)
	}
	for _, id := range want {
		if !s.has(id) {
			t.Errorf("missing %+v", id)
		}
	}
}
