package badgerstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/custodylog/custody/storage"
)

// allocated is how many bytes of path have blocks.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestLogsAllocatedAhead: through enough commits that Badger starts
// several new write-ahead logs, after every commit the write-ahead log
// Badger will create next already exists, empty, with its blocks
// allocated, and the one being written has every block; the value log has
// blocks past what was written. Reopened, the store holds every record,
// and the empty log made ahead does not stop Badger's open.
func TestLogsAllocatedAhead(t *testing.T) {
	dir := t.TempDir()
	open := func() *Store {
		s, err := Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	db := filepath.Join(dir, "db")
	edge := make([]byte, 8)
	small := make([]byte, 1000)
	big := make([]byte, 3000)
	const batches, per = 400, 100
	seen := map[int]bool{}
	for b := 0; b < batches; b++ {
		batch := &storage.Batch{Edge: edge, Checkpoint: []byte("cp")}
		for i := 0; i < per; i++ {
			v := small
			if i%4 == 0 {
				v = big
			}
			batch.Records = append(batch.Records, storage.Record{Key: fmt.Sprintf("r/%04d/%03d", b, i), Value: v})
		}
		if err := s.Commit(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		s.pre.mu.Lock()
		next, cur, walHeld, vlog, held := s.pre.nextMem, s.pre.curMem, s.pre.walHeld, s.pre.vlogFid, s.pre.vlogHeld
		walEnd, vlogEnd := s.pre.walEnd, s.pre.vlogEnd
		s.pre.mu.Unlock()
		seen[next] = true
		p := filepath.Join(db, memName(next))
		st, err := os.Stat(p)
		if err != nil || st.Size() != 0 || allocated(t, p) < memAhead {
			t.Fatalf("batch %d: the next write-ahead log %s is not made ahead (%v, %v bytes allocated)", b, p, err, allocated(t, p))
		}
		if a := allocated(t, filepath.Join(db, memName(cur))); a < min(walHeld, memFileSize) {
			t.Fatalf("batch %d: the write-ahead log being written, %d, has %d bytes allocated, %d expected", b, cur, a, walHeld)
		}
		// The counts bound what Badger wrote (every tenth batch: reading
		// the logs is slow).
		for _, c := range []struct {
			path  string
			bound int64
		}{{filepath.Join(db, memName(cur)), walEnd}, {filepath.Join(db, vlogName(vlog)), vlogEnd}} {
			if b%10 != 0 {
				break
			}
			// Read a little past the bound: entries there would show.
			f, err := os.Open(c.path)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, c.bound+256<<10)
			n, _ := f.ReadAt(data, 0)
			f.Close()
			if end := scanLog(data[:n], int64(n)).validEnd; end > c.bound {
				t.Fatalf("batch %d: %s holds %d bytes, counted at most %d", b, c.path, end, c.bound)
			}
		}
		if a := allocated(t, filepath.Join(db, vlogName(vlog))); a < held {
			t.Fatalf("batch %d: value log %d: %d bytes allocated, %d expected", b, vlog, a, held)
		}
	}
	if len(seen) < 3 {
		t.Fatalf("Badger started only %d write-ahead logs: the test did not rotate them", len(seen))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	for b := 0; b < batches; b++ {
		for i := 0; i < per; i += 7 {
			v, err := s.Record(context.Background(), fmt.Sprintf("r/%04d/%03d", b, i))
			if err != nil || v == nil {
				t.Fatalf("record %d/%d after reopening: %v %v", b, i, v == nil, err)
			}
		}
	}
}

// TestClosedFolderOpensInBadger: a store closed cleanly leaves no empty
// write-ahead log made ahead, so Badger's own Open (an operator's badger
// tool, or a test tampering with a record) opens the folder and reads
// what was committed; a log made ahead and left by a crash is removed by
// the next Open of the store.
func TestClosedFolderOpensInBadger(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	s, err := Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	batch := &storage.Batch{Edge: make([]byte, 8), Checkpoint: []byte("cp"),
		Records: []storage.Record{{Key: "r/one", Value: []byte("value one")}}}
	if err := s.Commit(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	s.pre.mu.Lock()
	next := s.pre.nextMem
	s.pre.mu.Unlock()
	if st, err := os.Stat(filepath.Join(db, memName(next))); err != nil || st.Size() != 0 {
		t.Fatalf("the write-ahead log %d is not made ahead while the store is open: %v", next, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && filepath.Ext(e.Name()) == ".mem" && info.Size() == 0 {
			t.Fatalf("closed cleanly, the folder still holds the empty write-ahead log %s", e.Name())
		}
	}
	bdb, err := badger.Open(badger.DefaultOptions(db).WithLogger(nil))
	if err != nil {
		t.Fatalf("Badger's own Open of a folder closed cleanly: %v", err)
	}
	if err := bdb.View(func(txn *badger.Txn) error {
		_, err := txn.Get(stateKey("r/one"))
		return err
	}); err != nil {
		t.Errorf("Badger's own Open does not read what was committed: %v", err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}

	// As a crash leaves it: the next write-ahead log made ahead, empty.
	ents, _ = os.ReadDir(db)
	maxMem := 0
	for _, e := range ents {
		var fid int
		if _, err := fmt.Sscanf(e.Name(), "%05d.mem", &fid); err == nil {
			maxMem = max(maxMem, fid)
		}
	}
	left := filepath.Join(db, memName(maxMem+1))
	if err := allocateRange(left, 0, memAhead, true); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{BallastBytes: -1, ReserveBytes: 1 << 20})
	if err != nil {
		t.Fatalf("opening a folder with a write-ahead log made ahead, left by a crash: %v", err)
	}
	defer s.Close()
	if v, err := s.Record(context.Background(), "r/one"); err != nil || string(v) != "value one" {
		t.Fatalf("record after reopening: %q %v", v, err)
	}
}
