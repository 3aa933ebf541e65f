package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// # Many logs in one database
//
// A database holds any number of logs. The default log is the one a URL
// names today: its tables are in the URL's schema (the first of its
// search_path, public without one), so databases made before there were
// named logs keep working unchanged. A named log lives in a schema of
// its own and the URL names it with the parameter custody_log:
//
//	postgres://custody@db/custody?custody_log=payments
//
// Open sets the pool's search_path to the log's schema, so that every
// table a log has (its leaves, tiles, head, sequencer lease and epoch,
// and its files: config and keys) is the log's own, and no query differs
// between a named log and the default one. The catalogue, a table
// custody_logs in the default log's schema, maps a name to its schema.
//
// A log's schema is custody_log_NAME when the default schema is public,
// DEFAULT_log_NAME otherwise (a "-" in NAME becomes "_", which names never
// hold), so that the logs of two default schemas in one database never
// share a schema.

// LogParam is the URL parameter naming a log.
const LogParam = "custody_log"

// DefaultLog names the default log, the one a URL without custody_log
// names.
const DefaultLog = "default"

// logName is the rule a log's name follows: a lower-case letter, then up
// to 39 lower-case letters, digits and hyphens. It fits a schema name and
// a URL path segment without escaping.
var logName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// CheckLogName refuses a name that is not a log name.
func CheckLogName(name string) error {
	if !logName.MatchString(name) {
		return fmt.Errorf("log name %q: want a lower-case letter, then up to 39 lower-case letters, digits or hyphens (like payments or team-a)", name)
	}
	return nil
}

// ErrNoLog is returned (wrapped) when a URL names a log the database does
// not hold.
var ErrNoLog = errors.New("pgstore: no such log")

// SplitLog returns rawURL without its custody_log parameter, and the log
// it names ("" for the default log).
func SplitLog(rawURL string) (base, name string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("store URL %s: %v", Redact(rawURL), err)
	}
	q := u.Query()
	if !q.Has(LogParam) {
		return rawURL, "", nil
	}
	name = q.Get(LogParam)
	if len(q[LogParam]) > 1 {
		return "", "", fmt.Errorf("store URL %s: %s is given %d times; give it once", Redact(rawURL), LogParam, len(q[LogParam]))
	}
	q.Del(LogParam)
	u.RawQuery = q.Encode()
	if name == DefaultLog {
		return u.String(), "", nil
	}
	if err := CheckLogName(name); err != nil {
		return "", "", fmt.Errorf("store URL %s: %w", Redact(rawURL), err)
	}
	return u.String(), name, nil
}

// WithLog returns rawURL naming the log name (the default log: no
// custody_log parameter).
func WithLog(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("store URL %s: %v", Redact(rawURL), err)
	}
	q := u.Query()
	q.Del(LogParam)
	if name != "" && name != DefaultLog {
		if err := CheckLogName(name); err != nil {
			return "", err
		}
		q.Set(LogParam, name)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// logSchema is the schema a new log named name gets in a database whose
// default log is in schema def.
func logSchema(def, name string) (string, error) {
	n := strings.ReplaceAll(name, "-", "_")
	s := def + "_log_" + n
	if def == "public" {
		s = "custody_log_" + n
	}
	if len(s) > 63 {
		return "", fmt.Errorf("log name %q: its schema %s would be longer than PostgreSQL's 63 bytes; choose a shorter name", name, s)
	}
	return s, nil
}

// catalogueLock is the advisory lock key that serialises creating logs.
const catalogueLock = migrationLock + 1

// catalogue returns the qualified name of the catalogue table in the
// connection's default schema, and that schema.
func catalogue(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (table, def string, err error) {
	var cur *string
	if err := q.QueryRow(ctx, "SELECT current_schema()").Scan(&cur); err != nil {
		return "", "", err
	}
	if cur == nil {
		return "", "", errors.New("the URL's search_path names no schema that exists (create it first, or drop search_path for public)")
	}
	return pgx.Identifier{*cur, "custody_logs"}.Sanitize(), *cur, nil
}

// findLog returns the schema of the log name, creating the log first if
// create is set and the catalogue does not list it.
func findLog(ctx context.Context, cfg *pgx.ConnConfig, location, name string, create bool) (string, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", location, err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", location, err)
	}
	defer tx.Rollback(context.Background())
	table, def, err := catalogue(ctx, tx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", location, err)
	}
	if create {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(catalogueLock)); err != nil {
			return "", fmt.Errorf("creating log %s in %s: %w", name, location, err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			name        text PRIMARY KEY,
			schema_name text NOT NULL UNIQUE,
			created_at  timestamptz NOT NULL DEFAULT now())`); err != nil {
			return "", fmt.Errorf("creating the catalogue of logs in %s: %w", location, err)
		}
	} else {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
			return "", fmt.Errorf("%s: %w", location, err)
		}
		if !exists {
			return "", noLog(location, name)
		}
	}
	var schema string
	err = tx.QueryRow(ctx, "SELECT schema_name FROM "+table+" WHERE name = $1", name).Scan(&schema)
	switch {
	case err == nil:
		return schema, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("reading the catalogue of logs in %s: %w", location, err)
	case !create:
		return "", noLog(location, name)
	}
	if schema, err = logSchema(def, name); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", fmt.Errorf("creating log %s in %s: schema %s: %w", name, location, schema, err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (name, schema_name) VALUES ($1, $2)", name, schema); err != nil {
		return "", fmt.Errorf("creating log %s in %s: %w", name, location, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("creating log %s in %s: %w", name, location, err)
	}
	return schema, nil
}

func noLog(location, name string) error {
	base, _, _ := SplitLog(location)
	return fmt.Errorf("%w: the database at %s holds no log named %q (custody logs --store URL lists them; custody init --store URL --log %s --origin ORIGIN creates it)",
		ErrNoLog, base, name, name)
}

// LogInfo describes one log of a database.
type LogInfo struct {
	Name    string    `json:"name"` // "default" for the default log
	Schema  string    `json:"schema"`
	Origin  string    `json:"origin"`
	Size    uint64    `json:"size"`
	Created time.Time `json:"created,omitzero"` // zero for the default log
	// Lease is the sequencer lease as the database holds it.
	Epoch   uint64    `json:"epoch"`
	Leader  string    `json:"leader,omitempty"` // the leader's advertised URL, while its lease is live
	Holder  string    `json:"holder,omitempty"` // the process holding it, while live
	Expires time.Time `json:"lease_expires,omitzero"`
}

// ListLogs lists the logs of the database at rawURL (its custody_log
// parameter is ignored): the default log first if it holds one, then
// the named logs by name. It changes nothing in the database.
func ListLogs(ctx context.Context, rawURL string) ([]LogInfo, error) {
	base, _, err := SplitLog(rawURL)
	if err != nil {
		return nil, err
	}
	location := Redact(base)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		return nil, fmt.Errorf("store URL %s: %v", location, err)
	}
	cfg.RuntimeParams["application_name"] = "custody"
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, wrapErr(location, fmt.Errorf("connecting to %s: %w", location, err))
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return nil, wrapErr(location, err)
	}
	defer tx.Rollback(context.Background())
	table, def, err := catalogue(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", location, err)
	}
	logs := []LogInfo{{Name: DefaultLog, Schema: def}}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
		return nil, wrapErr(location, err)
	}
	if exists {
		rows, err := tx.Query(ctx, "SELECT name, schema_name, created_at FROM "+table+" ORDER BY name")
		if err != nil {
			return nil, wrapErr(location, err)
		}
		for rows.Next() {
			var li LogInfo
			if err := rows.Scan(&li.Name, &li.Schema, &li.Created); err != nil {
				rows.Close()
				return nil, wrapErr(location, err)
			}
			logs = append(logs, li)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, wrapErr(location, err)
		}
	}
	out := logs[:0]
	for i, li := range logs {
		held, err := readLog(ctx, tx, &li)
		if err != nil {
			return nil, wrapErr(location, fmt.Errorf("log %s (schema %s): %w", li.Name, li.Schema, err))
		}
		// The default log is listed once it holds a log; a named log
		// always (an init that failed half way shows as size 0).
		if held || i > 0 {
			out = append(out, li)
		}
	}
	return out, nil
}

// readLog fills li from its schema's head and lease; held is false when
// the schema holds no log.
func readLog(ctx context.Context, tx pgx.Tx, li *LogInfo) (held bool, err error) {
	head := pgx.Identifier{li.Schema, "custody_head"}.Sanitize()
	lease := pgx.Identifier{li.Schema, "custody_lease"}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL", head, lease).Scan(&exists); err != nil {
		return false, err
	}
	if !exists {
		return false, nil
	}
	var size, epoch int64
	var expires *time.Time
	err = tx.QueryRow(ctx, `SELECT h.size, h.origin, l.epoch, l.holder, l.url,
			CASE WHEN l.expires_at > clock_timestamp() THEN l.expires_at END
		FROM `+head+` h, `+lease+` l WHERE h.id = 1 AND l.id = 1`).
		Scan(&size, &li.Origin, &epoch, &li.Holder, &li.Leader, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	li.Size, li.Epoch = uint64(size), uint64(epoch)
	if expires == nil {
		li.Holder, li.Leader = "", ""
	} else {
		li.Expires = *expires
	}
	return size > 0, nil
}

// checkOrigin refuses origin when another log of the database (named or
// default, other than the log self) has it: each log of a
// database needs its own origin, or their checkpoints could be taken for
// one another's.
func checkOrigin(ctx context.Context, rawURL, self, origin string) error {
	logs, err := ListLogs(ctx, rawURL)
	if err != nil {
		return err
	}
	for _, li := range logs {
		if li.Name != self && li.Origin == origin {
			return fmt.Errorf("origin %q is already the origin of log %s in this database: each log needs its own origin", origin, li.Name)
		}
	}
	return nil
}

func wrapErr(location string, err error) error {
	s := &Store{location: location}
	return s.wrap(err)
}
