// Command tessera is custody's side-by-side peer: it appends the same
// ~400-byte entries as `custody bench` does in its log-only phase, through
// one of Tessera's drivers, and prints appends/s and latency as JSON.
//
//   - --driver posix (the default): Tessera's POSIX driver, files on the
//     local disk. `custody bench --peer tessera` runs this one.
//   - --driver aws: Tessera's AWS driver (storage/aws), which coordinates
//     through a MySQL database (Aurora on AWS; MariaDB here) and keeps
//     tiles, entry bundles and checkpoints in S3 (versitygw here).
//     scripts/bench-peers.sh starts both and runs this beside custody on
//     Badger and on PostgreSQL.
//
// It lives in its own Go module so that custody itself never depends on
// Tessera. It can also be run by hand:
//
//	cd bench/peers/tessera && go run . --entries 50000 --inflight 4096
//	go run . --driver aws --mysql 'tessera:tessera@tcp(127.0.0.1:53306)/tessera' \
//	  --s3-endpoint http://127.0.0.1:7070 --s3-access-key K --s3-secret S \
//	  --entries 20000 --inflight 64
//
// Each aws run uses a new database (tessera_bench_<random>, dropped after)
// and a new bucket, so runs never see each other's state.
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
//
// In the AWS driver the future means less: it resolves when the batch
// holding the entry is committed to the Seq table in MySQL (one
// transaction: SELECT … FOR UPDATE of SeqCoord, INSERT of the batch,
// UPDATE of SeqCoord), durable with innodb_flush_log_at_trx_commit=1 but
// not yet in the tree. Integration is a separate loop that runs once a
// second (storage/aws: integrateEntriesJob's ticker), writes entry bundles
// and tiles to S3 and moves IntCoord; checkpoints are published by a third
// loop at most once per CheckpointInterval, which the driver will not let
// go below one second (minCheckpointInterval), and whose PubCoord row keeps
// whole seconds. So "published" is again the like-for-like figure, and the
// future's latency ("sequenced") is reported beside it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
	Peer          string `json:"peer"`
	Version       string `json:"version"`
	Entries       int    `json:"entries"`
	EntryBytes    int    `json:"entry_bytes"`
	Inflight      int    `json:"inflight"`
	BatchMaxSize  int    `json:"batch_max_size"`
	BatchMaxAge   string `json:"batch_max_age"`
	CheckpointInt string `json:"checkpoint_interval"`
	Ack           string `json:"ack"`
	// FutureAck is what the future returned by Add promises when it
	// resolves: integrated for posix, only sequenced for aws.
	FutureAck string `json:"future_ack"`
	// AllPublishedSeconds is the time from the first Add to a published
	// checkpoint covering every entry (with --await future, later than
	// Seconds).
	AllPublishedSeconds float64 `json:"all_published_seconds"`
	// WatchedCPUUs is the CPU time (user + system, the process and its
	// children) of each --watch process per entry, from the first Add
	// to the checkpoint covering all entries.
	WatchedCPUUs map[string]float64 `json:"watched_cpu_us_per_op,omitempty"`
	// Pushbacks counts Adds refused with tessera.ErrPushback and retried
	// after 50 ms.
	Pushbacks int64 `json:"pushbacks"`
	// ServerPerEntry is the database server's counters per entry over
	// the same span (aws: MySQL's global status).
	ServerPerEntry map[string]float64 `json:"server_per_entry,omitempty"`
	Seconds        float64            `json:"seconds"`
	AppendsPerSec  float64            `json:"appends_per_sec"`
	P50Ms          float64            `json:"p50_ms"`
	P99Ms          float64            `json:"p99_ms"`
	// Integrated* count an entry when its future resolves (posix: durable
	// and in the tree state; aws: durable in MySQL with an index, not yet
	// in the tree); either way before a signed checkpoint covers it.
	IntegratedAppendsPerSec float64 `json:"integrated_appends_per_sec"`
	IntegratedP50Ms         float64 `json:"integrated_p50_ms"`
	IntegratedP99Ms         float64 `json:"integrated_p99_ms"`
	DiskBytesPerEntry       float64 `json:"disk_bytes_per_entry"`
	// CPUUs is the process's CPU time (user + system) per entry appended.
	CPUUs      float64 `json:"cpu_us_per_op"`
	GOMAXPROCS int     `json:"gomaxprocs"`
}

// config is one run's flags.
type config struct {
	driver     string
	n, size    int
	inflight   int
	batch      uint
	maxAge     time.Duration
	cpInt      time.Duration
	awaitPoll  time.Duration
	dir        string
	mysqlDSN   string
	s3Endpoint string
	s3Access   string
	s3Secret   string
	mysqlConns int
	published  bool
	watch      map[string]int
}

func main() {
	var c config
	flag.StringVar(&c.driver, "driver", "posix", "Tessera driver: posix (files in --dir) or aws (MySQL/MariaDB at --mysql and S3 at --s3-endpoint)")
	flag.IntVar(&c.n, "entries", 50_000, "entries to append")
	flag.IntVar(&c.size, "entry-bytes", 400, "bytes per entry")
	flag.IntVar(&c.inflight, "inflight", 4096, "concurrent clients, each with one entry in flight")
	flag.UintVar(&c.batch, "batch", 2048, "Tessera batch max size (custody's MaxBatch is 2048)")
	flag.DurationVar(&c.maxAge, "batch-age", 10*time.Millisecond, "Tessera batch max age")
	flag.DurationVar(&c.cpInt, "checkpoint-interval", 0, "Tessera checkpoint interval (default: 100ms for posix, its minimum; 1s for aws, its minimum)")
	flag.DurationVar(&c.awaitPoll, "await-poll", 0, "how often the PublicationAwaiter reads the checkpoint (default: 5ms for posix, 20ms for aws, a GET from S3 each time)")
	flag.StringVar(&c.dir, "dir", "", "posix: log directory (default: a new temp dir, removed afterwards)")
	flag.StringVar(&c.mysqlDSN, "mysql", "", "aws: Go MySQL DSN of a server where a new database may be created, e.g. 'tessera:tessera@tcp(127.0.0.1:53306)/tessera'")
	flag.StringVar(&c.s3Endpoint, "s3-endpoint", "", "aws: URL of an S3-compatible server (path-style requests), e.g. http://127.0.0.1:7070")
	flag.StringVar(&c.s3Access, "s3-access-key", "", "aws: S3 access key")
	flag.StringVar(&c.s3Secret, "s3-secret", "", "aws: S3 secret key")
	flag.IntVar(&c.mysqlConns, "mysql-conns", 0, "aws: Config.MaxOpenConns (0: unlimited, Tessera's default)")
	await := flag.String("await", "published", "what each client waits for before its next append: published (a checkpoint covers the entry; like custody) or future (Add's future resolved)")
	c.watch = map[string]int{}
	flag.Func("watch", "NAME=PID: also report the CPU of process PID and its children per entry (repeatable; e.g. mariadbd=123)", func(v string) error {
		name, p, ok := strings.Cut(v, "=")
		pid, err := strconv.Atoi(p)
		if !ok || err != nil || name == "" {
			return fmt.Errorf("want NAME=PID, got %q", v)
		}
		if _, ok := treeCPU(pid); !ok {
			return fmt.Errorf("process %d: no /proc/%d/stat to read", pid, pid)
		}
		c.watch[name] = pid
		return nil
	})
	flag.Parse()
	switch *await {
	case "published":
		c.published = true
	case "future":
	default:
		fmt.Fprintf(os.Stderr, "tessera peer: --await %q: want published or future\n", *await)
		os.Exit(2)
	}
	if c.cpInt == 0 {
		c.cpInt = map[bool]time.Duration{true: time.Second, false: 100 * time.Millisecond}[c.driver == "aws"]
	}
	if c.awaitPoll == 0 {
		c.awaitPoll = map[bool]time.Duration{true: 20 * time.Millisecond, false: 5 * time.Millisecond}[c.driver == "aws"]
	}
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "tessera peer: %v\n", err)
		os.Exit(1)
	}
}

// peerDriver is a Tessera driver made for one run.
type peerDriver struct {
	driver tessera.Driver
	// dir is the posix log's folder ("" for aws).
	dir string
	// futureAck says what a resolved future from Add promises.
	futureAck string
	// stats, if set, reads the database server's counters (aws: MySQL's
	// fsyncs and redo log bytes), reported per entry over the run.
	stats   func(context.Context) map[string]float64
	cleanup func()
}

// driver makes the Tessera driver c names.
func driver(ctx context.Context, c config) (*peerDriver, error) {
	switch c.driver {
	case "posix":
		dir, cleanup := c.dir, func() {}
		if dir == "" {
			d, err := os.MkdirTemp("", "tessera-peer-")
			if err != nil {
				return nil, err
			}
			cleanup = func() { os.RemoveAll(d) }
			dir = filepath.Join(d, "log")
		}
		d, err := posix.New(ctx, posix.Config{Path: dir})
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("posix driver: %w", err)
		}
		return &peerDriver{driver: d, dir: dir, cleanup: cleanup,
			futureAck: "future resolved (sequenced, integrated, O_SYNC files + dir fsync)"}, nil
	case "aws":
		return awsDriver(ctx, c)
	}
	return nil, fmt.Errorf("--driver %q: want posix or aws", c.driver)
}

func run(c config) error {
	n, size, inflight := c.n, c.size, c.inflight
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
	d, err := driver(ctx, c)
	if err != nil {
		return err
	}
	// Stop Tessera's background loops before removing what they use.
	defer func() { cancel(); d.cleanup() }()
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(signer).
		WithBatching(c.batch, c.maxAge).
		WithCheckpointInterval(c.cpInt).
		WithPushback(uint(max(inflight*2, 4096)))
	appender, shutdown, reader, err := tessera.NewAppender(ctx, d.driver, opts)
	if err != nil {
		return fmt.Errorf("appender: %w", err)
	}
	awaiter := tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, c.awaitPoll)

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
	var pushbacks atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	watch0 := map[string]time.Duration{}
	for name, pid := range c.watch {
		if t, ok := treeCPU(pid); ok {
			watch0[name] = t
		}
	}
	var stats0 map[string]float64
	if d.stats != nil {
		stats0 = d.stats(ctx)
	}
	cpu0 := cpuTime()
	start := time.Now()
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				// Pushback is Tessera telling the caller to come back later
				// (a personality answers 503); a client retries.
				f := appender.Add(ctx, tessera.NewEntry(data[i]))
				_, err := f()
				for errors.Is(err, tessera.ErrPushback) {
					pushbacks.Add(1)
					time.Sleep(50 * time.Millisecond)
					f = appender.Add(ctx, tessera.NewEntry(data[i]))
					_, err = f()
				}
				if err != nil {
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
				if !c.published {
					continue
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
	if firstErr != nil {
		return firstErr
	}
	allPublished := elapsed
	if !c.published {
		// Wait for a checkpoint that covers every entry, so that the CPU
		// below includes integrating and publishing them.
		done := func() (tessera.Index, error) { return tessera.Index{Index: uint64(n - 1)}, nil }
		if _, _, err := awaiter.Await(ctx, done); err != nil {
			return fmt.Errorf("awaiting the checkpoint that covers all %d entries: %w", n, err)
		}
		allPublished = time.Since(start)
	}
	cpu := cpuTime() - cpu0
	watchedCPU := map[string]float64{}
	for name, pid := range c.watch {
		if t, ok := treeCPU(pid); ok {
			watchedCPU[name] = float64((t - watch0[name]).Microseconds()) / float64(n)
		}
	}
	var serverStats map[string]float64
	if d.stats != nil {
		after := d.stats(ctx)
		serverStats = map[string]float64{}
		for k, v := range after {
			serverStats[k] = (v - stats0[k]) / float64(n)
		}
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	var disk int64
	if c.driver == "posix" {
		filepath.Walk(d.dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				disk += fi.Size()
			}
			return nil
		})
	}
	p50, p99 := percentiles(pub)
	ip50, ip99 := percentiles(integ)
	ack := d.futureAck + ", and a published signed checkpoint covers the entry"
	if !c.published {
		ack, p50, p99 = d.futureAck+" (clients do not wait for a checkpoint)", ip50, ip99
	}
	r := Report{
		Peer: "tessera-" + c.driver, Version: "v1.0.4", Entries: n, EntryBytes: size, Inflight: inflight,
		BatchMaxSize: int(c.batch), BatchMaxAge: c.maxAge.String(), CheckpointInt: c.cpInt.String(),
		Ack: ack, FutureAck: d.futureAck, AllPublishedSeconds: allPublished.Seconds(),
		WatchedCPUUs: watchedCPU, Pushbacks: pushbacks.Load(), ServerPerEntry: serverStats,
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

// treeCPU is the CPU time (user + system) of process pid, of the children
// it has reaped, and of its live children: for PostgreSQL's postmaster
// that is every backend, past and present. Linux only.
func treeCPU(pid int) (time.Duration, bool) {
	self, ok := statCPU(pid, true)
	if !ok {
		return 0, false
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := statFields(b)
		if len(f) > 15 && f[1] == strconv.Itoa(pid) {
			if t, ok := statCPU(child, true); ok {
				self += t
			}
		}
	}
	return self, true
}

// statCPU reads utime+stime (and cutime+cstime if reaped) of pid.
func statCPU(pid int, reaped bool) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	f := statFields(b)
	if len(f) < 15 {
		return 0, false
	}
	var ticks int64
	last := 12
	if reaped {
		last = 14
	}
	for i := 11; i <= last; i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	return time.Duration(ticks) * time.Second / clkTck, true
}

// statFields splits /proc/PID/stat after the command name (which may hold
// spaces): field 0 is the state, 1 the parent's pid, 11-14 utime, stime,
// cutime, cstime.
func statFields(b []byte) []string {
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Fields(s)
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
