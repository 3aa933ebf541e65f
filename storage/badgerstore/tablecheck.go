package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"golang.org/x/sys/unix"

	"github.com/custodylog/custody/internal/durable"
)

// errDamagedTable is Open's error when a table file fails its checksums.
var errDamagedTable = errors.New("a table file fails its checksums (the storage engine would read its damaged blocks as missing keys)")

// checkTables checks the checksum of every block of every table file in
// dbDir that memo and known do not hold (files found whole before, by
// this process or, recorded in the data folder, by an earlier read-write
// open) and describes each file that fails.
//
// Badger checks a table's index when it opens the table, never its data
// blocks by default; its own block check (ChecksumVerificationMode)
// dereferences a nil block on the first failure, which kills the process
// from one of its goroutines, and a read that fails the check returns the
// key as absent, not an error. So the check runs here, one file at a time,
// with Badger's table reader and a recover.
//
// Cost: one read of every table file (CRC32C, with Snappy decoding),
// measured in docs/DECISIONS.md (storage).
func checkTables(dbDir string, bo badger.Options, memo, known *tableSet) []string {
	ents, err := os.ReadDir(dbDir)
	if err != nil {
		return nil // Badger's open reports a missing folder
	}
	var out []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		p := filepath.Join(dbDir, e.Name())
		id, ok := tableIdentity(p)
		if ok && (memo.has(id) || known.has(id)) {
			continue
		}
		if err := checkTable(p, bo); err != nil {
			out = append(out, fmt.Sprintf("%s fails its checksums: %v", p, err))
			continue
		}
		// The decoded blocks are garbage now: collect them before the
		// next table, so that checking a large folder does not grow the
		// heap by the size of its tables.
		runtime.GC()
		if ok {
			memo.add(id)
		}
	}
	sort.Strings(out)
	return out
}

// tableID identifies a table file's bytes as far as the filesystem tells:
// a table file is written once and never changed, and any write to it
// (or a file put in its place) changes its change time, which no
// program can set back.
type tableID struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

func tableIdentity(path string) (tableID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return tableID{}, false
	}
	return tableID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}

// verifiedName is the file, in the data folder beside db, where a
// read-write open records the table files it found whole, one line each
// (name, device, inode, size, modification and change times), so that
// the next open reads only the tables written since: an open's cost
// follows what was written since the last one, not the log's history.
// A missing or unreadable record means every table is checked.
const verifiedName = "tables.verified"

// loadVerified reads dir's record of table files found whole (an empty
// set when there is none or it does not parse).
func loadVerified(dir string) *tableSet {
	s := &tableSet{m: map[tableID]bool{}}
	b, err := os.ReadFile(filepath.Join(dir, verifiedName))
	if err != nil {
		return s
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		var name string
		var id tableID
		if n, err := fmt.Sscanf(line, "%s %d %d %d %d %d", &name, &id.dev, &id.ino, &id.size, &id.mtime, &id.ctime); n != 6 || err != nil {
			return &tableSet{m: map[tableID]bool{}} // damaged: check everything
		}
		s.m[id] = true
	}
	return s
}

// saveVerified records in dir the table files of dbDir as found whole;
// the caller has just checked them all. Failing to write it costs the
// next open a full check, nothing else.
func saveVerified(dir, dbDir string) error {
	ents, err := os.ReadDir(dbDir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		if id, ok := tableIdentity(filepath.Join(dbDir, e.Name())); ok {
			fmt.Fprintf(&b, "%s %d %d %d %d %d\n", e.Name(), id.dev, id.ino, id.size, id.mtime, id.ctime)
		}
	}
	return durable.Replace(filepath.Join(dir, verifiedName), []byte(b.String()), 0o644)
}

// checkedTables are the table files this process found whole: the
// read-write open that follows the read-only check of a folder (a ledger
// opens both) does not read them again.
var checkedTables = &tableSet{m: map[tableID]bool{}}

type tableSet struct {
	mu sync.Mutex
	m  map[tableID]bool
}

// has reports whether id was found whole (never, for a nil set).
func (s *tableSet) has(id tableID) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

func (s *tableSet) add(id tableID) {
	if s != nil {
		s.mu.Lock()
		s.m[id] = true
		s.mu.Unlock()
	}
}

// tablesRead counts the table files checkTable has read, for the tests.
var tablesRead atomic.Int64

// checkTable checks one table file.
func checkTable(path string, bo badger.Options) (err error) {
	tablesRead.Add(1)
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil && !errors.Is(err, z.NewFile) {
		return err
	}
	var t *table.Table
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a damaged block cannot be decoded (%v)", r)
		}
		if t != nil {
			t.MmapFile.Close(-1)
		}
	}()
	t, err = table.OpenTable(mf, table.Options{
		ChkMode:     options.NoVerification,
		Compression: bo.Compression,
		BlockSize:   bo.BlockSize,
	})
	if err != nil {
		return err // OpenTable closed the file
	}
	return t.VerifyChecksum()
}
