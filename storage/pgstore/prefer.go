package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/storage"
)

// # Preferring to sequence a log
//
// A server that prefers to sequence a log (custody serve --prefer) holds a
// shared advisory lock, on a connection of its own, whose key is derived
// from the log's schema (qPreferKey). It is a session lock: when the
// server dies, or its connection breaks, PostgreSQL drops it, so a lock
// held means a live server prefers the log. Preferred looks for such a
// lock held by another session in pg_locks. Nothing about the lease
// changes: a leader that sees a preference hands its lease over by
// releasing it (see ledger's lease loop), and the fence keeps every
// commit safe whatever the timing.

const qPreferKey = `hashtextextended('custody prefer ' || current_schema(), 0)`

const preferAppName = "custody-prefer"

var _ storage.Preferrer = (*Store)(nil)

// Prefer holds this log's preference lock until ctx ends or the store is
// closed, taking it again whenever its connection breaks.
func (s *Store) Prefer(ctx context.Context) {
	s.watch.start(ctx, func(ctx context.Context) {
		for {
			s.holdPreference(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
}

// holdPreference takes the lock on a new connection and holds it until
// the connection breaks or ctx ends.
func (s *Store) holdPreference(ctx context.Context) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = preferAppName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock_shared("+qPreferKey+")"); err != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if err := conn.Ping(ctx); err != nil {
			return
		}
	}
}

// Preferred reports whether another session holds this log's preference
// lock: a live server that prefers to sequence it.
func (s *Store) Preferred(ctx context.Context) (bool, error) {
	var held bool
	err := s.pool.QueryRow(ctx, `WITH k AS (SELECT `+qPreferKey+` AS v)
		SELECT EXISTS (SELECT 1 FROM pg_locks, k WHERE locktype = 'advisory' AND granted AND objsubid = 1
			AND classid = ((k.v >> 32) & 4294967295)::oid AND objid = (k.v & 4294967295)::oid
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND pid <> pg_backend_pid())`).Scan(&held)
	if err != nil {
		return false, s.wrap(err)
	}
	return held, nil
}
