package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// # A full disk
//
// Badger writes its write-ahead logs and value logs through memory maps
// of files it creates sparse. When the filesystem has no block left for a
// page it writes, the kernel answers with SIGBUS and the whole process
// dies. prealloc.go allocates the logs' blocks ahead of each commit, and
// the patched Badger (third_party/badger) a new table's before a flush
// or compaction writes it; what is left is the value log header a start
// writes. The reserve that checkSpace keeps free is only free space:
// another program can take it. The ballast also keeps a flush or a
// compaction from failing (and waiting) as soon as another program fills
// the disk.
//
// So the store also keeps a ballast that only custody can give back, in
// two files of half BallastBytes each, allocated block by block
// (fallocate):
//
//   - D/reserve.ballast is for what Badger has in flight when the disk
//     fills (a flush, a compaction, the header a start writes): a watcher
//     looks at the filesystem every second (and every commit looks too)
//     and deletes it when less than half its size is free;
//   - D/flush.ballast is for the memtable flush of a close or of a start
//     that replays a write-ahead log: it is deleted only right before
//     Badger needs it (Close, Open), never on the watcher's tick, so that
//     another program still writing cannot take it in the meantime (as it
//     takes whatever reserve.ballast gives back).
//
// While less than the reserve is free, or either file is given back,
// commits fail with storage.ErrDiskFull (nothing is acknowledged; the
// server answers 503 with Retry-After). Once the reserve and the whole
// ballast fit again, the files are allocated again and commits resume,
// with no restart.

// The ballast files, in the data folder.
const (
	ballastName      = "reserve.ballast"
	flushBallastName = "flush.ballast"
)

// ballast is the store's ballast files and the watcher that keeps them.
type ballast struct {
	size    int64 // both files
	reserve int64
	dir     string

	mu    sync.Mutex
	parts [2]ballastFile // guarded by mu: reserve.ballast, flush.ballast

	stop chan struct{}
	done chan struct{}
}

// ballastFile is one ballast file.
type ballastFile struct {
	path string
	size int64
	held bool // the file is allocated
}

// freeBytes is the space an unprivileged writer may still take on the
// filesystem of dir.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

func newBallast(dir string, size, reserve int64) *ballast {
	b := &ballast{size: size, reserve: reserve, dir: dir, stop: make(chan struct{}), done: make(chan struct{})}
	for i, name := range []string{ballastName, flushBallastName} {
		f := &b.parts[i]
		f.path, f.size = filepath.Join(dir, name), size/2
		if st, err := os.Stat(f.path); err == nil && st.Size() == f.size {
			f.held = true
		}
	}
	b.check()
	go b.watch()
	return b
}

// check releases reserve.ballast or retakes either file as the free space
// requires.
func (b *ballast) check() {
	if b == nil || b.size <= 0 {
		return
	}
	free, err := freeBytes(b.dir)
	if err != nil {
		return
	}
	b.checkFree(free)
}

// checkFree is check given the free space just read (a commit's statfs,
// so that a commit looks at the filesystem once).
func (b *ballast) checkFree(free int64) {
	if b == nil || b.size <= 0 {
		return
	}
	var err error
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := &b.parts[0]; f.held && free < f.size/2 {
		// Another writer took the reserve: give Badger room to finish
		// what it has in flight.
		f.remove()
		return
	}
	for i := range b.parts {
		if f := &b.parts[i]; !f.held && free >= b.reserve+b.size {
			if err := allocate(f.path, f.size); err == nil {
				f.held = true
			} else {
				os.Remove(f.path)
			}
			if free, err = freeBytes(b.dir); err != nil {
				return
			}
		}
	}
}

// remove gives the file back.
func (f *ballastFile) remove() {
	if err := os.Remove(f.path); err == nil || errors.Is(err, os.ErrNotExist) {
		f.held = false
	}
}

// releaseForFlush gives both files back now, whatever the free space:
// Badger is about to flush a memtable (Close, or Open replaying a
// write-ahead log).
func (b *ballast) releaseForFlush() {
	if b == nil || b.size <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.parts {
		if f := &b.parts[i]; f.held {
			f.remove()
		}
	}
}

// allocate makes path a file of size with every block allocated.
func allocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Size() > size {
		// A ballast of an earlier size.
		if err := f.Truncate(size); err != nil {
			return err
		}
	}
	return f.Sync()
}

// released reports whether a ballast file is given back (an emergency: no
// commit may go until it is allocated again).
func (b *ballast) released() bool {
	if b == nil || b.size <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.parts[0].held || !b.parts[1].held
}

func (b *ballast) watch() {
	defer close(b.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.check()
		}
	}
}

func (b *ballast) close() {
	if b == nil {
		return
	}
	close(b.stop)
	<-b.done
}

// diskFullError says why a commit waits for space.
func diskFullError(free, reserve int64, dir string, released bool) string {
	s := fmt.Sprintf("%d MiB free on the filesystem of %s, and custody keeps %d MiB in reserve", free>>20, dir, reserve>>20)
	if released {
		s += " (its ballast file is given back to let the database finish its writes)"
	}
	return s + "; appends resume once space is freed"
}
