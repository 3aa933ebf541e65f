package reliability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// tmpfsMount mounts a tmpfs of size bytes for a test that must fill a
// real filesystem. It needs root; without it the test skips, except under
// CI, where it fails (.ci/reliability runs as root).
func tmpfsMount(t *testing.T, size string) string {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("tmpfs: "+format+" (CI must run this test as root: .ci/reliability)", args...)
		}
		t.Skipf("tmpfs: "+format, args...)
	}
	if os.Geteuid() != 0 {
		need("needs root to mount")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		need("mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// raceFill is the other program of TestDiskRace: it fills the filesystem
// of dir, then for hold frees 64 MiB and takes it back as fast as it can,
// again and again, so that the free space falls from plenty to nothing
// within milliseconds while appends are in flight, many times a second;
// then it frees everything. It returns how many times it refilled.
func raceFill(dir string, hold time.Duration) (int, error) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var files []string
	// fill writes 16 MiB files until the disk is full.
	fill := func() error {
		for {
			p := filepath.Join(dir, fmt.Sprintf("racer.%d", len(files)))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			files = append(files, p)
			for n := 0; n < 16; n++ {
				if _, err := f.Write(buf); err != nil {
					f.Write(buf[:4096]) // the last blocks
					f.Close()
					if errors.Is(err, syscall.ENOSPC) {
						return nil
					}
					return err
				}
			}
			f.Close()
		}
	}
	defer func() {
		for _, p := range files {
			os.Remove(p)
		}
	}()
	if err := fill(); err != nil {
		return 0, err
	}
	cycles := 0
	for until := time.Now().Add(hold); time.Now().Before(until); cycles++ {
		k := max(0, len(files)-5)
		for _, p := range files[k:] {
			os.Remove(p)
		}
		files = files[:k]
		time.Sleep(time.Duration(cycles%7) * 3 * time.Millisecond) // commits see room, and go
		if err := fill(); err != nil {
			return cycles, err
		}
	}
	return cycles, nil
}

// TestDiskRace: another program fills the filesystem (a real tmpfs) of
// the data folder again and again while honest agents append as fast as
// they can. Badger writes its logs through memory maps, where a page with
// no block behind it kills the process (SIGBUS): the server must survive
// every round, answer each append 200 or 503 disk_full with Retry-After
// (nothing else), start appending again by itself each time the space
// returns, and after a restart hold every acknowledged entry.
func TestDiskRace(t *testing.T) {
	if testing.Short() {
		t.Skip("disk-race test: skipped in -short mode")
	}
	// A reserve of 1 MiB: the free-space check before each commit then
	// barely narrows the race (the other program takes the last MiB
	// between the check and Badger's write), so what the test shows is
	// that Badger never writes a page without a block (prealloc.go).
	diskRace(t, "448m", nil, "--reserve", "1MiB", "--ballast", "16MiB")
}

// TestDiskRaceTables is TestDiskRace with nothing between Badger's table
// files and the other program: no ballast, and memtables of 512 KiB, so
// that Badger flushes a memtable into a new table file (and compacts
// tables into new ones) several times a second, many of them while the
// disk is full. Badger writes a table through a memory map of the file it
// creates; the patched Badger (third_party/badger) allocates the file's
// blocks first, so a full disk fails the flush or compaction with ENOSPC,
// which Badger retries, rather than killing the server with SIGBUS. Badger's
// log (CUSTODY_BADGER_LOG) counts the refusals: the test fails if none
// happened, as it then tested nothing.
func TestDiskRaceTables(t *testing.T) {
	if testing.Short() {
		t.Skip("disk-race test: skipped in -short mode")
	}
	r := diskRace(t, "448m", []string{"CUSTODY_BADGER_LOG=1"}, "--reserve", "1MiB", "--ballast", "0", "--memtable", "512KiB")
	flushes, compactions := 0, 0
	for _, log := range r.logs {
		for _, line := range strings.Split(log, "\n") {
			if !strings.Contains(line, "while allocating") || !strings.Contains(line, "no space left on device") {
				continue
			}
			if strings.Contains(line, "flushing memtable") {
				flushes++
			} else {
				compactions++
			}
		}
	}
	t.Logf("table files refused for a full disk (ENOSPC, retried by Badger): %d in memtable flushes, %d in compactions", flushes, compactions)
	if flushes+compactions == 0 {
		t.Errorf("no table file met a full disk: the test did not test what it is for")
	}
}

// raceResult is what diskRace saw.
type raceResult struct {
	logs []string // the server's log of each run
}

// diskRace runs the disk race on a tmpfs of fsSize, the server started
// with env and flags.
func diskRace(t *testing.T, fsSize string, env []string, flags ...string) raceResult {
	t.Helper()
	mnt := tmpfsMount(t, fsSize)
	bin := custodyBinary(t)
	dir := filepath.Join(mnt, "ledger")
	li := initLedger(t, bin, dir, "diskrace.test/custody")
	addr := freeAddr(t)
	sp := startServerEnv(t, bin, dir, addr, env, flags...)
	e := newAbuseEnvOn(t, bin, li, sp)
	var res raceResult
	keepLog := func(sp *serverProc) {
		b, _ := os.ReadFile(sp.logPath)
		res.logs = append(res.logs, string(b))
	}

	var (
		mu     sync.Mutex
		acked  = map[uint64]string{} // index -> receipt id
		full   atomic.Int64
		others []error
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, a := range e.honest {
		rt := client.NewRuntime(newClient(t, sp.url, e.vkey, -1), a.priv, a.name, nil) // no retries: see every answer
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				id := client.NewID("race")
				rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
				rec, err := rt.Receipt(rctx, &statement.ReceiptDoc{ReceiptID: id, Workflow: a.wf, StepID: "step",
					Action: "act", Target: "t/x", AuthorizationRef: a.grant, Result: statement.ResultPending, ScopeHash: a.hash})
				rcancel()
				var he *client.HTTPError
				switch {
				case err == nil:
					mu.Lock()
					acked[rec.Index] = id
					mu.Unlock()
				case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable && he.RetryAfter > 0 && he.ReasonCode == api.CodeDiskFull:
					full.Add(1)
					time.Sleep(20 * time.Millisecond)
				case ctx.Err() != nil:
				default:
					mu.Lock()
					others = append(others, err)
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	// died fails the test with the server's last words.
	died := func(when string) {
		t.Helper()
		cancel()
		wg.Wait()
		what := "the server died"
		if tableBuildSIGBUS(sp.logTail()) {
			what = "the server died of SIGBUS in Badger's table build (a memtable flush or a compaction writing a new table file through a memory map)"
		}
		t.Fatalf("%s: %s while another program filled its disk:\n%s", when, what, sp.logTail())
	}
	// resumed waits until appends are acknowledged again (the space is
	// back; a flush Badger failed for a full disk is retried each second).
	resumed := func() bool {
		n := count()
		for deadline := time.Now().Add(30 * time.Second); count() == n && time.Now().Before(deadline) && sp.alive(); {
			time.Sleep(100 * time.Millisecond)
		}
		return count() > n
	}
	const rounds = 6
	for round := 0; round < rounds; round++ {
		if !resumed() {
			if !sp.alive() {
				died(fmt.Sprintf("round %d", round))
			}
			t.Errorf("round %d: no append acknowledged with the disk free", round)
		}
		time.Sleep(time.Second) // appends with room
		cycles, err := raceFill(mnt, 3*time.Second)
		if err != nil {
			t.Fatalf("round %d: filling the disk: %v", round, err)
		}
		t.Logf("round %d: the other program filled the disk %d times", round, cycles)
		if !sp.alive() {
			died(fmt.Sprintf("round %d", round))
		}
	}
	// Space is back: appends resume by themselves.
	ok := resumed()
	cancel()
	wg.Wait()
	t.Logf("%d rounds of a racing writer: %d appends acknowledged, %d answered 503 disk_full, %d other errors", rounds, len(acked), full.Load(), len(others))
	if !sp.alive() {
		died("after the rounds")
	}
	if !ok {
		t.Errorf("appends did not resume once the space was freed")
	}
	if len(others) > 0 {
		t.Errorf("answers other than 200 and 503 disk_full: %v", others[:min(len(others), 5)])
	}
	if full.Load() == 0 {
		t.Errorf("no append was answered disk_full: the filesystem never filled")
	}
	// Restart, then every acknowledged entry is there, as acknowledged.
	if err := sp.terminate(); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, sp.logTail())
	}
	keepLog(sp)
	sp = startServerEnv(t, bin, dir, addr, env, flags...)
	e.sp = sp
	size := e.logSize()
	var lo, hi uint64 = ^uint64(0), 0
	for i := range acked {
		lo, hi = min(lo, i), max(hi, i)
	}
	if hi >= size {
		t.Fatalf("acknowledged entry %d is beyond the log's %d entries after a restart", hi, size)
	}
	for _, en := range e.newEntries(lo, hi+1) {
		if id, ok := acked[en.Index]; ok && en.ID != id {
			t.Fatalf("entry %d is %s, acknowledged as %s", en.Index, en.ID, id)
		}
	}
	if err := sp.terminate(); err != nil {
		t.Fatalf("final shutdown: %v", err)
	}
	keepLog(sp)
	out := runCLI(t, bin, "audit", "--dir", dir)
	t.Logf("every acknowledged entry is in the log; audit: %s", firstLine(out))
	return res
}

// tableBuildSIGBUS reports whether a server's last words are a SIGBUS in
// Badger's table build (a memtable flush or a compaction writing a new
// table through a memory map at the instant another program took the last
// block): what the patched Badger (third_party/badger) prevents.
func tableBuildSIGBUS(tail string) bool {
	// Only the faulting goroutine's frames: the first goroutine of the trace.
	if i := strings.Index(tail, "\ngoroutine "); i >= 0 {
		if j := strings.Index(tail[i+1:], "\ngoroutine "); j >= 0 {
			tail = tail[:i+1+j]
		}
	}
	return strings.Contains(tail, "SIGBUS") &&
		(strings.Contains(tail, "badger/v4/table.CreateTable") || strings.Contains(tail, "badger/v4/table.(*buildData)"))
}
