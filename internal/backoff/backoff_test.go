package backoff

import (
	"context"
	"testing"
	"time"
)

func TestNextDoublesToMaxAndResets(t *testing.T) {
	b := Backoff{First: 50 * time.Millisecond, Max: 300 * time.Millisecond}
	want := []time.Duration{50, 100, 200, 300, 300}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d: %v, want %v", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 50*time.Millisecond {
		t.Fatalf("after Reset: %v, want 50ms", got)
	}
	// A first wait above the cap is the cap.
	c := Backoff{First: time.Second, Max: 10 * time.Millisecond}
	if got := c.Next(); got != 10*time.Millisecond {
		t.Fatalf("First above Max: %v", got)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep of an hour on an ended context reported the wait passed")
	}
	if Sleep(ctx, 0) {
		t.Fatal("Sleep(0) on an ended context reported the wait passed")
	}
	if !Sleep(context.Background(), 0) || !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep on a live context did not report the wait passed")
	}
}
