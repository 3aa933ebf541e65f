package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
)

// TestOverloadAnswersAtOnce: with every append slot taken, a new append is
// answered 503 with Retry-After at once, and nothing is queued.
func TestOverloadAnswersAtOnce(t *testing.T) {
	dir := t.TempDir()
	l, err := ledger.Init(dir, "test.example/custody", ledger.InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := New(l, Options{MaxInFlight: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.sem <- struct{}{}
	s.sem <- struct{}{}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/entries", strings.NewReader("{}")))
	var doc api.Error
	json.Unmarshal(rec.Body.Bytes(), &doc)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || doc.ReasonCode != api.CodeOverloaded {
		t.Fatalf("HTTP %d, Retry-After %q, %+v", rec.Code, rec.Header().Get("Retry-After"), doc)
	}
	<-s.sem
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/entries", strings.NewReader("{}")))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("with a free slot: HTTP %d %s", rec.Code, rec.Body)
	}
	// Draining: appends are turned away, reads still work.
	s.Drain()
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/entries", strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("draining: HTTP %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("readyz while draining: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/checkpoint", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("checkpoint while draining: %d", rec.Code)
	}
}

// TestMetrics: appends by verdict, refusals, batch sizes and commit
// latency from the ledger's counters, queue depth.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	l, err := ledger.Init(dir, "test.example/custody", ledger.InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var logs strings.Builder
	s := New(l, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/entries", strings.NewReader("nope")))
	if !regexp.MustCompile(`level=INFO msg=append verdict=refused reason_code=bad_envelope latency_ms=[0-9.]+`).MatchString(logs.String()) {
		t.Errorf("no access log line for the refusal:\n%s", logs.String())
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`custody_appends_total{verdict="refused"} 1`,
		`custody_refusals_total{reason_code="bad_envelope"} 1`,
		`custody_batch_entries_count 1`, // GENESIS
		`custody_commit_duration_seconds_bucket{le="+Inf"} 1`,
		`custody_batch_splits_total 0`,
		`custody_queue_depth 0`,
		`custody_tree_size 1`,
		`go_goroutines`,
		`custody_build_info{goversion="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestHashStrings: hashStrings encodes each hash as merkle.Hash.String
// does, in three allocations however many hashes (an answer's proof).
func TestHashStrings(t *testing.T) {
	for _, n := range []int{0, 1, 2, 24, 40} {
		hs := make([]merkle.Hash, n)
		for i := range hs {
			hs[i] = merkle.LeafHash([]byte{byte(i), byte(n)})
		}
		got := hashStrings(hs)
		if len(got) != n {
			t.Fatalf("%d hashes: %d strings", n, len(got))
		}
		for i, h := range hs {
			if got[i] != h.String() {
				t.Fatalf("%d hashes: string %d is %q, want %q", n, i, got[i], h.String())
			}
		}
		if a := testing.AllocsPerRun(20, func() { hashStrings(hs) }); a > 3 {
			t.Errorf("%d hashes: %.0f allocations, want at most 3", n, a)
		}
	}
}
