package badgerstore_test

import (
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
