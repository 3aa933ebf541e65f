package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
)

func open(t testing.TB, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Store(t, func(t *testing.T) func() storage.Store {
		url := storagetest.PostgresURL(t)
		return func() storage.Store {
			s := open(t, url)
			if l, err := s.Acquire(context.Background(), "http://test", 10*time.Second); err != nil || !l.Mine {
				t.Fatalf("acquiring the lease of a fresh store: %+v, %v", l, err)
			}
			return s
		}
	})
}

func TestLedgerConformance(t *testing.T) {
	storagetest.Ledger(t, func(t *testing.T) string { return storagetest.PostgresURL(t) })
}
