package pgstore

import (
	"context"
	"fmt"

	"github.com/custodylog/custody/storage"
)

// The PostgreSQL driver: postgres:// and postgresql:// URLs.
func init() {
	d := storage.Driver{Open: openDriver}
	storage.Register("postgres", d)
	storage.Register("postgresql", d)
}

func openDriver(ctx context.Context, url string, o storage.OpenOptions) (storage.Store, error) {
	var po Options
	switch d := o.Driver.(type) {
	case nil:
	case Options:
		po = d
	case *Options:
		po = *d
	default:
		return nil, fmt.Errorf("pgstore: %s is a PostgreSQL URL, but the store options given are %T", Redact(url), o.Driver)
	}
	po.Create = po.Create || o.Create
	if po.Origin == "" {
		po.Origin = o.Origin
	}
	return Open(ctx, url, po)
}

// Capabilities: every optional part of the seam. Many servers share the
// log (Lease, Prefer), learn of each other's commits (Watch), wait out a
// commit of unknown outcome (Settle), and a batch's dedup lookups are one
// round trip (DedupBatch).
func (s *Store) Capabilities() storage.Capabilities {
	return storage.Capabilities{Lease: s, Watch: s, Settle: s, Prefer: s, DedupBatch: s, TileBatch: s}
}
