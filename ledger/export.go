package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/custodylog/custody/internal/durable"
	"github.com/custodylog/custody/merkle"
)

// ExportCheckpointName is the file name of the checkpoint in an export,
// relative to its folder (C2SP tlog-tiles: "<prefix>/checkpoint").
const ExportCheckpointName = "checkpoint"

// Export writes the log, as of its latest committed checkpoint, into outdir
// as a static C2SP tlog-tiles tree that any web server or CDN can serve:
// the hash tiles tile/<L>/<N>[.p/<W>], the entry bundles
// tile/entries/<N>[.p/<W>] (partial ones for the checkpoint's size), and
// checkpoint.
//
// Every file is written to a temporary name, fsynced and renamed into place,
// so a reader never sees a torn file. The checkpoint is written last, after
// every tile it commits to and their folders are durable: an export
// interrupted at any point still serves a consistent log (the previous
// checkpoint with its tiles, or nothing).
//
// Export is incremental. If outdir already holds a checkpoint, it must
// verify under this log's key and its root must equal this log's root at
// that size (otherwise Export refuses, without writing: outdir holds another
// log, or a history this one does not extend); only the tiles the older
// tree lacks are then written. A tile file that already holds the right
// bytes is left alone. Tiles are immutable in an append-only log, so stale
// partial tiles of older exports stay valid and are not deleted.
//
// progress, if not nil, is called after each file with the number done and
// the total (tiles, entry bundles and the checkpoint).
func Export(l *Ledger, outdir string, progress func(done, total int)) error {
	head := l.Head()
	if head.Checkpoint == nil || head.Size == 0 {
		return errors.New("export: the log has no checkpoint yet")
	}
	from, err := exportedSize(l, outdir, head)
	if err != nil {
		return err
	}
	refs := slices.Concat(merkle.NewTiles(from, head.Size), merkle.NewEntryBundles(from, head.Size))
	total := len(refs) + 1
	dirs := map[string]bool{}
	for i, ref := range refs {
		var data []byte
		if ref.Entries {
			data, err = l.EntryBundle(ref.Index, ref.Width)
		} else {
			data, err = l.Tile(ref.Level, ref.Index, ref.Width)
		}
		if err != nil {
			return fmt.Errorf("export: reading %s: %w", ref.Path(), err)
		}
		path := filepath.Join(outdir, filepath.FromSlash(ref.Path()))
		wrote, err := writeIfChanged(path, data)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if wrote {
			dirs[filepath.Dir(path)] = true
		}
		if progress != nil {
			progress(i+1, total)
		}
	}
	// The tiles' directory entries must be durable before the checkpoint
	// that commits to them is published.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	cp := filepath.Join(outdir, ExportCheckpointName)
	if err := writeAtomic(cp, head.Checkpoint); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := syncDir(outdir); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if progress != nil {
		progress(total, total)
	}
	return nil
}

// exportedSize returns the size of the checkpoint an earlier export left in
// outdir (0 if none), after checking that it is a checkpoint of this log
// that the current head extends.
func exportedSize(l *Ledger, outdir string, head Head) (uint64, error) {
	old, err := os.ReadFile(filepath.Join(outdir, ExportCheckpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("export: reading the existing checkpoint: %w", err)
	}
	return l.PublishedSize(old, outdir, head)
}

// PublishedSize checks a checkpoint that an earlier export or publication
// left at where (a folder, a bucket) against this log: it must verify
// under one of the log's checkpoint keys, retired ones included, and its
// root must be this log's root at its size, which head must reach. It
// returns that size. An error names where and the rule broken: where
// holds another log, or a history this one does not extend.
func (l *Ledger) PublishedSize(old []byte, where string, head Head) (uint64, error) {
	// An earlier export's checkpoint may be signed by a checkpoint key
	// retired since; its root is checked against this log's below, which
	// is the consistency a retired key's older checkpoints need.
	c, _, err := l.keys.set.OpenRetired(old)
	if err != nil {
		return 0, fmt.Errorf("export: %s holds a checkpoint that is not this log's (%v); export into an empty folder", where, err)
	}
	if c.Size > head.Size {
		return 0, &AheadError{Where: where, Size: c.Size, Head: head.Size}
	}
	root, err := l.RootAt(c.Size)
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	if root != c.Root {
		return 0, fmt.Errorf("export: %s holds a checkpoint of size %d whose root %s is not this log's root %s at that size", where, c.Size, c.Root, root)
	}
	return c.Size, nil
}

// AheadError is PublishedSize's refusal of a checkpoint larger than the
// head: where holds a newer checkpoint (another server's, which this one
// has not seen yet, or another log's).
type AheadError struct {
	Where      string
	Size, Head uint64
}

func (e *AheadError) Error() string {
	return fmt.Sprintf("export: %s holds a checkpoint of size %d, larger than this log's %d; refusing to roll it back", e.Where, e.Size, e.Head)
}

// writeIfChanged writes data to path atomically unless path already holds
// exactly data. It reports whether it wrote.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, writeAtomic(path, data)
}

// writeAtomic writes data to a temporary file next to path, fsyncs it and
// renames it over path, so path holds the old or the new bytes, never a
// mix. The caller fsyncs the directory.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	// CreateTemp makes 0600 files; an export is public.
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// syncDir fsyncs a directory so that the entries renamed into it survive a
// crash.
func syncDir(dir string) error { return durable.SyncDir(dir) }
