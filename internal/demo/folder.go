package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// NewDir is a new folder for a demo under base: demo-<UTC time>, with -N
// added when that exists (two demos in the same second).
func NewDir(base string, now time.Time) string {
	stamp := now.UTC().Format("20060102-150405")
	dir := filepath.Join(base, "demo-"+stamp)
	for n := 2; ; n++ {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return dir
		}
		dir = filepath.Join(base, fmt.Sprintf("demo-%s-%d", stamp, n))
	}
}

// Fresh makes sure dir can take a new ledger: absent or empty, or (with
// force) a custody ledger, which is then deleted. It never deletes a folder
// that does not look like a ledger.
func Fresh(dir string, force bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	if !force {
		return fmt.Errorf("%s is not empty (use another --dir, or --force to delete the ledger in it)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "custody.json")); err != nil {
		return fmt.Errorf("%s is not empty and does not hold a custody ledger: refusing to delete it", dir)
	}
	return os.RemoveAll(dir)
}
