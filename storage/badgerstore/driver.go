package badgerstore

import (
	"context"
	"fmt"

	"github.com/custodylog/custody/storage"
)

// The data-folder driver: a location that is not a URL is a folder.
func init() {
	storage.Register("", storage.Driver{
		Open:           openDriver,
		Local:          true,
		Exists:         Exists,
		CheckCopyFirst: true,
	})
}

func openDriver(_ context.Context, dir string, o storage.OpenOptions) (storage.Store, error) {
	var bo Options
	switch d := o.Driver.(type) {
	case nil:
	case Options:
		bo = d
	case *Options:
		bo = *d
	default:
		return nil, fmt.Errorf("badgerstore: %s is a data folder, but the store options given are %T", dir, o.Driver)
	}
	bo.ReadOnly = bo.ReadOnly || o.ReadOnly
	return Open(dir, bo)
}

// Capabilities: a data folder has one process and no optional parts; it
// can name its damaged files (Diagnose), and a read-only store can tell
// what a read-write open would cut (Damaged).
func (s *Store) Capabilities() storage.Capabilities {
	return storage.Capabilities{Damaged: s.Damaged, Diagnose: s.Diagnose, TileBatch: s}
}
