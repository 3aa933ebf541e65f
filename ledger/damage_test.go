package ledger

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
)

// crashedFolder makes a ledger, lets a child process append to it until it
// has acknowledged at least acks entries, and kills it with SIGKILL. It
// returns the folder and the largest tree size the child was shown.
func crashedFolder(t *testing.T, acks int) (string, uint64) {
	t.Helper()
	w := newWorld(t, Options{Clock: time.Now})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	for i := 0; i < crashAgents; i++ {
		a := newActor(t, fmt.Sprintf("agent:crash%d", i))
		c := w.confirm(alice, fmt.Sprintf("crash_c%d", i), grant(a, "wf_crash", []string{"t/*"}, []string{"act"}, nil, nil, 86400))
		w.must(alice, c, authority.Accepted, "")
		if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, fmt.Sprintf("agent%d.key", i)), a.priv, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	w.l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), "CUSTODY_CRASH_CHILD="+w.dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked := map[uint64]string{}
	var shown uint64
	for sc.Scan() && len(acked) < acks {
		parseAck(t, sc.Text(), acked, func(size uint64, _ string) { shown = max(shown, size) })
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
		parseAck(t, sc.Text(), acked, func(size uint64, _ string) { shown = max(shown, size) })
	}
	cmd.Wait()
	if len(acked) < acks {
		t.Fatalf("the child acknowledged %d entries, want %d", len(acked), acks)
	}
	return w.dir, shown
}

// folderSums hashes every file under dir, so a test can tell that nothing
// in it changed.
func folderSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSums(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var diff []string
	for p, h := range before {
		if after[p] != h {
			diff = append(diff, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diff = append(diff, p+" (new)")
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Fatalf("%s changed the folder: %s", what, strings.Join(diff, ", "))
	}
}

// dbFiles lists the Badger files of dir with a suffix, largest first.
func dbFiles(t *testing.T, dir, suffix string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "db", "*"+suffix))
	sort.Slice(m, func(i, j int) bool { return dataSize(m[i]) > dataSize(m[j]) })
	return m
}

func dataSize(p string) int64 {
	b, _ := os.ReadFile(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return int64(i + 1)
		}
	}
	return 0
}

// logHeaderSize is the size of a Badger log file's header.
const logHeaderSize = 20

// flip inverts n bytes of the file at off.
func flip(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// refusedUnchanged opens dir for serving, which must fail with a
// *DamageError wrapping want, and leave every byte of the folder as it was;
// then opens it read-only, which must also change nothing and report it.
func refusedUnchanged(t *testing.T, dir string, want error, mention string) {
	t.Helper()
	before := folderSums(t, dir)
	l, err := Open(dir, Options{})
	if err == nil {
		h := l.Head()
		l.Close()
		t.Fatalf("a damaged folder opened for serving (head %d)", h.Size)
	}
	var de *DamageError
	if !errors.As(err, &de) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("open: want a DamageError wrapping %v, got %v", want, err)
	}
	if mention != "" && !strings.Contains(err.Error(), mention) {
		t.Errorf("the error does not name %s: %v", mention, err)
	}
	t.Logf("refused: %v", err)
	sameSums(t, "a refused open", before, folderSums(t, dir))
	ro, err := Open(dir, Options{ReadOnly: true})
	if err == nil {
		if ro.Damage() == nil {
			t.Errorf("a read-only open reports no damage")
		}
		ro.Close()
	} else if !errors.As(err, &de) {
		t.Errorf("read-only open: %v", err)
	}
	sameSums(t, "a read-only open", before, folderSums(t, dir))
}

// TestRollbackRefused: 64 bytes flipped in a write-ahead log after a
// SIGKILL made the store come back short of what the log had signed. The
// server must refuse to start rather than sign a different history.
func TestRollbackRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	dir, shown := crashedFolder(t, 300)
	mems := dbFiles(t, dir, ".mem")
	if len(mems) == 0 {
		t.Fatal("no write-ahead log after the kill")
	}
	flip(t, mems[0], logHeaderSize+100, 64)
	refusedUnchanged(t, dir, ErrRolledBack, SignedHeadName)
	_ = shown
}

// TestManifestDamageRefused: a deleted or truncated MANIFEST made Badger
// start empty and delete every table file.
func TestManifestDamageRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	for _, damage := range []string{"deleted", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			w := newWorld(t, Options{})
			alice := newActor(t, "user:alice")
			w.enroll(alice)
			for i := 0; i < 20; i++ {
				w.enroll(newActor(t, fmt.Sprintf("user:u%d", i)))
			}
			w.l.Close() // flushes the memtable to a table file
			m := filepath.Join(w.dir, "db", "MANIFEST")
			if len(dbFiles(t, w.dir, ".sst")) == 0 {
				t.Fatal("no table file")
			}
			if damage == "deleted" {
				os.Remove(m)
			} else {
				st, _ := os.Stat(m)
				os.Truncate(m, st.Size()/2)
			}
			refusedUnchanged(t, w.dir, nil, "MANIFEST")
		})
	}
}

// TestFlippedVlogRefused: a value log with flipped bytes was cut in half by
// opening it, by serve and by the reading commands alike.
func TestFlippedVlogRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	dir, _ := crashedFolder(t, 300)
	vlogs := dbFiles(t, dir, ".vlog")
	last := vlogs[0]
	for _, v := range vlogs {
		if v > last && dataSize(v) > logHeaderSize {
			last = v
		}
	}
	n := dataSize(last)
	if n < 64<<10 {
		t.Fatalf("the last value log holds only %d bytes", n)
	}
	flip(t, last, n/2, 64)
	refusedUnchanged(t, dir, ErrDamaged, filepath.Base(last))
}

// TestCorruptTableRefused: a damaged table file made entries vanish.
func TestCorruptTableRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	for i := 0; i < 20; i++ {
		w.enroll(newActor(t, fmt.Sprintf("user:u%d", i)))
	}
	w.l.Close()
	ssts := dbFiles(t, w.dir, ".sst")
	if len(ssts) == 0 {
		t.Fatal("no table file")
	}
	st, _ := os.Stat(ssts[0])
	flip(t, ssts[0], st.Size()/3, 256)
	refusedUnchanged(t, w.dir, ErrDamaged, "")
}

// BenchmarkSignedHeadWrite measures what each batch pays to keep its
// checkpoint in the signed-head file: one 4 KiB pwrite and fdatasync.
func BenchmarkSignedHeadWrite(b *testing.B) {
	h, err := openHeadFile(filepath.Join(b.TempDir(), SignedHeadName), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer h.close()
	note := []byte(strings.Repeat("x", 300))
	b.ResetTimer()
	for range b.N {
		if err := h.write(note); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDamagedTableBlockRefused: 64 bytes inverted in the middle of the
// largest table file of a cleanly stopped ledger (inside a data block,
// where Badger never checked): the server must refuse to start, naming
// the file, rather than serve the damaged blocks' entries as missing and
// sign new checkpoints over them.
func TestDamagedTableBlockRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	w := newWorld(t, Options{})
	for i := 0; i < 300; i++ {
		w.enroll(newActor(t, fmt.Sprintf("user:u%d", i)))
	}
	w.l.Close()
	ssts := dbFiles(t, w.dir, ".sst")
	if len(ssts) == 0 {
		t.Fatal("no table file")
	}
	st, _ := os.Stat(ssts[0])
	flip(t, ssts[0], st.Size()/2, 64)
	refusedUnchanged(t, w.dir, ErrDamaged, filepath.Base(ssts[0]))
}
