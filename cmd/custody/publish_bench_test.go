package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/bench"
	"github.com/custodylog/custody/internal/s3proc"
	"github.com/custodylog/custody/merkle"
)

// BenchmarkServePublish measures publication to versitygw under the
// authorised-append load of custody bench serve (pending receipts, each
// verified by its client), then custody audit --tiles reading the bucket
// back over HTTP. It reports the publication delay (commit seen to its
// checkpoint in the bucket: mean, and the histogram bucket holding p50
// and p99), the largest lag seen in /metrics while appending, and the
// audit's tiles and entries per second. docs/BENCHMARKS.md:
//
//	go test -run '^$' -bench ServePublish -benchtime 1x ./cmd/custody/
//
// $CUSTODY_BENCH_DURATION (default 10s) and $CUSTODY_BENCH_CLIENTS
// (default 64) set the load.
func BenchmarkServePublish(b *testing.B) {
	d, clients := 10*time.Second, "64"
	if v, err := time.ParseDuration(os.Getenv("CUSTODY_BENCH_DURATION")); err == nil {
		d = v
	}
	if v := os.Getenv("CUSTODY_BENCH_CLIENTS"); v != "" {
		clients = v
	}
	for range b.N {
		g := s3proc.ForTest(b, "logs")
		data := filepath.Join(b.TempDir(), "data")
		benchMust(b, 0, "init", "--dir", data, "--origin", "example.com/custody")
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- runIO(ctx, []string{"custody", "serve", "--dir", data, "--addr", "127.0.0.1:0", "--log-format", "json",
				"--publish", "s3://logs/bench"}, strings.NewReader(""), &stdout, &stderr)
		}()
		addr := regexp.MustCompile(`"addr":"(127\.0\.0\.1:\d+)"`)
		var url string
		for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if m := addr.FindStringSubmatch(stderr.String()); m != nil {
				url = "http://" + m[1]
			}
		}
		if url == "" {
			b.Fatalf("the server did not start: %s", stderr.String())
		}
		var maxLag, maxLagSec float64
		stopSampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stopSampling:
					return
				case <-time.After(100 * time.Millisecond):
				}
				m := benchMetrics(url)
				maxLag = max(maxLag, m["custody_publish_lag_entries"])
				maxLagSec = max(maxLagSec, m["custody_publish_lag_seconds"])
			}
		}()
		r := benchMust(b, 0, "bench", "serve", "--ledger", url, "--admin-key", filepath.Join(data, "keys", "admin.key"),
			"--clients", clients, "--duration", d.String(), "--json")
		close(stopSampling)
		<-sampled
		var res bench.ServeResult
		json.Unmarshal([]byte(r.stdout), &res)
		var m map[string]float64
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			m = benchMetrics(url)
			if m["custody_publish_lag_entries"] == 0 && m["custody_publish_size"] == m["custody_tree_size"] {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("publication did not catch up in 60s")
			}
		}
		hist := benchHistogram(url, "custody_publish_delay_seconds")
		cancel()
		<-done
		size := m["custody_tree_size"]
		mean := m["custody_publish_delay_seconds_sum"] / m["custody_publish_delay_seconds_count"]
		b.ReportMetric(res.AppendsPerSec, "appends/s")
		b.ReportMetric(mean*1000, "delay-mean-ms")
		b.ReportMetric(quantile(hist, 0.5)*1000, "delay-p50≤ms")
		b.ReportMetric(quantile(hist, 0.99)*1000, "delay-p99≤ms")
		b.ReportMetric(maxLag, "max-lag-entries")
		b.ReportMetric(maxLagSec*1000, "max-lag-ms")
		b.ReportMetric(m["custody_publish_objects_total"], "objects")

		vkey := strings.TrimSpace(benchMust(b, 0, "checkpoint", "--dir", data, "--verifier-key").stdout)
		start := time.Now()
		ar := benchMust(b, 0, "audit", "--tiles", g.URL+"/logs/bench", "--log-key", vkey, "--json")
		took := time.Since(start).Seconds()
		var audit struct {
			Size  float64 `json:"checkpoint_size"`
			Tiles float64 `json:"tiles_checked"`
		}
		json.Unmarshal([]byte(ar.stdout), &audit)
		if audit.Size != size {
			b.Fatalf("audit read size %v, the log is at %v", audit.Size, size)
		}
		// Every entry bundle and hash tile of the tree, over HTTP.
		objects := float64(len(merkle.NewTiles(0, uint64(size))) + len(merkle.NewEntryBundles(0, uint64(size))))
		b.ReportMetric(objects/took, "audit-tiles/s")
		b.ReportMetric(size/took, "audit-entries/s")
		b.Logf("%v entries; %v clients for %s: %.0f appends/s; publication delay mean %.1f ms, p50 ≤ %.0f ms, p99 ≤ %.0f ms; max lag %v entries, %.0f ms; audit --tiles over HTTP: %.0f tiles/s, %.0f entries/s (%.2fs)",
			size, clients, d, res.AppendsPerSec, mean*1000, quantile(hist, 0.5)*1000, quantile(hist, 0.99)*1000, maxLag, maxLagSec*1000, objects/took, size/took, took)
	}
}

func benchMust(b *testing.B, code int, args ...string) result {
	b.Helper()
	var out, errb syncBuffer
	c := runIO(context.Background(), append([]string{"custody"}, args...), strings.NewReader(""), &out, &errb)
	if c != code {
		b.Fatalf("custody %s: exit %d\n%s%s", strings.Join(args, " "), c, out.String(), errb.String())
	}
	return result{c, out.String(), errb.String()}
}

func benchMetrics(url string) map[string]float64 {
	data, err := httpGetBytes(url + "/metrics")
	out := map[string]float64{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(name, "{"); i >= 0 && !strings.Contains(name, "_bucket") {
			name = name[:i] // sum the labelled series
			v, _ := strconv.ParseFloat(val, 64)
			out[name] += v
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

type histBucket struct{ le, n float64 }

func benchHistogram(url, name string) []histBucket {
	data, _ := httpGetBytes(url + "/metrics")
	re := regexp.MustCompile(`^` + name + `_bucket\{le="([^"]+)"\} (\S+)$`)
	var out []histBucket
	for _, line := range strings.Split(string(data), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			le, _ := strconv.ParseFloat(m[1], 64)
			n, _ := strconv.ParseFloat(m[2], 64)
			out = append(out, histBucket{le, n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// quantile is the upper bound of the histogram bucket holding q.
func quantile(h []histBucket, q float64) float64 {
	if len(h) == 0 {
		return 0
	}
	total := h[len(h)-1].n
	for _, b := range h {
		if b.n >= q*total {
			return b.le
		}
	}
	return h[len(h)-1].le
}
