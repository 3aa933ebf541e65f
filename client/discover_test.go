package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server/api"
)

// TestDiscoverThroughFailover: just after a leader dies, a follower
// answers 503 while it takes the lease over and the dead server refuses
// connections; Discover, given both, rides it out as appends do instead
// of failing on the first round.
func TestDiscoverThroughFailover(t *testing.T) {
	var asked atomic.Int32
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) <= 2 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(api.Error{ReasonCode: api.CodeUnavailable, Reason: "taking over"})
			return
		}
		json.NewEncoder(w).Encode(api.Log{Origin: "example.com/pg", VerifierKey: "vkey"})
	}))
	defer follower.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	log, err := client.Discover(context.Background(), follower.URL+","+deadURL, nil)
	if err != nil {
		t.Fatalf("Discover through a failover: %v", err)
	}
	if log.Origin != "example.com/pg" || asked.Load() != 3 {
		t.Errorf("got origin %q after %d requests to the follower, want example.com/pg after 3", log.Origin, asked.Load())
	}
}
