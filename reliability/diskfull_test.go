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
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// loopMount makes a small ext4 filesystem in a file and mounts it, for a
// test that must fill a disk. It needs root, mount and mkfs.ext4
// (e2fsprogs); without them the test skips, except under CI, where it
// fails (.ci/reliability installs them).
func loopMount(t *testing.T, size int64) string {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		testenv.Need(t, "loop-mounted filesystem: "+format+" (.ci/reliability installs e2fsprogs and runs as root)", args...)
	}
	if os.Geteuid() != 0 {
		need("needs root to mount")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil && testenv.CI() {
		// The project's own install script (Debian's e2fsprogs).
		if out, err := exec.Command("bash", "../scripts/e2fsprogs.sh").CombinedOutput(); err != nil {
			t.Logf("scripts/e2fsprogs.sh: %v: %s", err, out)
		}
		mkfs, err = exec.LookPath("mkfs.ext4")
	}
	if err != nil {
		need("mkfs.ext4 not found (scripts/e2fsprogs.sh installs it)")
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	// -m 0: no blocks reserved for root, so the test (root) and the
	// server see the same free space.
	if out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		need("mkfs.ext4: %v: %s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		need("mount -o loop: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// fillDisk is the other program: it writes a file in dir until the
// filesystem has no block left, and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	for { // the last few blocks
		if _, err := f.Write(buf[:4096]); err != nil {
			break
		}
	}
	f.Sync()
	return p
}

// TestDiskFullServe: another program takes all the space of the disk a
// server's data folder is on, while honest agents append. The server must
// not crash (Badger writes through memory maps: a page with no block
// behind it is SIGBUS): appends are answered 503 with Retry-After, not
// 500; the server shuts down cleanly and starts again while the disk is
// full; and once the space is freed, appends resume by themselves. Every
// acknowledged entry is then in the log.
func TestDiskFullServe(t *testing.T) {
	if testing.Short() {
		t.Skip("disk-full test: skipped in -short mode")
	}
	mnt := loopMount(t, 400<<20)
	bin := custodyBinary(t)
	dir := filepath.Join(mnt, "ledger")
	li := initLedger(t, bin, dir, "diskfull.test/custody")
	flags := []string{"--reserve", "48MiB", "--ballast", "32MiB"}
	addr := freeAddr(t)
	sp := startServer(t, bin, dir, addr, flags...)
	e := newAbuseEnvOn(t, bin, li, sp)

	// Honest agents append all through the test; each append is
	// acknowledged (200) or refused as disk full (503 with Retry-After);
	// nothing else is acceptable.
	type outcome struct {
		acked  []uint64
		full   int
		others []error
	}
	appendFor := func(d time.Duration) outcome {
		var o outcome
		deadline := time.Now().Add(d)
		a := e.honest[0]
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			rec, err := a.rt.Receipt(ctx, &statement.ReceiptDoc{ReceiptID: client.NewID("full"), Workflow: a.wf, StepID: "step",
				Action: "act", Target: "t/x", AuthorizationRef: a.grant, Result: statement.ResultPending, ScopeHash: a.hash})
			cancel()
			var he *client.HTTPError
			switch {
			case err == nil:
				o.acked = append(o.acked, rec.Index)
			case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable && he.RetryAfter > 0 && he.ReasonCode == api.CodeDiskFull:
				o.full++
				time.Sleep(100 * time.Millisecond)
			default:
				o.others = append(o.others, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
		return o
	}
	var acked []uint64
	before := appendFor(time.Second)
	if len(before.acked) == 0 || len(before.others) > 0 {
		t.Fatalf("before the disk filled: %d acknowledged, errors %v", len(before.acked), before.others)
	}
	acked = append(acked, before.acked...)

	filler := fillDisk(t, mnt)
	// The other program goes on writing: once the server gives back the
	// ballast it keeps for Badger's writes in flight, the other program
	// takes that space too. (What the server keeps for its last flush
	// must not be given back on this account: shutting down below would
	// then write a table file into a disk with no block left, SIGBUS.)
	waitGone := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "reserve.ballast")); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(waitGone) {
			t.Fatalf("with the disk full, the server kept its ballast for 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	fillDisk(t, mnt)
	during := appendFor(3 * time.Second)
	acked = append(acked, during.acked...)
	t.Logf("disk full: %d appends acknowledged, %d answered 503 disk_full, %d other errors", len(during.acked), during.full, len(during.others))
	if during.full == 0 || len(during.others) > 0 {
		t.Fatalf("with the disk full, appends must be answered 503 disk_full with Retry-After: %d were, other errors %v\n%s", during.full, during.others, sp.logTail())
	}
	if !sp.alive() {
		t.Fatalf("the server died with the disk full:\n%s", sp.logTail())
	}
	// Shut down and start again, twice, while the disk is full.
	for round := 0; round < 2; round++ {
		if err := sp.terminate(); err != nil {
			t.Fatalf("round %d: shutdown with the disk full: %v\n%s", round, err, sp.logTail())
		}
		sp = startServer(t, bin, dir, addr, flags...)
		e.sp = sp
		o := appendFor(time.Second)
		if len(o.acked) > 0 || o.full == 0 || len(o.others) > 0 {
			t.Fatalf("round %d: restarted with the disk full: %d acknowledged, %d disk_full, errors %v", round, len(o.acked), o.full, o.others)
		}
	}
	// Space returns: appends resume without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var after outcome
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(after.acked) == 0 {
		o := appendFor(time.Second)
		after.acked, after.others = append(after.acked, o.acked...), append(after.others, o.others...)
	}
	if len(after.acked) == 0 || len(after.others) > 0 {
		t.Fatalf("after space returned: %d acknowledged, errors %v\n%s", len(after.acked), after.others, sp.logTail())
	}
	acked = append(acked, after.acked...)
	// Every acknowledged entry is there, and the log audits clean.
	size := e.logSize()
	for _, i := range acked {
		if i >= size {
			t.Fatalf("acknowledged entry %d is beyond the log's %d entries", i, size)
		}
	}
	e.newEntries(acked[0], size)
	if err := sp.terminate(); err != nil {
		t.Fatalf("final shutdown: %v", err)
	}
	out := runCLI(t, bin, "audit", "--dir", dir)
	t.Logf("%d acknowledged in all; audit: %s", len(acked), firstLine(out))
	_ = fmt.Sprint
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// TestDiskFullCrashStart: a server killed with transactions in its
// write-ahead log must replay them at its next start, and Badger writes
// them into a table file as it opens: with the disk full that write would
// be a SIGBUS. The start uses the flush ballast for it; when another
// program has taken that too, the start is refused with a sentence about
// the full disk (no crash, nothing lost), and succeeds once space returns,
// with every acknowledged entry there.
func TestDiskFullCrashStart(t *testing.T) {
	if testing.Short() {
		t.Skip("disk-full test: skipped in -short mode")
	}
	mnt := loopMount(t, 400<<20)
	bin := custodyBinary(t)
	dir := filepath.Join(mnt, "ledger")
	li := initLedger(t, bin, dir, "diskfull.test/custody")
	flags := []string{"--reserve", "48MiB", "--ballast", "32MiB"}
	addr := freeAddr(t)
	sp := startServer(t, bin, dir, addr, flags...)
	e := newAbuseEnvOn(t, bin, li, sp)
	a := e.honest[0]
	var acked []uint64
	for range 50 {
		rec, err := a.rt.Receipt(context.Background(), &statement.ReceiptDoc{ReceiptID: client.NewID("crash"), Workflow: a.wf, StepID: "step",
			Action: "act", Target: "t/x", AuthorizationRef: a.grant, Result: statement.ResultPending, ScopeHash: a.hash})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, rec.Index)
	}
	filler := fillDisk(t, mnt)
	sp.kill() // the write-ahead log holds the appends above
	fillDisk(t, mnt)

	// Killed with the disk full: the start replays the log into the
	// space of the flush ballast.
	sp = startServer(t, bin, dir, addr, flags...)
	e.sp = sp
	if size := e.logSize(); size <= acked[len(acked)-1] {
		t.Fatalf("after a kill and a start with the disk full: %d entries, last acknowledged %d", size, acked[len(acked)-1])
	}
	sp.kill()

	// Killed again with the log to replay, and the flush ballast taken as
	// well: the start is refused, cleanly.
	os.Remove(filepath.Join(dir, "flush.ballast"))
	fillDisk(t, mnt)
	walWithData := false
	mems, _ := filepath.Glob(filepath.Join(dir, "db", "*.mem"))
	for _, m := range mems {
		if st, err := os.Stat(m); err == nil && st.Size() > 0 {
			walWithData = true
		}
	}
	refused, err := tryStartServer(t, bin, dir, addr, flags...)
	switch {
	case err == nil:
		// The first start's replay left nothing to write at open (the log
		// it replayed was flushed then): a start with nothing to flush
		// must succeed, and did.
		refused.kill()
		t.Logf("start with the disk full and no ballast: nothing to flush, started (write-ahead logs present: %v)", walWithData)
	case strings.Contains(err.Error(), "SIGBUS") || strings.Contains(err.Error(), "fatal error"):
		t.Fatalf("start with the disk full crashed: %v", err)
	case !strings.Contains(err.Error(), "disk") || !strings.Contains(err.Error(), "free some space"):
		t.Fatalf("start with the disk full refused without saying why: %v", err)
	default:
		t.Logf("start with the disk full and no ballast left: refused: %v", err)
	}

	// Space returns: the server starts, and every acknowledged entry is
	// there.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	sp = startServer(t, bin, dir, addr, flags...)
	e.sp = sp
	e.newEntries(acked[0], acked[len(acked)-1]+1)
	if err := sp.terminate(); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, sp.logTail())
	}
	out := runCLI(t, bin, "audit", "--dir", dir)
	if !strings.Contains(string(out), "CLEAN") {
		t.Fatalf("audit: %s", out)
	}
}
