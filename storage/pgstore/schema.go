package pgstore

import (
	"context"
	"fmt"

	"github.com/custodylog/custody/storage"
)

// migrations bring a database from one schema version to the next; the
// version is the index plus one. Only ever append to this list.
var migrations = []string{
	// 1: the log, the head, the lease, and the files (config, keys).
	`CREATE TABLE custody_head (
		id         int PRIMARY KEY CHECK (id = 1),
		size       bigint NOT NULL,
		edge       bytea NOT NULL,
		checkpoint bytea NOT NULL,
		origin     text NOT NULL,
		epoch      bigint NOT NULL
	);
	INSERT INTO custody_head VALUES (1, 0, '', '', '', 0);
	CREATE TABLE custody_leaves (idx bigint PRIMARY KEY, leaf bytea NOT NULL);
	CREATE TABLE custody_tiles (level smallint NOT NULL, idx bigint NOT NULL, data bytea NOT NULL, PRIMARY KEY (level, idx));
	CREATE TABLE custody_dedup (hash bytea PRIMARY KEY, idx bigint NOT NULL);
	CREATE TABLE custody_records (key bytea PRIMARY KEY, value bytea NOT NULL);
	CREATE TABLE custody_files (name text PRIMARY KEY, data bytea NOT NULL);
	CREATE TABLE custody_lease (
		id         int PRIMARY KEY CHECK (id = 1),
		epoch      bigint NOT NULL,
		holder     text NOT NULL,
		url        text NOT NULL,
		expires_at timestamptz NOT NULL,
		failovers  bigint NOT NULL DEFAULT 0
	);
	INSERT INTO custody_lease VALUES (1, 0, '', '', '-infinity', 0);`,
}

// SchemaVersion is the schema this custody writes.
var SchemaVersion = len(migrations)

// migrationLock is the advisory lock key that serialises migrations
// between servers starting together ("custody" in ASCII).
const migrationLock = 0x637573746f6479

// migrate applies the migrations the database lacks, in one transaction
// under a transaction-level advisory lock, and refuses a database whose
// schema is newer than this custody's.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.wrap(fmt.Errorf("migrating %s: %w", s.location, err))
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
		return s.wrap(fmt.Errorf("migrating %s: %w", s.location, err))
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS custody_schema (
		version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return s.wrap(fmt.Errorf("migrating %s: %w", s.location, err))
	}
	var have int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM custody_schema").Scan(&have); err != nil {
		return s.wrap(fmt.Errorf("migrating %s: %w", s.location, err))
	}
	if have > len(migrations) {
		return fmt.Errorf("%w: %s is at schema version %d, this custody knows versions up to %d; upgrade custody",
			storage.ErrNewerSchema, s.location, have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
			return s.wrap(fmt.Errorf("migrating %s to schema version %d: %w", s.location, v, err))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO custody_schema (version) VALUES ($1)", v); err != nil {
			return s.wrap(fmt.Errorf("migrating %s: %w", s.location, err))
		}
	}
	return s.wrap(tx.Commit(ctx))
}
