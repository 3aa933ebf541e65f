package ledger

import (
	"context"
	"strings"
	"testing"

	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/badgerstore"
)

// TestOldStateFormatRefused: a data folder whose authority state was
// written in another format (format 1 kept STOPs and held grants as lists)
// is refused at open with a sentence that says so, instead of being
// misread.
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
	st, err := badgerstore.Open(w.dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Commit(ctx, &storage.Batch{From: h.Size, Edge: h.Edge, Checkpoint: h.Checkpoint,
		Records: []storage.Record{{Key: "format", Value: []byte(`{"version":1}`)}}})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	w.l, err = Open(w.dir, opts)
	if err == nil {
		t.Fatal("opened a data folder of state format 1")
	}
	if !strings.Contains(err.Error(), "format 1") || !strings.Contains(err.Error(), "format 2") {
		t.Errorf("error %q does not name the formats", err)
	}
	w.l = l // closed already; Close again is harmless
}
