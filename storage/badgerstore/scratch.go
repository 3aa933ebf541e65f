package badgerstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// # Opening a folder without changing it
//
// Badger "repairs" what it cannot read when it opens a folder read-write:
// it cuts a write-ahead log (*.mem) or the last value log (*.vlog) at the
// first entry whose checksum fails, starts empty when the MANIFEST is
// missing, and deletes every table file the MANIFEST does not name. Each
// destroys evidence, and the first two silently roll acknowledged entries
// back. Its own read-only mode refuses any folder left by a crash (the
// write-ahead log always needs its tail cut).
//
// So custody never lets Badger open a data folder it has not checked. It
// first opens a scratch copy: a new folder (under the system's temporary
// folder, so a full data disk does not stop it) holding copies of the
// files Badger may cut or rewrite (MANIFEST, the *.mem files, the last
// value log, the key registry and discard stats, sparse where the
// originals are sparse) and symbolic links to those it only reads (table
// files and older value logs). Whatever Badger does there touches only
// the copies, or removes links. The scratch store is then checked against
// the signed head and at its right edge (package ledger, signedhead.go).
//
// The reading commands (audit, checkpoint, get, prove, export, replay)
// use the scratch store itself (Options.ReadOnly) and never open the
// folder. serve opens the folder only after the scratch copy passed, so
// whatever Badger then cuts was proven harmless on the copy; a failed
// check leaves the folder byte for byte as it was, and the error names
// the files that look damaged.

// scratch is a scratch copy of a Badger folder, opened read-only: table
// files and older value logs are symbolic links (Badger opens them
// O_RDONLY in read-only mode, so it can neither write nor truncate them),
// and the files Badger would cut are copies, cut here where Badger would
// cut them (scanLog), so that the scratch store holds exactly what a
// read-write open of the folder would.
type scratch struct {
	dir string
	// cuts describes each file a read-write open would cut short of its
	// data; damage those whose cut drops committed transactions.
	cuts, damage []string
}

// newScratch makes a scratch copy of the Badger folder src.
func newScratch(src string) (*scratch, error) {
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	dst, err := os.MkdirTemp("", "custody-scratch-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch folder: %w", err)
	}
	s := &scratch{dir: dst}
	maxVlog := ""
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".vlog") && n > maxVlog {
			maxVlog = n
		}
	}
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || n == "LOCK" {
			continue
		}
		if strings.HasSuffix(n, ".mem") {
			if info, err := e.Info(); err == nil && info.Size() == 0 {
				continue // made ahead of Badger, never written (prealloc.go)
			}
		}
		from, to := filepath.Join(src, n), filepath.Join(dst, n)
		if strings.HasSuffix(n, ".sst") || (strings.HasSuffix(n, ".vlog") && n != maxVlog) {
			abs, err := filepath.Abs(from)
			if err == nil {
				err = os.Symlink(abs, to)
			}
			if err != nil {
				s.remove()
				return nil, fmt.Errorf("making a scratch copy of %s: %w", src, err)
			}
			continue
		}
		dataEnd, err := copySparse(from, to)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed by the running server meanwhile
			}
			s.remove()
			return nil, fmt.Errorf("making a scratch copy of %s: %w", from, err)
		}
		if strings.HasSuffix(n, ".mem") || n == maxVlog {
			if err := s.cut(from, to, dataEnd); err != nil {
				s.remove()
				return nil, err
			}
		}
	}
	return s, nil
}

// cut cuts the copy to where a read-write open would cut the original.
func (s *scratch) cut(from, to string, dataEnd int64) error {
	f, err := os.Open(to)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	// dataEnd is past the file's last non-zero byte, which may fall inside
	// its last entry (a checksum or a value ending in zero bytes): read on
	// as far as one more entry could reach, so that the scan sees it whole.
	data := make([]byte, min(st.Size(), max(dataEnd, 0)+maxLogEntry))
	_, err = io.ReadFull(f, data)
	f.Close()
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	sc := scanLog(data, dataEnd)
	if sc.validEnd >= dataEnd {
		return os.Truncate(to, max(sc.validEnd, logHeaderSize))
	}
	if sc.later >= 0 {
		s.damage = append(s.damage, fmt.Sprintf("%s: its entries fail their checksum from byte %d on, and whole transactions committed later follow at byte %d: the storage engine would cut the file at byte %d, dropping %d bytes of committed data",
			from, sc.validEnd, sc.later, sc.validEnd, dataEnd-sc.validEnd))
	} else {
		s.cuts = append(s.cuts, fmt.Sprintf("%s: the storage engine would cut it at byte %d, dropping %d bytes after it",
			from, sc.validEnd, dataEnd-sc.validEnd))
	}
	return os.Truncate(to, sc.validEnd)
}

func (s *scratch) remove() {
	if s != nil {
		os.RemoveAll(s.dir)
	}
}

// copySparse copies a file, leaving holes where the original has blocks of
// zeros, and returns the offset past its last non-zero byte.
func copySparse(from, to string) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	buf := make([]byte, 1<<20)
	var off, end int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			chunk := buf[:n]
			if last := lastNonZero(chunk); last >= 0 {
				if _, err := out.WriteAt(chunk, off); err != nil {
					return 0, err
				}
				end = off + int64(last) + 1
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return end, out.Truncate(off)
}

// lastNonZero returns the index of b's last non-zero byte, or -1.
func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// diagnose names the files of the Badger folder src that look damaged.
func diagnose(src string, s *scratch) []string {
	var out []string
	mpath := filepath.Join(src, badger.ManifestFilename)
	f, err := os.Open(mpath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		out = append(out, mpath+" is missing (the storage engine would start empty and delete every table file)")
	case err != nil:
		out = append(out, fmt.Sprintf("%s cannot be read: %v", mpath, err))
	default:
		m, off, err := badger.ReplayManifestFile(f, 0, badger.DefaultOptions(src))
		st, _ := f.Stat()
		f.Close()
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s is damaged: %v", mpath, err))
		case st != nil && off < st.Size():
			out = append(out, fmt.Sprintf("%s is damaged: only its first %d of %d bytes are readable", mpath, off, st.Size()))
		default:
			var missing []string
			for id := range m.Tables {
				p := filepath.Join(src, fmt.Sprintf("%06d.sst", id))
				if _, err := os.Stat(p); err != nil {
					missing = append(missing, p)
				}
			}
			sort.Strings(missing)
			for _, p := range missing {
				out = append(out, p+", named in the MANIFEST, is missing")
			}
		}
	}
	if s != nil {
		out = append(out, s.damage...)
		out = append(out, s.cuts...)
	}
	if s == nil {
		// A read-only store's damage already holds its tables' checks.
		out = append(out, checkTables(src, badgerOptions(src, Options{}), nil, nil)...)
	}
	return out
}
