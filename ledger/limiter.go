package ledger

import "time"

// limiter is a token bucket per signing key for logged denials, so that a
// key cannot flood the log with DENIAL entries. It is owned by the
// sequencer. Refusals it causes are not logged, so it need not be
// deterministic across replays.
type limiter struct {
	perSec  float64
	burst   float64
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(perMinute, burst int) *limiter {
	return &limiter{perSec: float64(perMinute) / 60, burst: float64(burst), buckets: map[string]*bucket{}}
}

func (l *limiter) allow(key string, now time.Time) bool {
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 100_000 {
			clear(l.buckets) // bound memory; forgetting only makes buckets full again
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens += now.Sub(b.last).Seconds() * l.perSec
	if b.tokens > l.burst {
		b.tokens = l.burst
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
