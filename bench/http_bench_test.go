package bench

import (
	"context"
	"log/slog"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/custodylog/custody/server"
)

// BenchmarkHTTPAppends is the suite's HTTP phase (64 clients, one request
// in flight each, Badger, 1 in 20 submissions denied) measured the way a
// regression is caught on a shared machine: by what a submission costs,
// not how fast the run went. cpu-µs/op is the process's CPU time per
// submission (clients, server, ledger and Badger), heap-allocs/op and heap-B/op the
// heap allocations of every goroutine, both over the appends alone (the
// chains are built and signed before). The server's logger writes text
// lines to /dev/null through an *os.File, as `custody serve` writes them
// to stderr: one access log line per decision, with its write. Compare
// commits with -count and benchstat (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench HTTPAppends -benchtime 20000x -count 6 ./bench
func BenchmarkHTTPAppends(b *testing.B) {
	ctx := context.Background()
	ab, err := newAuthBench(ctx, b.TempDir(), max(b.N, 640), 64)
	if err != nil {
		b.Fatal(err)
	}
	defer ab.w.l.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	srv := server.New(ab.w.l, server.Options{MaxInFlight: 1024, Logger: slog.New(slog.NewTextHandler(devnull, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, server.ServeOptions{}) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	s0 := ab.w.l.Stats()
	b.ResetTimer()
	res, err := ab.runHTTP(ctx, "http://"+ln.Addr().String()+"/v1/entries")
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	s1 := ab.w.l.Stats()
	if err != nil {
		b.Fatal(err)
	}
	n := float64(res.Submissions)
	b.ReportMetric(res.CPUUs, "cpu-µs/op")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "heap-allocs/op")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "heap-B/op")
	b.ReportMetric(res.PerSec, "appends/s")
	b.ReportMetric(res.MeanBatch, "entries/commit")
	if n := float64(s1.Batches - s0.Batches); n > 0 {
		// The store's commit and the signed-head write of one batch.
		b.ReportMetric(1000*(s1.CommitSeconds-s0.CommitSeconds)/n, "commit-ms")
		b.ReportMetric(1000*(s1.HeadSeconds-s0.HeadSeconds)/n, "head-ms")
	}
}
