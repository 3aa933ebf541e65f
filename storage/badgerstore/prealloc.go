package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/custodylog/custody/storage"
)

// # Blocks before writes
//
// Badger writes its write-ahead log (*.mem) and value log (*.vlog)
// through memory maps of sparse files: a page with no block behind it is
// given one when first written, and when the filesystem has none left,
// the kernel kills the process with SIGBUS. The reserve that checkSpace
// keeps is only free space at the moment it looks; another program
// filling the disk between that look and Badger's write takes it.
//
// So no commit writes a page whose block is not already allocated:
//
//   - the next write-ahead log is created before Badger needs it: an
//     empty file named as Badger will name it, with its first blocks
//     allocated beyond its end (fallocate KEEP_SIZE). Badger, finding it
//     empty, sizes it (ftruncate, which keeps the blocks) and writes the
//     commit that starts it into blocks that exist;
//   - the write-ahead log and the value log being written are allocated
//     ahead of where the next commit can write: custody counts an upper
//     bound of what each commit adds to each (keys, values or pointers,
//     entry headers, the entry that ends the transaction) and allocates
//     past it before the commit.
//
// When the blocks cannot be allocated (the disk is full), the commit is
// refused with storage.ErrDiskFull before anything is written; the next
// commit tries again.
//
// What stays outside: the 20-byte header Badger writes into a new value
// log when it starts one (at open, and after each 256 MiB of values); the
// ballast (ballast.go) is for it. The table files a memtable flush or a
// compaction writes get their blocks from the patched Badger itself
// (third_party/badger: table.CreateTable allocates before it maps), and a
// full disk fails the flush or compaction, which Badger retries.

// prealloc allocates the blocks of Badger's logs ahead of its writes.
type prealloc struct {
	dir string // the Badger folder

	mu       sync.Mutex
	curMem   int   // guarded by mu: the write-ahead log being written
	walEnd   int64 // guarded by mu: an upper bound of its write offset
	walHeld  int64 // guarded by mu: its blocks are allocated up to here
	nextMem  int   // guarded by mu: the fid of the write-ahead log Badger creates next
	memReady bool  // guarded by mu: nextMem's file exists, its first memAhead bytes allocated
	vlogFid  int   // guarded by mu: the value log being written
	vlogEnd  int64 // guarded by mu: an upper bound of its write offset
	vlogHeld int64 // guarded by mu: its blocks are allocated up to here
}

// memFileSize is the size Badger gives a write-ahead log.
const memFileSize = 2 * memTableSize

// memAhead is what a write-ahead log made ahead has allocated: its
// header and the largest commit (budget) with room to spare. logAhead is
// how far past the next commit the logs being written are allocated.
// Together with the value log's, custody holds about 16 MiB of blocks
// ahead of Badger.
const (
	memAhead = 4 << 20
	logAhead = 4 << 20
)

// entryOverhead bounds what Badger adds to a key and value in a log: the
// key's 8-byte version, a header of at most 22 bytes, a 4-byte CRC;
// commitOverhead bounds the entry that ends each transaction.
const (
	entryOverhead  = 8 + 22 + 4
	commitOverhead = 128
)

// logHeader is the size of a log's header.
const logHeader = 20

func memName(fid int) string  { return fmt.Sprintf("%05d.mem", fid) }
func vlogName(fid int) string { return fmt.Sprintf("%06d.vlog", fid) }

// removeEmptyLogs deletes the empty write-ahead logs a prealloc created
// ahead of Badger (Badger cannot open an empty one), before Badger opens
// dbDir.
func removeEmptyLogs(dbDir string) error {
	ents, err := os.ReadDir(dbDir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".mem") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() == 0 {
			if err := os.Remove(filepath.Join(dbDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// newPrealloc starts allocating ahead of the Badger folder dbDir, which
// Badger has just opened read-write (so its newest write-ahead log and
// value log are the ones being written, the value log new and empty).
func newPrealloc(dbDir string) *prealloc {
	p := &prealloc{dir: dbDir, walEnd: logHeader, vlogEnd: logHeader}
	maxMem, maxVlog := 0, 0
	if ents, err := os.ReadDir(dbDir); err == nil {
		for _, e := range ents {
			n := e.Name()
			if fid, err := strconv.Atoi(strings.TrimSuffix(n, ".mem")); err == nil && strings.HasSuffix(n, ".mem") {
				maxMem = max(maxMem, fid)
			}
			if fid, err := strconv.Atoi(strings.TrimSuffix(n, ".vlog")); err == nil && strings.HasSuffix(n, ".vlog") {
				maxVlog = max(maxVlog, fid)
			}
		}
	}
	p.curMem, p.nextMem, p.vlogFid = maxMem, maxMem+1, maxVlog
	p.mu.Lock()
	p.prepareMem()
	p.mu.Unlock()
	return p
}

// prepareMem creates the write-ahead log Badger will start next, with
// its first blocks allocated. p.mu is held.
func (p *prealloc) prepareMem() error {
	if p.memReady {
		return nil
	}
	path := filepath.Join(p.dir, memName(p.nextMem))
	if err := allocateRange(path, 0, memAhead, true); err != nil {
		os.Remove(path)
		return err
	}
	p.memReady = true
	return nil
}

// rotated reports whether Badger has started the write-ahead log made
// ahead (it is no longer empty), and follows it. p.mu is held.
func (p *prealloc) rotated() bool {
	st, err := os.Stat(filepath.Join(p.dir, memName(p.nextMem)))
	if err != nil || st.Size() == 0 {
		return false
	}
	p.curMem, p.nextMem, p.memReady = p.nextMem, p.nextMem+1, false
	p.walHeld = memAhead
	return true
}

// before makes sure a commit that adds at most wbytes to the write-ahead
// log and vbytes to the value log writes only allocated blocks, or fails
// with storage.ErrDiskFull.
func (p *prealloc) before(wbytes, vbytes int64) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rotated() {
		// Not seen after the commit that started it (that commit
		// failed): assume it wrote all it could.
		p.walEnd = memAhead
	}
	if err := p.prepareMem(); err != nil {
		return fmt.Errorf("%w: allocating the next write-ahead log of %s: %v", storage.ErrDiskFull, p.dir, err)
	}
	if want := p.walEnd + wbytes; want > p.walHeld && p.curMem > 0 {
		end := want + logAhead
		if err := allocateRange(filepath.Join(p.dir, memName(p.curMem)), p.walHeld, end, false); err != nil {
			return fmt.Errorf("%w: allocating the write-ahead log of %s: %v", storage.ErrDiskFull, p.dir, err)
		}
		p.walHeld = end
	}
	for { // Badger started a new value log after the last commit
		if _, err := os.Stat(filepath.Join(p.dir, vlogName(p.vlogFid+1))); err != nil {
			break
		}
		p.vlogFid++
		p.vlogEnd, p.vlogHeld = logHeader, 0
	}
	if want := p.vlogEnd + vbytes; want > p.vlogHeld {
		end := want + logAhead
		if err := allocateRange(filepath.Join(p.dir, vlogName(p.vlogFid)), p.vlogHeld, end, false); err != nil {
			return fmt.Errorf("%w: allocating the value log of %s: %v", storage.ErrDiskFull, p.dir, err)
		}
		p.vlogHeld = end
	}
	return nil
}

// after counts a commit's bytes, and makes the next write-ahead log
// ahead if the commit started a new one (a failure is retried by the
// next commit's before).
func (p *prealloc) after(wbytes, vbytes int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rotated() {
		p.walEnd = logHeader + wbytes
	} else {
		p.walEnd += wbytes
	}
	p.vlogEnd += vbytes
	p.prepareMem()
}

// allocateRange allocates the blocks of path from off to end (creating
// the file when create is set); keepSize allocates past the file's end
// without growing it. Within the file's size (Badger's logs are sized
// ahead, sparse), it only allocates what is not yet.
func allocateRange(path string, off, end int64, keepSize bool) error {
	flags := os.O_WRONLY
	if keepSize {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if !keepSize {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		end = min(end, st.Size()) // never grow Badger's file
		if end <= off {
			return nil
		}
	}
	mode := uint32(0)
	if keepSize {
		mode = unix.FALLOC_FL_KEEP_SIZE
	}
	if err := unix.Fallocate(int(f.Fd()), mode, off, end-off); err != nil {
		return err
	}
	if keepSize {
		return f.Sync()
	}
	return nil
}

// logBytes bounds what committing w adds to the write-ahead log and to
// the value log.
func logBytes(w [][2][]byte) (wal, vlog int64) {
	wal = commitOverhead
	for _, kv := range w {
		k, v := int64(len(kv[0])), int64(len(kv[1]))
		if v >= valueThreshold {
			vlog += k + v + entryOverhead
			v = 12 // the pointer the write-ahead log holds
		}
		wal += k + v + entryOverhead
	}
	return wal, vlog
}
