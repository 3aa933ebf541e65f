package ledger

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAuthorizedAppendsCPU is BenchmarkAuthorizedAppends without the
// verify ceiling, reporting the process's CPU time per append (all
// goroutines, Badger's included) over the timed part only: steadier than a
// rate on a shared machine. Compare cpu-µs/op with the ceiling's ~65 µs
// of CPU per verify.
func BenchmarkAuthorizedAppendsCPU(b *testing.B) {
	ab := newAuthBench(b, max(b.N, 32))
	b.ResetTimer()
	cpu := processCPU()
	acc, den := ab.run(b, 256)
	cpu = processCPU() - cpu
	b.StopTimer()
	if int(den) != ab.denied || acc+den < int64(b.N)-32 {
		b.Fatalf("accepted %d, denied %d (want %d denied)", acc, den, ab.denied)
	}
	b.ReportMetric(float64(acc+den)/b.Elapsed().Seconds(), "appends/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(acc+den), "cpu-µs/op")
}
