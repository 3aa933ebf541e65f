package bench

import (
	"context"
	"testing"
	"time"

	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestServe drives a real server (servertest) with the load `custody
// bench serve` runs: every append answered, verified and timed, the
// percentiles in order.
func TestServe(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	res, err := Serve(context.Background(), lg.NewClient(), lg.AdminKey, 3, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Appends == 0 || res.Errors != 0 || res.Denied != 0 || !res.Verified || res.Clients != 3 {
		t.Fatalf("result %+v", res)
	}
	if !(0 < res.P50ms && res.P50ms <= res.P90ms && res.P90ms <= res.P99ms && res.P99ms <= res.Maxms) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
	// Every receipt is in the log: the principal, one grant per client,
	// and the appends counted (GENESIS is leaf 0).
	if size := lg.Ledger.Head().Size; size < uint64(1+1+3)+uint64(res.Appends) {
		t.Fatalf("log size %d after %d appends", size, res.Appends)
	}
}

func TestPercentile(t *testing.T) {
	s := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}
	for q, want := range map[float64]float64{0: 1, 0.5: 3, 0.99: 4, 1: 4} {
		if got := percentile(s, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}
