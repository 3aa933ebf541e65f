// Command tessera is custody's side-by-side peer: it appends the same
// ~400-byte entries as `custody bench` does in its log-only phase, through
// Tessera's POSIX driver, and prints appends/s and latency as JSON.
//
// It lives in its own Go module so that custody itself never depends on
// Tessera. `custody bench --peer tessera` runs it with `go run .` in this
// folder; it can also be run by hand:
//
//	cd bench/peers/tessera && go run . --entries 50000 --inflight 4096
//
// # What "acknowledged" means here
//
// Tessera's Appender.Add returns a future. In the POSIX driver the future
// resolves only after the batch holding the entry has been sequenced and
// integrated: its entry bundles, the changed hash tiles and the private
// tree state are each written to a temporary file opened with O_SYNC,
// renamed or linked into place, and the directory is fsynced
// (storage/posix/file_ops.go). So a resolved future is durable, and is
// committed to by the tree state, but no signed checkpoint covering it
// need exist yet: checkpoints are published by a separate loop, at most
// every CheckpointInterval (at least 100 ms).
//
// custody acknowledges an entry only when it is durable AND covered by a
// signed checkpoint. The like-for-like figure is therefore "published":
// each entry counts when its future has resolved and a PublicationAwaiter
// has seen a checkpoint on disk whose size covers it. "integrated" latency
// (the future alone) is reported beside it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"
)

// Report is printed as one JSON object on stdout.
type Report struct {
	Peer          string  `json:"peer"`
	Version       string  `json:"version"`
	Entries       int     `json:"entries"`
	EntryBytes    int     `json:"entry_bytes"`
	Inflight      int     `json:"inflight"`
	BatchMaxSize  int     `json:"batch_max_size"`
	BatchMaxAge   string  `json:"batch_max_age"`
	CheckpointInt string  `json:"checkpoint_interval"`
	Ack           string  `json:"ack"`
	Seconds       float64 `json:"seconds"`
	AppendsPerSec float64 `json:"appends_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	// Integrated* count an entry when its future resolves (durable and in
	// the tree state, before a signed checkpoint covers it).
	IntegratedAppendsPerSec float64 `json:"integrated_appends_per_sec"`
	IntegratedP50Ms         float64 `json:"integrated_p50_ms"`
	IntegratedP99Ms         float64 `json:"integrated_p99_ms"`
	DiskBytesPerEntry       float64 `json:"disk_bytes_per_entry"`
	// CPUUs is the process's CPU time (user + system) per entry appended.
	CPUUs      float64 `json:"cpu_us_per_op"`
	GOMAXPROCS int     `json:"gomaxprocs"`
}

func main() {
	entries := flag.Int("entries", 50_000, "entries to append")
	size := flag.Int("entry-bytes", 400, "bytes per entry")
	inflight := flag.Int("inflight", 4096, "concurrent clients, each with one entry in flight")
	batch := flag.Uint("batch", 2048, "Tessera batch max size (custody's MaxBatch is 2048)")
	maxAge := flag.Duration("batch-age", 10*time.Millisecond, "Tessera batch max age")
	cpInt := flag.Duration("checkpoint-interval", 100*time.Millisecond, "Tessera checkpoint interval (its minimum is 100ms)")
	dir := flag.String("dir", "", "log directory (default: a new temp dir, removed afterwards)")
	flag.Parse()
	if err := run(*entries, *size, *inflight, *batch, *maxAge, *cpInt, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "tessera peer: %v\n", err)
		os.Exit(1)
	}
}

func run(n, size, inflight int, batch uint, maxAge, cpInt time.Duration, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "tessera-peer-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = filepath.Join(d, "log")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	skey, _, err := note.GenerateKey(rand.Reader, "bench.example/tessera")
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	driver, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		return fmt.Errorf("posix driver: %w", err)
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(batch, maxAge).
		WithCheckpointInterval(cpInt).
		WithPushback(uint(max(inflight*2, 4096)))
	appender, shutdown, reader, err := tessera.NewAppender(ctx, driver, opts)
	if err != nil {
		return fmt.Errorf("appender: %w", err)
	}
	awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 5*time.Millisecond)

	// The same entries custody's log-only phase appends: size random bytes
	// with a short text prefix.
	data := make([][]byte, n)
	for i := range data {
		b := make([]byte, size)
		rand.Read(b)
		copy(b, fmt.Sprintf("leaf %d ", i))
		data[i] = b
	}

	integ := make([]time.Duration, n)
	pub := make([]time.Duration, n)
	var next atomic.Int64
	var lastInteg atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	for c := 0; c < inflight; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				f := appender.Add(ctx, tessera.NewEntry(data[i]))
				if _, err := f(); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				t1 := time.Now()
				integ[i] = t1.Sub(t0)
				for {
					old := lastInteg.Load()
					if int64(t1.Sub(start)) <= old || lastInteg.CompareAndSwap(old, int64(t1.Sub(start))) {
						break
					}
				}
				if _, _, err := awaiter.Await(ctx, f); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				pub[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	if firstErr != nil {
		return firstErr
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	var disk int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			disk += fi.Size()
		}
		return nil
	})
	p50, p99 := percentiles(pub)
	ip50, ip99 := percentiles(integ)
	r := Report{
		Peer: "tessera-posix", Version: "v1.0.4", Entries: n, EntryBytes: size, Inflight: inflight,
		BatchMaxSize: int(batch), BatchMaxAge: maxAge.String(), CheckpointInt: cpInt.String(),
		Ack:     "future resolved (sequenced, integrated, O_SYNC files + dir fsync) and a published signed checkpoint covers the entry",
		Seconds: elapsed.Seconds(), AppendsPerSec: float64(n) / elapsed.Seconds(), P50Ms: p50, P99Ms: p99,
		IntegratedAppendsPerSec: float64(n) / time.Duration(lastInteg.Load()).Seconds(),
		IntegratedP50Ms:         ip50, IntegratedP99Ms: ip99,
		DiskBytesPerEntry: float64(disk) / float64(n), GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUUs: float64(cpu.Microseconds()) / float64(n),
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func percentiles(d []time.Duration) (p50, p99 float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	at := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}
	return at(0.50), at(0.99)
}
