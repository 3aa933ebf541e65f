package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// percentiles returns the 50th and 99th percentiles of d in milliseconds.
func percentiles(d []time.Duration) (p50, p99 float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, 0.50), percentile(s, 0.99)
}

// percentile returns the q-th quantile (0..1; 1 is the largest) of the
// sorted durations s in milliseconds, 0 when s is empty.
func percentile(s []time.Duration, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

// PeakRSSMiB returns this process's peak resident set (VmHWM in
// /proc/self/status) in MiB, or 0 where that is not available.
func PeakRSSMiB() float64 { return procStatusMiB("VmHWM") }

// cpuTime is this process's user and system CPU time so far. On a loaded
// machine, CPU time per operation says more than operations per second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID);
// the caller locks its goroutine to the thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadFaults is the page faults the calling thread has taken, minor
// (the page was in memory: a first touch of a mapped file's page or of
// fresh heap) and major (it was read from disk); the caller locks its
// goroutine to the thread.
func threadFaults() (minor, major int64) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0, 0
	}
	return ru.Minflt, ru.Majflt
}

// cpuPerOp is the CPU time spent since start per op, in microseconds.
func cpuPerOp(start time.Duration, ops int) float64 {
	if ops <= 0 {
		return 0
	}
	return float64((cpuTime() - start).Microseconds()) / float64(ops)
}

// mallocs is the number of heap allocations the process has made.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// allocsPerOp is the heap allocations made since start (mallocs) per op.
func allocsPerOp(start uint64, ops int) float64 {
	if ops <= 0 {
		return 0
	}
	return float64(mallocs()-start) / float64(ops)
}

// rssSampler records the peak anonymous and file-backed resident set,
// sampling /proc/self/status every 50 ms. VmHWM alone cannot tell the
// two apart, and Badger maps its files: their pages count in RSS but the
// kernel may drop them at any time.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}
	anon float64
	file float64
}

func sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			s.anon = max(s.anon, procStatusMiB("RssAnon"))
			s.file = max(s.file, procStatusMiB("RssFile"))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// peaks stops the sampler and returns the peaks in MiB.
func (s *rssSampler) peaks() (anon, file float64) {
	close(s.stop)
	<-s.done
	return s.anon, s.file
}

// procStatusMiB reads a "kB" field of /proc/self/status in MiB, or 0.
func procStatusMiB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}

// diskUsage returns the apparent size of the files under dir.
func diskUsage(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// Machine describes where a run was taken.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	LoadBefore string `json:"load_before"` // /proc/loadavg when the run began
	LoadAfter  string `json:"load_after"`
	Start      string `json:"start"`
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadAvg(), Start: time.Now().UTC().Format(time.RFC3339)}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load averages, or "".
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
