package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGServer is what the PostgreSQL server did during one phase, per append
// (Ops appends), read from the server itself: the CPU of every server
// process (when the server runs on this machine and /proc shows it), and
// the WAL counters of pg_stat_wal and the database's commits from
// pg_stat_database. They say what bounds a figure on PostgreSQL: the
// server's CPU, the WAL flushes, or neither (then it is the client).
type PGServer struct {
	Ops int `json:"ops"`
	// CPUUs is the server's CPU time (user + system of the postmaster, its
	// live children and the children it has reaped) per append; 0 when
	// the server is not on this machine.
	CPUUs float64 `json:"cpu_us_per_op,omitempty"`
	// Commits is transactions committed in the database per append (a
	// batch is one; reads outside a transaction count too).
	Commits float64 `json:"commits_per_op"`
	// WALBytes and WALRecords per append.
	WALBytes   float64 `json:"wal_bytes_per_op"`
	WALRecords float64 `json:"wal_records_per_op"`
	// WALSyncs is WAL flushes to disk (fsync/fdatasync) in the phase, and
	// WALSyncMs their mean duration, WALSyncBusy the share of the phase's
	// wall time spent flushing: near 1 means a commit is always waiting
	// on the disk. The times need track_wal_io_timing = on in the server
	// (scripts/bench-peers.sh sets it); otherwise they are 0.
	WALSyncs    int64   `json:"wal_syncs"`
	WALSyncMs   float64 `json:"wal_sync_ms_mean,omitempty"`
	WALSyncBusy float64 `json:"wal_sync_busy,omitempty"`
	// WALWriteMs is the mean time of one WAL write(2).
	WALWriteMs float64 `json:"wal_write_ms_mean,omitempty"`
	// Timing says whether track_wal_io_timing was on.
	Timing bool `json:"wal_io_timing"`
}

// pgCounters is one reading of the server's counters.
type pgCounters struct {
	cpu                           time.Duration
	haveCPU                       bool
	commits, walRecords, walBytes float64
	walWrites, walSyncs           int64
	walWriteMs, walSyncMs         float64
	timing                        bool
	postmaster                    int
}

// readPG reads the counters of the server at base.
func readPG(ctx context.Context, base string) (pgCounters, error) {
	var c pgCounters
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return c, err
	}
	defer conn.Close(ctx)
	var backend int
	var timing string
	err = conn.QueryRow(ctx, `SELECT pg_backend_pid(), current_setting('track_wal_io_timing'),
		w.wal_records, w.wal_bytes, w.wal_write, w.wal_sync, w.wal_write_time, w.wal_sync_time,
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())
		FROM pg_stat_wal w`).Scan(&backend, &timing, &c.walRecords, &c.walBytes, &c.walWrites, &c.walSyncs,
		&c.walWriteMs, &c.walSyncMs, &c.commits)
	if err != nil {
		return c, fmt.Errorf("reading pg_stat_wal: %w", err)
	}
	c.timing = timing == "on"
	// The backend's parent is the postmaster, if the server is here.
	if f := procStat(backend); len(f) > 1 {
		if pm, err := strconv.Atoi(f[1]); err == nil && procComm(pm) == "postgres" {
			c.postmaster = pm
			c.cpu, c.haveCPU = processTreeCPU(pm)
		}
	}
	return c, nil
}

// pgDelta is what the server did between a and b, per op, for a phase
// whose timed part took seconds (the share of time spent flushing WAL is
// of that). Backends flush their statistics when they exit or go idle, so
// b should be read after the phase's connections are closed.
func pgDelta(a, b pgCounters, ops int, seconds float64) *PGServer {
	if ops <= 0 {
		return nil
	}
	n := float64(ops)
	s := &PGServer{Ops: ops, Commits: (b.commits - a.commits) / n, WALBytes: (b.walBytes - a.walBytes) / n,
		WALRecords: (b.walRecords - a.walRecords) / n, WALSyncs: b.walSyncs - a.walSyncs, Timing: a.timing && b.timing}
	if a.haveCPU && b.haveCPU && a.postmaster == b.postmaster {
		s.CPUUs = float64((b.cpu - a.cpu).Microseconds()) / n
	}
	if s.Timing {
		if s.WALSyncs > 0 {
			s.WALSyncMs = (b.walSyncMs - a.walSyncMs) / float64(s.WALSyncs)
		}
		if w := b.walWrites - a.walWrites; w > 0 {
			s.WALWriteMs = (b.walWriteMs - a.walWriteMs) / float64(w)
		}
		if seconds > 0 {
			s.WALSyncBusy = (b.walSyncMs - a.walSyncMs) / (seconds * 1000)
		}
	}
	return s
}

// processTreeCPU is the CPU time of pid, the children it has reaped, and
// its live children (for the postmaster: every backend, past and present).
func processTreeCPU(pid int) (time.Duration, bool) {
	total, ok := statCPU(procStat(pid))
	if !ok {
		return 0, false
	}
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(pid)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == self {
			continue
		}
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(child); len(f) > 1 && f[1] == self {
			if t, ok := statCPU(f); ok {
				total += t
			}
		}
	}
	return total, true
}

// procStat is /proc/PID/stat's fields after the command name (which may
// hold spaces): 0 the state, 1 the parent, 11-14 utime, stime, cutime,
// cstime in clock ticks.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	return strings.Fields(s)
}

func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// statCPU sums utime, stime, cutime and cstime of procStat fields.
func statCPU(f []string) (time.Duration, bool) {
	if len(f) < 15 {
		return 0, false
	}
	var ticks int64
	for i := 11; i <= 14; i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	return time.Duration(ticks) * time.Second / clkTck, true
}

// String is one line for the table.
func (s *PGServer) String() string {
	var b strings.Builder
	if s.CPUUs > 0 {
		fmt.Fprintf(&b, "CPU %.0f µs, ", s.CPUUs)
	}
	fmt.Fprintf(&b, "%.3f commits, %.0f B WAL, %d WAL flushes", s.Commits, s.WALBytes, s.WALSyncs)
	if s.Timing && s.WALSyncs > 0 {
		fmt.Fprintf(&b, " of %.2f ms (busy %.0f%%)", s.WALSyncMs, 100*s.WALSyncBusy)
	}
	return b.String()
}
