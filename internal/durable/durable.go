// Package durable writes files that exist, whole, after a crash once the
// call has returned: the file is fsynced, and so is the directory that
// names it. The ledger's config and keys, the store's small files and the
// exported tiles all go through it.
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SyncDir fsyncs a directory, so that the entries created or renamed in it
// survive a crash. A file system that cannot sync directories (os.ErrInvalid)
// is taken as it is.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("cannot sync directory %s: %w", dir, err)
	}
	return nil
}

// Create writes a new file (one at path must not exist) and fsyncs it and
// its directory.
func Create(path string, data []byte, mode os.FileMode) error {
	if err := write(path, data, mode); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Replace writes path atomically: a new file beside it, fsynced, renamed
// over it, and the directory fsynced. A reader sees the old bytes or the
// new, never a part.
func Replace(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".new"
	os.Remove(tmp) // left by a crash during an earlier Replace
	if err := write(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// write creates path with data and fsyncs it.
func write(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
