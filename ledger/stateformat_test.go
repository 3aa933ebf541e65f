package ledger

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestOldStateFormatRefused: a data folder whose authority state was
// written in another format (format 1 had no format record, and kept
// STOPs and held grants as lists) is refused at open with a sentence that
// says what to do, instead of being misread.
func TestOldStateFormatRefused(t *testing.T) {
	w := newWorld(t, Options{})
	w.enroll(newActor(t, "user:alice"))
	w.l.Close()
	opts := Options{Clock: w.clock.Now}
	l, err := Open(w.dir, opts)
	if err != nil {
		t.Fatalf("reopening a folder of this format: %v", err)
	}
	l.Close()
	db, err := badger.Open(badgerOptions(filepath.Join(w.dir, "db"), opts))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(stateKey("format")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	w.l, err = Open(w.dir, opts)
	if err == nil {
		t.Fatal("opened a data folder of state format 1")
	}
	if !strings.Contains(err.Error(), "format 1") || !strings.Contains(err.Error(), w.dir) {
		t.Errorf("error %q does not name the folder and its format", err)
	}
	w.l = l // closed already; Close again is harmless
}
