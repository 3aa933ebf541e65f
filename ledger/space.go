package ledger

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrDiskFull is returned (wrapped) when a batch is not committed because
// the data folder's filesystem is nearly full.
//
// Badger writes its value log and memtables through memory maps. When a
// filesystem has no room for a mapped page, the kernel answers with SIGBUS
// and the process dies: no error reaches the caller. So the ledger refuses
// to commit while less than Options.ReserveBytes would stay free, fails the
// batch with this error (nothing is acknowledged), and resumes by itself
// once space is freed.
var ErrDiskFull = errors.New("ledger: disk nearly full")

// checkSpace fails if committing about need more bytes would leave less
// than the reserve free on the data folder's filesystem.
func (l *Ledger) checkSpace(need int) error {
	var st unix.Statfs_t
	if err := unix.Statfs(l.dir, &st); err != nil {
		return nil // cannot tell; Badger's own errors still apply
	}
	free := st.Bavail * uint64(st.Bsize)
	want := uint64(l.opts.ReserveBytes) + uint64(need)
	if free < want {
		return fmt.Errorf("%w: %d MiB free on the filesystem of %s, and custody keeps %d MiB in reserve; appends resume once space is freed",
			ErrDiskFull, free>>20, l.dir, l.opts.ReserveBytes>>20)
	}
	return nil
}
