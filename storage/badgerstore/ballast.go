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
// Badger writes its write-ahead logs, value logs and new tables through
// memory maps of files it creates sparse. When the filesystem has no block
// left for a page it writes, the kernel answers with SIGBUS and the whole
// process dies: a memtable flush, a compaction, the value log header a
// start writes, the flush a clean shutdown does. The reserve that
// checkSpace keeps free is only free space: another program can take it.
//
// So the store also keeps a ballast: a file (D/reserve.ballast) of
// BallastBytes, allocated block by block (fallocate), that only custody
// can give back. A watcher looks at the filesystem every second (and every
// commit looks too):
//
//   - while less than the reserve is free, commits fail with
//     storage.ErrDiskFull (nothing is acknowledged; the server answers 503
//     with Retry-After);
//   - when less than half the ballast is free, the ballast is deleted,
//     so that what Badger already has in flight (a flush, a compaction,
//     opening or closing) has blocks to write into instead of SIGBUS;
//   - once the reserve and the ballast fit again, the ballast is
//     allocated again and commits resume, with no restart.
//
// Open releases the ballast first when the disk is already full, so a
// start while full succeeds (and answers ErrDiskFull to commits).

// ballastName is the ballast file, in the data folder.
const ballastName = "reserve.ballast"

// ballast is the store's ballast file and the watcher that keeps it.
type ballast struct {
	path    string
	size    int64
	reserve int64
	dir     string

	mu   sync.Mutex
	held bool // guarded by mu: the file is allocated

	stop chan struct{}
	done chan struct{}
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
	b := &ballast{path: filepath.Join(dir, ballastName), size: size, reserve: reserve, dir: dir,
		stop: make(chan struct{}), done: make(chan struct{})}
	if st, err := os.Stat(b.path); err == nil && st.Size() == size {
		b.held = true
	}
	b.check()
	go b.watch()
	return b
}

// check releases or retakes the ballast as the free space requires.
func (b *ballast) check() {
	if b == nil || b.size <= 0 {
		return
	}
	free, err := freeBytes(b.dir)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.held && free < b.size/2:
		// Another writer took the reserve: give Badger room to finish
		// what it has in flight.
		if err := os.Remove(b.path); err == nil || errors.Is(err, os.ErrNotExist) {
			b.held = false
		}
	case !b.held && free >= b.reserve+b.size:
		if err := allocate(b.path, b.size); err == nil {
			b.held = true
		} else {
			os.Remove(b.path)
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
	return f.Sync()
}

// released reports whether the ballast is given back (an emergency: no
// commit may go until it is allocated again).
func (b *ballast) released() bool {
	if b == nil || b.size <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.held
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
