// Package pgstore keeps a custody log in PostgreSQL (pgx v5, a connection
// pool), so that any number of custody servers can serve one log while
// exactly one of them sequences it.
//
// Any number of logs per database: the default log in the URL's schema
// (its search_path parameter, postgres://…/db?search_path=mylog, chooses
// one, which must exist; public without it), and named logs, each in a
// schema of its own, named by the URL parameter custody_log (see logs.go).
// custody creates and migrates its tables itself (see migrations), under
// an advisory lock, and refuses a schema a newer custody wrote.
//
// A batch is one transaction: the head row updated first, fenced by the
// expected size and the sequencer lease's epoch, then the leaves, dedup
// indexes, tiles and records as multi-row inserts (unnest of arrays, one
// statement each), all pipelined in one round trip, and COMMIT with
// synchronous_commit on. A NOTIFY in the same transaction tells the other
// servers the head moved, once it has.
//
// The sequencer lease is a row with a holder, an epoch that every
// acquisition increases, and an expiry on the database's clock. A server
// that took the lease commits only while the row still carries its epoch:
// the commit locks the row (FOR SHARE) and finds nothing to update
// otherwise, so a server that was paused past its lease commits nothing.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
)

// IsURL reports whether loc names a PostgreSQL database.
func IsURL(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://")
}

// Options tune the store.
type Options struct {
	// MaxConns bounds the pool (default 16).
	MaxConns int32
	// Create makes the named log the URL names if the database does not
	// hold it yet (custody init). With Origin set, Open first refuses an
	// origin another log of the database has.
	Create bool
	Origin string
}

// Store is one log in one PostgreSQL database (or schema).
type Store struct {
	pool     *pgxpool.Pool
	location string
	log      string // the log's name ("" for the default log)
	// epoch is the sequencer lease's epoch this store commits under (0:
	// none; every commit is then fenced).
	epoch atomic.Uint64
	// holder names this process in the lease row.
	holder string
	// watch and listening: the WatchHead connections (notify.go).
	watch     watchers
	listening atomic.Bool
	// unknownPID is the server process of a transaction whose COMMIT had
	// an unknown outcome (0: none); see SettleUnknown.
	unknownPID atomic.Int64
	// leaseMS is the lease time of the last acquisition or renewal, in
	// milliseconds: what bounds a commit's transaction (fenceLimits).
	leaseMS atomic.Int64
	// scope ends when this store loses or drops the lease (nil while it
	// holds none): the reads and commits the sequencer makes while it
	// leads end with it (bound).
	scope atomic.Pointer[leaseScope]
}

// leaseScope is the life of one held lease.
type leaseScope struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// bound returns ctx, ended also when the lease held now is lost: a read
// or commit stuck on a database that stopped answering (a partition that
// keeps the sockets open) ends when the server steps down, and its
// submitters are answered at once. On a follower it is ctx.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ls := s.scope.Load()
	if ls == nil {
		// Not leading. On a server that has led (it knows a lease time),
		// a read with no deadline of its own gets two lease times: the
		// sequencer's reads of a batch decided just before it lost the
		// lease must not hold its submitters for as long as a partition
		// lasts.
		if _, ok := ctx.Deadline(); !ok {
			if ms := s.leaseMS.Load(); ms > 0 {
				return context.WithTimeout(ctx, time.Duration(2*ms)*time.Millisecond)
			}
		}
		return ctx, func() {}
	}
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ls.ctx, cancel)
	return c, func() { stop(); cancel() }
}

// newScope starts the scope of a lease just taken, ending any other.
func (s *Store) newScope() {
	ctx, cancel := context.WithCancel(context.Background())
	if old := s.scope.Swap(&leaseScope{ctx, cancel}); old != nil {
		old.cancel()
	}
}

// endScope ends the scope of the lease held, if any.
func (s *Store) endScope() {
	if old := s.scope.Swap(nil); old != nil {
		old.cancel()
	}
}

var _ storage.Store = (*Store)(nil)

// Open connects to the database at rawURL and brings its schema up to
// date.
func Open(ctx context.Context, rawURL string, o Options) (*Store, error) {
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	base, name, err := SplitLog(rawURL)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		return nil, fmt.Errorf("store URL %s: %v", Redact(rawURL), err)
	}
	cfg.MaxConns = o.MaxConns
	// An acknowledged entry must survive the loss of the database server:
	// COMMIT returns only once the WAL is flushed (and, with synchronous
	// standbys configured, replicated).
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "custody"
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	// The database notices a client that vanished without closing its
	// connections (a machine cut off or powered off) in about 15 s rather
	// than the kernel's two hours, unless the URL says otherwise. What
	// bounds a frozen leader's lock on the lease row is fenceLimits.
	for k, v := range map[string]string{"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "5"} {
		if _, ok := cfg.ConnConfig.RuntimeParams[k]; !ok {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	if cfg.ConnConfig.DialFunc == nil {
		d := &net.Dialer{KeepAlive: 5 * time.Second}
		cfg.ConnConfig.DialFunc = d.DialContext
	}
	if o.Create && o.Origin != "" {
		self := name
		if self == "" {
			self = DefaultLog
		}
		if err := checkOrigin(ctx, base, self, o.Origin); err != nil {
			return nil, err
		}
	}
	if name != "" {
		schema, err := findLog(ctx, cfg.ConnConfig.Copy(), Redact(rawURL), name, o.Create)
		if err != nil {
			return nil, wrapErr(Redact(rawURL), err)
		}
		// Every connection of the pool sees the log's own tables: no
		// query names a schema.
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", Redact(rawURL), err)
	}
	s := &Store{pool: pool, location: Redact(rawURL), log: name, holder: holderName()}
	if err := s.check(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func holderName() string {
	host, _ := os.Hostname()
	var r [4]byte
	rand.Read(r[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// Redact returns a URL without its password, for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	return u.Redacted()
}

// check refuses a server that would not make a commit durable.
func (s *Store) check(ctx context.Context) error {
	var fsync string
	if err := s.pool.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		return s.wrap(fmt.Errorf("connecting to %s: %w", s.location, err))
	}
	if fsync != "on" {
		return fmt.Errorf("%s runs with fsync=%s: an acknowledged entry would not survive a crash of the database server; custody refuses it", s.location, fsync)
	}
	return nil
}

// Close closes the pool, releasing the lease if this store holds it.
func (s *Store) Close() error {
	s.watch.close()
	if s.epoch.Load() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.Release(ctx)
		cancel()
	}
	s.pool.Close()
	return nil
}

// Location is the URL without its password.
func (s *Store) Location() string { return s.location }

// Log is the log's name in its database ("default" for the default log).
func (s *Store) Log() string {
	if s.log == "" {
		return DefaultLog
	}
	return s.log
}

// Pool is the store's connection pool, for tests and tools.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// wrap marks connection failures and a read-only server as
// storage.ErrUnavailable.
func (s *Store) wrap(err error) error {
	if err == nil || errors.Is(err, storage.ErrUnavailable) {
		return err
	}
	if diskFull(err) {
		return fmt.Errorf("%w: %w: %s: %w", storage.ErrDiskFull, storage.ErrUnavailable, s.location, err)
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %s: %w", storage.ErrUnavailable, s.location, err)
	}
	return err
}

// diskFull reports whether the database refused for want of space
// (SQLSTATE 53100 disk_full; 53400, a configured limit such as
// temp_file_limit, is answered the same way).
func diskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "53100" || pe.Code == "53400")
}

func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "25006": // read_only_sql_transaction: a standby
			return true
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57"), // operator intervention: shutdown, terminated, cancelled
			strings.HasPrefix(pe.Code, "53"), // insufficient resources: disk, memory, connections
			strings.HasPrefix(pe.Code, "58"), // system error: I/O
			strings.HasPrefix(pe.Code, "40"), // serialization failure, deadlock: try again
			pe.Code == "25P03",               // idle_in_transaction_session_timeout (qLimits)
			pe.Code == "55P03":               // lock_not_available: lock_timeout (qLimits)
			return true
		}
		return false
	}
	var ne net.Error
	// context.Canceled: a read or commit ended by a lost lease (bound) or
	// by its caller; either way nothing was decided on it.
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	return pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "unexpected EOF") ||
		strings.Contains(err.Error(), "broken pipe") || strings.Contains(err.Error(), "connection reset")
}

// Head returns the committed head, or nil before the first commit.
func (s *Store) Head(ctx context.Context) (*storage.Head, error) {
	ctx, end := s.bound(ctx)
	defer end()
	var h storage.Head
	var size int64
	err := s.pool.QueryRow(ctx, "SELECT size, edge, checkpoint, origin FROM custody_head WHERE id = 1").
		Scan(&size, &h.Edge, &h.Checkpoint, &h.Origin)
	if err != nil {
		return nil, s.wrap(fmt.Errorf("reading the head: %w", err))
	}
	if len(h.Edge) == 0 {
		return nil, nil
	}
	h.Size = uint64(size)
	e, err := merkle.ParseEdge(h.Edge)
	if err != nil {
		return nil, fmt.Errorf("stored tree edge: %w", err)
	}
	if e.Size() != h.Size {
		return nil, fmt.Errorf("stored head: size %d but its edge is of size %d", h.Size, e.Size())
	}
	return &h, nil
}

func (s *Store) bytes(ctx context.Context, q string, args ...any) ([]byte, error) {
	ctx, end := s.bound(ctx)
	defer end()
	var v []byte
	err := s.pool.QueryRow(ctx, q, args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// Leaf returns a leaf, or nil.
func (s *Store) Leaf(ctx context.Context, index uint64) ([]byte, error) {
	return s.bytes(ctx, "SELECT leaf FROM custody_leaves WHERE idx = $1", int64(index))
}

// Leaves returns up to n leaves from first on.
func (s *Store) Leaves(ctx context.Context, first uint64, n int) ([][]byte, error) {
	ctx, end := s.bound(ctx)
	defer end()
	rows, err := s.pool.Query(ctx, "SELECT idx, leaf FROM custody_leaves WHERE idx >= $1 AND idx < $2 ORDER BY idx",
		int64(first), int64(first)+int64(n))
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	var out [][]byte
	next := int64(first)
	for rows.Next() {
		var idx int64
		var leaf []byte
		if err := rows.Scan(&idx, &leaf); err != nil {
			return nil, s.wrap(err)
		}
		if idx != next {
			break
		}
		out = append(out, leaf)
		next++
	}
	return out, s.wrap(rows.Err())
}

// Tile returns a tile, or nil.
func (s *Store) Tile(ctx context.Context, level, index uint64) ([]byte, error) {
	return s.bytes(ctx, "SELECT data FROM custody_tiles WHERE level = $1 AND idx = $2", int16(level), int64(index))
}

// TileRange returns hashes from..to-1 of a tile: substring on the server,
// so a proof moves 512 bytes, not 8 KiB.
func (s *Store) TileRange(ctx context.Context, level, index uint64, from, to int) ([]byte, error) {
	v, err := s.bytes(ctx, `SELECT CASE WHEN length(data) % 32 = 0 AND length(data) <= 8192
		THEN substring(data FROM $3 FOR $4) ELSE data END FROM custody_tiles WHERE level = $1 AND idx = $2`,
		int16(level), int64(index), int32(from*merkle.HashSize+1), int32((to-from)*merkle.HashSize))
	return v, err
}

// Tiles returns tiles from..from+n-1 of a level (nil where none is
// stored), in one query.
func (s *Store) Tiles(ctx context.Context, level, from uint64, n int) ([][]byte, error) {
	out := make([][]byte, n)
	if n <= 0 {
		return out[:0], nil
	}
	ctx, end := s.bound(ctx)
	defer end()
	rows, err := s.pool.Query(ctx, "SELECT idx, data FROM custody_tiles WHERE level = $1 AND idx >= $2 AND idx < $3",
		int16(level), int64(from), int64(from)+int64(n))
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var idx int64
		var data []byte
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, s.wrap(err)
		}
		if i := uint64(idx) - from; idx >= 0 && i < uint64(n) {
			if data == nil {
				data = []byte{}
			}
			out[i] = data
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err)
	}
	return out, nil
}

// Record returns an authority record, or nil.
func (s *Store) Record(ctx context.Context, key string) ([]byte, error) {
	return s.bytes(ctx, "SELECT value FROM custody_records WHERE key = $1", []byte(key))
}

// Records calls fn for every authority record.
func (s *Store) Records(ctx context.Context, fn func(string, []byte) error) error {
	rows, err := s.pool.Query(ctx, "SELECT key, value FROM custody_records ORDER BY key")
	if err != nil {
		return s.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return s.wrap(err)
		}
		if err := fn(string(k), v); err != nil {
			return err
		}
	}
	return s.wrap(rows.Err())
}

// Dedup returns the index a dedup hash maps to.
func (s *Store) Dedup(ctx context.Context, h [32]byte) (uint64, bool, error) {
	ctx, end := s.bound(ctx)
	defer end()
	var idx int64
	err := s.pool.QueryRow(ctx, "SELECT idx FROM custody_dedup WHERE hash = $1", h[:]).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.wrap(err)
	}
	return uint64(idx), true, nil
}

var _ storage.DedupBatcher = (*Store)(nil)

// DedupMany looks up many submission hashes in one query.
func (s *Store) DedupMany(ctx context.Context, hashes [][32]byte) (map[[32]byte]uint64, error) {
	ctx, end := s.bound(ctx)
	defer end()
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		hs[i] = hashes[i][:]
	}
	rows, err := s.pool.Query(ctx, "SELECT hash, idx FROM custody_dedup WHERE hash = ANY($1)", hs)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	found := map[[32]byte]uint64{}
	for rows.Next() {
		var h []byte
		var idx int64
		if err := rows.Scan(&h, &idx); err != nil {
			return nil, s.wrap(err)
		}
		if len(h) != 32 || idx < 0 {
			return nil, fmt.Errorf("%s: a dedup row with a hash of %d bytes at index %d", s.location, len(h), idx)
		}
		found[[32]byte(h)] = uint64(idx)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err)
	}
	return found, nil
}

// budget bounds one transaction: far below what PostgreSQL takes, so
// that a batch's commit stays short.
const budget = 64 << 20

// Budget is the most a batch may weigh.
func (s *Store) Budget() int { return budget }

// Weigh is the bytes b sends.
func (s *Store) Weigh(b *storage.Batch) int {
	n := len(b.Edge) + len(b.Checkpoint)
	for _, l := range b.Leaves {
		n += len(l) + 8
	}
	n += len(b.Dedup) * 40
	for _, t := range b.Tiles {
		n += len(t.Data) + 10
	}
	for _, r := range b.Records {
		n += len(r.Key) + len(r.Value)
	}
	return n
}

const (
	// qLimits bounds the batch's transaction by one lease time ($1, in
	// milliseconds): the transaction locks the lease row (FOR SHARE), and a
	// leader frozen (paused, or cut off with its sockets open) between its
	// batch and COMMIT would otherwise hold that lock, and so block every
	// takeover, for as long as the fault lasts. PostgreSQL ends a session
	// left idle inside the transaction for a lease time (rolling it back:
	// the fence refuses it anyway once the lease has gone), and the fence
	// waits no longer than that for the lease row.
	qLimits = `SELECT set_config('idle_in_transaction_session_timeout', $1, true), set_config('lock_timeout', $1, true)`
	qFence  = `WITH l AS (SELECT epoch FROM custody_lease WHERE id = 1 AND epoch = $1 FOR SHARE)
		UPDATE custody_head h SET size = $3, edge = $4, checkpoint = $5, epoch = $1,
			origin = CASE WHEN $6 = '' THEN h.origin ELSE $6 END
		FROM l WHERE h.id = 1 AND h.size = $2`
	qLeaves  = `INSERT INTO custody_leaves (idx, leaf) SELECT * FROM unnest($1::bigint[], $2::bytea[])`
	qDedup   = `INSERT INTO custody_dedup (hash, idx) SELECT * FROM unnest($1::bytea[], $2::bigint[])`
	qTiles   = `INSERT INTO custody_tiles (level, idx, data) SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[]) ON CONFLICT (level, idx) DO UPDATE SET data = EXCLUDED.data`
	qRecords = `INSERT INTO custody_records (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`
	qNotify  = `SELECT pg_notify('` + NotifyChannel + `', current_schema() || ' ' || $1)`
)

// Commit writes b in one transaction, fenced by the lease epoch and the
// head's size.
func (s *Store) Commit(ctx context.Context, b *storage.Batch) error {
	epoch := s.epoch.Load()
	if epoch == 0 {
		return fmt.Errorf("%w: this server does not hold the sequencer lease", storage.ErrFenced)
	}
	ctx, end := s.bound(ctx)
	defer end()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return s.wrap(fmt.Errorf("committing %d entries: %w", len(b.Leaves), err))
	}
	defer tx.Rollback(context.Background())
	size := b.Size()
	var pb pgx.Batch
	if ms := s.leaseMS.Load(); ms > 0 {
		pb.Queue(qLimits, fmt.Sprint(ms))
	}
	pb.Queue(qFence, int64(epoch), int64(b.From), int64(size), b.Edge, b.Checkpoint, b.Origin)
	if len(b.Leaves) > 0 {
		idx := make([]int64, len(b.Leaves))
		for i := range idx {
			idx[i] = int64(b.From) + int64(i)
		}
		pb.Queue(qLeaves, idx, b.Leaves)
	}
	if len(b.Dedup) > 0 {
		hs, idx := make([][]byte, len(b.Dedup)), make([]int64, len(b.Dedup))
		for i, d := range b.Dedup {
			hs[i], idx[i] = d.Hash[:], int64(d.Index)
		}
		pb.Queue(qDedup, hs, idx)
	}
	// An upsert may not touch one row twice (SQLSTATE 21000), while a
	// batch may write one tile or record more than once, as a Badger
	// transaction may: the last write of each wins.
	if len(b.Tiles) > 0 {
		var lv []int16
		var idx []int64
		var data [][]byte
		at := make(map[[2]uint64]int, len(b.Tiles))
		for _, t := range b.Tiles {
			k := [2]uint64{uint64(t.Level), t.Index}
			if i, ok := at[k]; ok {
				data[i] = t.Data
				continue
			}
			at[k] = len(data)
			lv, idx, data = append(lv, int16(t.Level)), append(idx, int64(t.Index)), append(data, t.Data)
		}
		pb.Queue(qTiles, lv, idx, data)
	}
	var keys, vals [][]byte
	at := make(map[string]int, len(b.Records))
	for _, r := range b.Records {
		if r.Value == nil {
			continue
		}
		if i, ok := at[r.Key]; ok {
			vals[i] = r.Value
			continue
		}
		at[r.Key] = len(keys)
		keys, vals = append(keys, []byte(r.Key)), append(vals, r.Value)
	}
	if len(keys) > 0 {
		pb.Queue(qRecords, keys, vals)
	}
	pb.Queue(qNotify, fmt.Sprint(size))
	var pid int32
	pb.Queue("SELECT pg_backend_pid()").QueryRow(func(r pgx.Row) error { return r.Scan(&pid) })
	br := tx.SendBatch(ctx, &pb)
	if s.leaseMS.Load() > 0 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return s.wrap(fmt.Errorf("committing %d entries: %w", len(b.Leaves), err))
		}
	}
	tag, err := br.Exec()
	if err != nil {
		br.Close()
		return s.wrap(fmt.Errorf("committing %d entries: %w", len(b.Leaves), err))
	}
	if tag.RowsAffected() != 1 {
		br.Close()
		return fmt.Errorf("%w (lease epoch %d, expected size %d)", storage.ErrFenced, epoch, b.From)
	}
	if err := br.Close(); err != nil {
		return s.wrap(fmt.Errorf("committing %d entries: %w", len(b.Leaves), err))
	}
	if err := tx.Commit(ctx); err != nil {
		err = s.commitErr(err, len(b.Leaves))
		if errors.Is(err, storage.ErrCommitUnknown) {
			s.unknownPID.Store(int64(pid))
		}
		return err
	}
	return nil
}

// SettleUnknown waits until the server process that ran a transaction of
// unknown outcome has gone, asking it to end (pg_terminate_backend: a
// backend inside its commit finishes the commit first; one still waiting
// for COMMIT rolls back). Then the head says whether the batch committed.
func (s *Store) SettleUnknown(ctx context.Context) error {
	pid := s.unknownPID.Load()
	if pid == 0 {
		return nil
	}
	for {
		var alive bool
		err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT pg_terminate_backend(pid) OR true FROM pg_stat_activity WHERE pid = $1), false)`,
			int32(pid)).Scan(&alive)
		if err != nil {
			return s.wrap(err)
		}
		if !alive {
			s.unknownPID.CompareAndSwap(pid, 0)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// commitErr classifies an error from COMMIT: the server's refusal means
// nothing was written; anything else (a broken connection, a timeout)
// leaves the outcome unknown. pgconn.SafeToRetry is not trusted here: the
// COMMIT may have been sent whole before the connection broke.
func (s *Store) commitErr(err error, n int) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return s.wrap(fmt.Errorf("committing %d entries: %w", n, err))
	}
	return fmt.Errorf("%w: committing %d entries: %w: %v", storage.ErrCommitUnknown, n, storage.ErrUnavailable, err)
}

// SetCheckpoint replaces the head's checkpoint, fenced.
func (s *Store) SetCheckpoint(ctx context.Context, size uint64, cp []byte) error {
	epoch := s.epoch.Load()
	if epoch == 0 {
		return fmt.Errorf("%w: this server does not hold the sequencer lease", storage.ErrFenced)
	}
	tag, err := s.pool.Exec(ctx, `WITH l AS (SELECT epoch FROM custody_lease WHERE id = 1 AND epoch = $1 FOR SHARE)
		UPDATE custody_head h SET checkpoint = $3 FROM l WHERE h.id = 1 AND h.size = $2`, int64(epoch), int64(size), cp)
	if err != nil {
		return s.commitErr(err, 0)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w (lease epoch %d, expected size %d)", storage.ErrFenced, epoch, size)
	}
	return nil
}

// ReadFile reads a config or key file kept in the database.
func (s *Store) ReadFile(name string) ([]byte, error) {
	v, err := s.bytes(context.Background(), "SELECT data FROM custody_files WHERE name = $1", name)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%s in %s: %w", name, s.location, fs.ErrNotExist)
	}
	return v, nil
}

// WriteFile stores a config or key file in the database.
func (s *Store) WriteFile(name string, data []byte) error {
	_, err := s.pool.Exec(context.Background(), `INSERT INTO custody_files (name, data) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET data = EXCLUDED.data`, name, data)
	return s.wrap(err)
}
