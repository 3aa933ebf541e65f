package pgstore_test

import (
	"context"
	"github.com/custodylog/custody/storage/storagetest"
	"testing"
	"time"
)

// Prefer holds a preference every other store of the log sees, and only
// of that log; it goes with the store.
func TestPrefer(t *testing.T) {
	ctx := context.Background()
	base := storagetest.PostgresURL(t)
	a1, a2, b := create(t, withLog(t, base, "a")), create(t, withLog(t, base, "a")), create(t, withLog(t, base, "b"))
	defer a2.Close()
	defer b.Close()
	if p, err := a2.Preferred(ctx); err != nil || p {
		t.Fatalf("log a preferred before anyone prefers it: %v, %v", p, err)
	}
	a1.Prefer(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := a2.Preferred(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a second store of log a never sees the first's preference")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p, err := b.Preferred(ctx); err != nil || p {
		t.Fatalf("log b is preferred by log a's store: %v, %v", p, err)
	}
	a1.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if p, _ := a2.Preferred(ctx); !p {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the preference outlives the store that held it")
		}
	}
}
