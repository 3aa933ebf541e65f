package badgerstore_test

import (
	"strings"
	"testing"

	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/badgerstore"
	"github.com/custodylog/custody/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Store(t, func(t *testing.T) func() storage.Store {
		dir := t.TempDir()
		return func() storage.Store {
			s, err := badgerstore.Open(dir, badgerstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

func TestLedgerConformance(t *testing.T) {
	storagetest.Ledger(t, func(t *testing.T) string { return t.TempDir() })
}

// TestMemTableBytes: a store opened with small memtables bounds its
// transactions by them (Badger refuses one over 15% of a memtable), and
// one too small for Badger is refused with the size and the minimum.
func TestMemTableBytes(t *testing.T) {
	def, err := badgerstore.Open(t.TempDir(), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	small, err := badgerstore.Open(t.TempDir(), badgerstore.Options{MemTableBytes: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if got, want := small.Budget(), 512<<10*15/100*9/10; got != want {
		t.Errorf("budget with 512 KiB memtables: %d, want %d", got, want)
	}
	if got, want := def.Budget(), 12<<20*15/100*9/10; got != want {
		t.Errorf("budget with the default memtables: %d, want %d", got, want)
	}
	_, err = badgerstore.Open(t.TempDir(), badgerstore.Options{MemTableBytes: 4096})
	if err == nil || !strings.Contains(err.Error(), "a memtable of 4096 bytes: want at least 262144") {
		t.Fatalf("a 4 KiB memtable: %v", err)
	}
}
