package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/sign"
)

// benchLeaf is a ~400-byte leaf, like a small receipt.
func benchLeaf(i int) []byte {
	b := make([]byte, 400)
	rand.Read(b)
	copy(b, fmt.Sprintf("leaf %d ", i))
	return b
}

var benchKey = func() ed25519.PrivateKey { _, k, _ := sign.GenerateKey(); return k }()

func openLogOnly(tb testing.TB, dir string) *Ledger {
	tb.Helper()
	l, err := openAt(dir, "bench.example/log", oneKey(benchKey), Options{LogOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// BenchmarkAppendLeaves measures durable (fsynced) appends of pre-verified
// ~400-byte leaves, submitted by 64 concurrent writers in chunks of 256:
// the log alone, without authority. ns/op is per leaf.
func BenchmarkAppendLeaves(b *testing.B) {
	l := openLogOnly(b, b.TempDir())
	defer l.Close()
	leaves := make([][]byte, 4096)
	for i := range leaves {
		leaves[i] = benchLeaf(i)
	}
	b.SetBytes(400)
	b.ResetTimer()
	var wg sync.WaitGroup
	work := make(chan int, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				start := (n * 256) % len(leaves)
				if _, _, err := l.AppendLeaves(context.Background(), leaves[start:start+256]); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for n := 0; n < (b.N+255)/256; n++ {
		work <- n
	}
	close(work)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leaves/s")
}

// benchSize is the log size for proof benchmarks (CUSTODY_BENCH_SIZE,
// default 1,000,000). CUSTODY_BENCH_DIR keeps the log for later runs (see
// bigLedger).
func benchSize() int {
	if s, err := strconv.Atoi(os.Getenv("CUSTODY_BENCH_SIZE")); err == nil && s > 0 {
		return s
	}
	return 1_000_000
}

var (
	bigOnce sync.Once
	bigDir  string
	bigKey  ed25519.PrivateKey
	bigKeep bool // bigDir is CUSTODY_BENCH_DIR: keep it
	bigErr  error
)

// bigLedger builds (once per process) a log-only ledger of benchSize leaves
// and returns its folder. With CUSTODY_BENCH_DIR set, the log is built in
// that folder and kept, and a later run with the same size reuses it
// instead of building it again (10M leaves take minutes).
func bigLedger(b *testing.B) string {
	bigOnce.Do(func() {
		n := benchSize()
		if d := os.Getenv("CUSTODY_BENCH_DIR"); d != "" {
			bigDir, bigKeep = d, true
			if k, err := os.ReadFile(filepath.Join(d, "bench.key")); err == nil && len(k) == ed25519.PrivateKeySize {
				if sz, err := os.ReadFile(filepath.Join(d, "bench.size")); err == nil && string(sz) == strconv.Itoa(n) {
					bigKey = k
					return
				}
			}
			if ents, err := os.ReadDir(d); err == nil && len(ents) > 0 {
				if _, err := os.Stat(filepath.Join(d, "bench.size")); err != nil {
					bigErr = fmt.Errorf("CUSTODY_BENCH_DIR %s is not empty and holds no benchmark log; not replacing it", d)
					return
				}
				if bigErr = os.RemoveAll(d); bigErr != nil {
					return
				}
			}
			bigErr = os.MkdirAll(d, 0o755)
		} else {
			bigDir, bigErr = os.MkdirTemp("", "custody-bench-")
		}
		if bigErr != nil {
			return
		}
		bigKey = benchKey
		l := openLogOnly(b, filepath.Join(bigDir, "x"))
		chunk := make([][]byte, 0, 4096)
		for i := 0; i < n; i++ {
			chunk = append(chunk, benchLeaf(i))
			if len(chunk) == cap(chunk) || i == n-1 {
				if _, _, err := l.AppendLeaves(context.Background(), chunk); err != nil {
					bigErr = err
					return
				}
				chunk = chunk[:0]
			}
		}
		if bigErr = l.Close(); bigErr != nil || !bigKeep {
			return
		}
		if bigErr = os.WriteFile(filepath.Join(bigDir, "bench.key"), bigKey, 0o600); bigErr == nil {
			bigErr = os.WriteFile(filepath.Join(bigDir, "bench.size"), []byte(strconv.Itoa(n)), 0o644)
		}
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return filepath.Join(bigDir, "x")
}

// BenchmarkInclusionProof measures inclusion proofs at random indexes of
// a benchSize-leaf log, from 2 goroutines per core.
func BenchmarkInclusionProof(b *testing.B) {
	dir := bigLedger(b)
	l, err := openExisting(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	size := l.Head().Size
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var x uint64 = 88172645463325252
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if _, err := l.InclusionProof(x%size, size); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
}

// BenchmarkOpen measures opening a benchSize-leaf ledger, and reports the
// disk bytes per entry.
func BenchmarkOpen(b *testing.B) {
	dir := bigLedger(b)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		l, err := openExisting(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "ms/open")
		l.Close()
	}
	size := int64(benchSize())
	var disk int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			disk += fi.Size()
		}
		return nil
	})
	b.ReportMetric(float64(disk)/float64(size), "disk-bytes/entry")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "MiB-sys")
}

// openExisting reopens a log-only benchmark ledger.
func openExisting(dir string) (*Ledger, error) {
	return openAt(dir, "bench.example/log", oneKey(bigKey), Options{LogOnly: true})
}

// TestMain removes the benchmark log bigLedger built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if bigDir != "" && !bigKeep {
		os.RemoveAll(bigDir)
	}
	os.Exit(code)
}
