// Package backoff is custody's one retry wait: a first wait that doubles
// after each failure up to a cap, and goes back to the first after a
// success. Every loop that retries something remote (event streams, a
// witness, the bucket, PostgreSQL's listening connection, a witnessed
// checkpoint) waits through it, so there is one place to read or change
// how custody backs off. It has no jitter: each loop retries one peer of
// its own, and many clients are already spread by their own timing.
package backoff

import (
	"context"
	"time"
)

// Backoff is the wait between tries. The zero value waits nothing; set
// First and Max.
type Backoff struct {
	First, Max time.Duration
	next       time.Duration
}

// Next returns the wait before the next try (First after a Reset) and
// doubles the one after it, up to Max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d <= 0 {
		d = b.First
	}
	b.next = min(2*d, b.Max)
	return min(d, b.Max)
}

// Reset makes the next wait First again: call it after a success.
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps Next(), or until ctx ends; it reports whether the whole
// wait passed (false: ctx ended).
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits d, or until ctx ends; it reports whether the whole wait
// passed. A d of zero or less returns true at once unless ctx has ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
