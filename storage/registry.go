package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A Driver opens one kind of store. Drivers register themselves from an
// init function (Register), as database/sql drivers do, and a program
// links the drivers it wants by importing them (cmd/custody imports
// storage/badgerstore and storage/pgstore); package ledger imports none.
type Driver struct {
	// Open opens the store at loc; with o.Create it makes an empty one
	// where there is none.
	Open func(ctx context.Context, loc string, o OpenOptions) (Store, error)
	// Local is true for a store that is a folder on this machine: the
	// folder also keeps the ledger's signed head (a file beside the
	// store). False for a database many servers share: each server keeps
	// the signed head in its own configuration folder.
	Local bool
	// Exists reports whether loc holds a store; for a Local driver, so
	// that opening a folder that holds none says so instead of making
	// one. Nil: the driver answers at Open.
	Exists func(loc string) bool
	// CheckCopyFirst says that a read-write open may change what the
	// store holds (Badger cuts a torn write-ahead log when it opens), so
	// the ledger first opens a read-only copy (OpenOptions.ReadOnly) and
	// checks it against the signed head before the real open.
	CheckCopyFirst bool
}

// OpenOptions are what every driver is told when a store is opened.
type OpenOptions struct {
	// Create makes an empty store where there is none (custody init).
	Create bool
	// Origin is the log's origin, with Create, for a driver that checks
	// it (PostgreSQL refuses an origin another log of the database has).
	Origin string
	// ReadOnly opens the store for reading only: it must not change
	// anything the store holds, and Commit fails.
	ReadOnly bool
	// Driver is the driver's own options (badgerstore.Options,
	// pgstore.Options), given by the command that wires the store; nil
	// for the driver's defaults. A driver refuses another's options.
	Driver any
}

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes a driver available under scheme: a location
// "scheme://..." opens with it. The scheme "" is for locations that are
// not URLs: a folder. Registering a scheme twice panics, as
// database/sql's Register does.
func Register(scheme string, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d.Open == nil {
		panic("storage: Register of scheme " + scheme + " without Open")
	}
	if _, dup := drivers[scheme]; dup {
		panic("storage: Register called twice for scheme " + scheme)
	}
	drivers[scheme] = d
}

// Scheme is loc's URL scheme ("postgres" for postgres://...), or "" for a
// location that is not a URL (a folder).
func Scheme(loc string) string {
	i := strings.Index(loc, "://")
	if i <= 0 {
		return ""
	}
	s := loc[:i]
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return ""
		}
	}
	return strings.ToLower(s)
}

// IsURL reports whether loc names a store by URL (a database) rather
// than a folder.
func IsURL(loc string) bool { return Scheme(loc) != "" }

// Lookup returns the driver that opens loc, or an error naming the
// schemes this program knows.
func Lookup(loc string) (Driver, error) {
	scheme := Scheme(loc)
	driversMu.RLock()
	d, ok := drivers[scheme]
	driversMu.RUnlock()
	if ok {
		return d, nil
	}
	if scheme == "" {
		return Driver{}, fmt.Errorf("storage: %s: no driver for a data folder is linked into this program (import custody/storage/badgerstore)", loc)
	}
	return Driver{}, fmt.Errorf("storage: %s: no store driver for the scheme %q (known: %s)", Redacted(loc), scheme, strings.Join(Schemes(), ", "))
}

// Schemes lists the registered schemes, sorted ("" is shown as "folder").
func Schemes() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	var s []string
	for k := range drivers {
		if k == "" {
			k = "folder"
		} else {
			k += "://"
		}
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the store at loc with the driver registered for its scheme.
func Open(ctx context.Context, loc string, o OpenOptions) (Store, error) {
	d, err := Lookup(loc)
	if err != nil {
		return nil, err
	}
	return d.Open(ctx, loc, o)
}

// Redacted is loc without a password in its user information, for
// messages.
func Redacted(loc string) string {
	i := strings.Index(loc, "://")
	if i < 0 {
		return loc
	}
	rest := loc[i+3:]
	at := strings.IndexByte(rest, '@')
	if slash := strings.IndexByte(rest, '/'); at < 0 || (slash >= 0 && slash < at) {
		return loc
	}
	if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
		return loc[:i+3] + rest[:colon] + ":xxxxx" + rest[at:]
	}
	return loc
}
