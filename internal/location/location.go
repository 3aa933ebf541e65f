// Package location decides where a command reads and writes a log, by
// one rule:
//
//  1. a location the user typed (--dir, --ledger, --store, --bundle,
//     --tiles) wins; typing two of them is a usage error, never a silent
//     choice;
//  2. otherwise the first set of $CUSTODY_LEDGER, $CUSTODY_STORE and
//     $CUSTODY_DIR, in that order, among the kinds the command takes;
//  3. otherwise ./custody-data, for a command that takes a data folder.
//
// Which log of a database or a server: the name typed (--log), else
// $CUSTODY_LOG, else the default log. With a store it becomes the URL's
// custody_log parameter (storage/pgstore), with a server the /logs/NAME
// path; a data folder, a bundle and an export hold one log, so a named log
// there is a usage error.
//
// It promises that the environment is consulted only when nothing was
// typed (an exported variable never beats a typed flag, nor clashes with
// it), that every error it returns for what the user gave is a
// *UsageError naming the value and where it came from, and that a
// [Location] says what said so (its From), for the messages of the
// commands that use it. It opens nothing.
package location

import (
	"fmt"
	"slices"
	"strings"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/storage/pgstore"
)

// Kind is a kind of place a command can read a log from; its name is its
// flag's.
type Kind string

const (
	Dir    Kind = "dir"    // a data folder (Badger)
	Ledger Kind = "ledger" // a custody server's URL
	Store  Kind = "store"  // a store URL, like postgres://...
	Bundle Kind = "bundle" // a bundle file (replay)
	Tiles  Kind = "tiles"  // a static tlog-tiles export, folder or URL (audit)
)

// Env is the environment, in the order it is consulted.
var Env = []struct {
	Kind Kind
	Var  string
}{
	{Ledger, "CUSTODY_LEDGER"},
	{Store, "CUSTODY_STORE"},
	{Dir, "CUSTODY_DIR"},
}

// DefaultDir is the data folder when no flag or variable says.
const DefaultDir = "./custody-data"

// LogEnv names the log of a store or server when --log is not typed.
const LogEnv = "CUSTODY_LOG"

// LogKeyEnv is the verifier key used with a server, a bundle or an export
// when --log-key is not typed.
const LogKeyEnv = "CUSTODY_LOG_KEY"

// Location is where a command reads and writes, and what said so.
type Location struct {
	Kind  Kind
	Value string
	From  string // "--dir", "$CUSTODY_DIR" or "default"
	// Log names the log of a store or server ("" for the default log);
	// Value names it already.
	Log string
}

func (l Location) String() string {
	if l.From == "default" {
		return fmt.Sprintf("%s %s (the default)", l.Kind, l.Value)
	}
	return fmt.Sprintf("%s %s (from %s)", l.Kind, l.Value, l.From)
}

// Why names where l came from when the user did not type it, for an
// error message: " (--dir from $CUSTODY_DIR)"; "" for a typed flag, since
// the error names the value already.
func (l Location) Why() string {
	switch {
	case strings.HasPrefix(l.From, "--"):
		return ""
	case l.From == "default":
		return fmt.Sprintf(" (--%s defaults to %s)", l.Kind, l.Value)
	}
	return fmt.Sprintf(" (--%s from %s)", l.Kind, l.From)
}

// Noun is what a location of kind k is: a folder, a file or a URL.
func Noun(k Kind) string {
	switch k {
	case Dir, Tiles:
		return "folder"
	case Bundle:
		return "file"
	}
	return "URL"
}

// UsageError is a location the user gave that cannot be used as given.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// Request is what the command line says about where to read and write.
type Request struct {
	// Kinds are the kinds the command takes, in its flags' order.
	Kinds []Kind
	// Typed holds the location flags the user typed.
	Typed map[Kind]string
	// Log and LogFrom are the log's name and what said so ("--log" or
	// "$CUSTODY_LOG"; "" when neither: the default log). See LogArg.
	Log, LogFrom string
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
}

// Resolve decides where the request reads and writes (see the rule
// above).
func Resolve(r Request) (Location, error) {
	var typed []Location
	for _, k := range r.Kinds {
		if v, ok := r.Typed[k]; ok {
			typed = append(typed, Location{Kind: k, Value: v, From: "--" + string(k)})
		}
	}
	switch {
	case len(typed) > 1:
		names := make([]string, len(typed))
		for i, t := range typed {
			names[i] = fmt.Sprintf("%s %q", t.From, t.Value)
		}
		return Location{}, usage("%s: give one place to read from, not %d", strings.Join(names, " and "), len(typed))
	case len(typed) == 1:
		if strings.TrimSpace(typed[0].Value) == "" {
			return Location{}, usage("%s is empty: give a %s", typed[0].From, Noun(typed[0].Kind))
		}
		return r.check(typed[0])
	}
	loc, err := r.fromEnv()
	if err != nil {
		return loc, err
	}
	return r.check(loc)
}

// fromEnv is Resolve past the typed flags: the environment, else the
// default.
func (r Request) fromEnv() (Location, error) {
	for _, e := range Env {
		if !slices.Contains(r.Kinds, e.Kind) {
			continue
		}
		if v := r.Getenv(e.Var); v != "" {
			return Location{Kind: e.Kind, Value: v, From: "$" + e.Var}, nil
		}
	}
	if slices.Contains(r.Kinds, Dir) {
		return Location{Kind: Dir, Value: DefaultDir, From: "default"}, nil
	}
	flags := make([]string, len(r.Kinds))
	for i, k := range r.Kinds {
		flags[i] = "--" + string(k)
	}
	return Location{}, usage("say where to read from: give %s", strings.Join(flags, " or "))
}

// check refuses a store location that is not a store URL (a data folder
// is --dir), naming where it came from, and applies the log the request
// names.
func (r Request) check(loc Location) (Location, error) {
	if loc.Kind == Store && !ledger.IsStoreURL(loc.Value) {
		return Location{}, usage("%s %q: want a postgres:// URL (a data folder is --dir)", loc.From, loc.Value)
	}
	return WithLog(loc, r.Log, r.LogFrom)
}

// LogArg returns the log's name: typed (when set), or else $CUSTODY_LOG,
// and what said so; "" when neither.
func LogArg(typed string, set bool, getenv func(string) string) (name, from string) {
	return arg(typed, set, getenv, "--log", LogEnv)
}

// LogKeyArg returns the verifier key: typed (when set), or else
// $CUSTODY_LOG_KEY, and what said so; "" when neither.
func LogKeyArg(typed string, set bool, getenv func(string) string) (value, from string) {
	return arg(typed, set, getenv, "--log-key", LogKeyEnv)
}

// arg is a flag's value when typed, else its variable's, and what said so.
func arg(typed string, set bool, getenv func(string) string, flag, env string) (string, string) {
	if set {
		return typed, flag
	}
	if v := getenv(env); v != "" {
		return v, "$" + env
	}
	return "", ""
}

// WithLog applies the log name (from says what named it; "" for none) to
// loc: a store URL's custody_log, a server's /logs/NAME.
func WithLog(loc Location, name, from string) (Location, error) {
	if from == "" || name == pgstore.DefaultLog {
		return loc, nil
	}
	if err := pgstore.CheckLogName(name); err != nil {
		return Location{}, usage("%s: %v", from, err)
	}
	switch loc.Kind {
	case Store:
		if _, have, err := pgstore.SplitLog(loc.Value); err == nil && have != "" && have != name {
			return Location{}, usage("%s %s, but the store URL%s names log %s (custody_log=%s): name one", from, name, loc.Why(), have, have)
		}
		v, err := pgstore.WithLog(loc.Value, name)
		if err != nil {
			return Location{}, usage("%s%s: %v", loc.From, loc.Why(), err)
		}
		loc.Value = v
	case Ledger:
		// A server serving several logs serves log NAME under /logs/NAME.
		bases := strings.Split(loc.Value, ",")
		for i, b := range bases {
			bases[i] = strings.TrimRight(strings.TrimSpace(b), "/") + "/logs/" + name
		}
		loc.Value = strings.Join(bases, ",")
	default:
		return Location{}, usage("%s %s: a %s (%s%s) holds one log; logs with names are in a PostgreSQL database (--store postgres://...) or on a server (--ledger URL)",
			from, name, Noun(loc.Kind), "--"+string(loc.Kind), loc.Why())
	}
	loc.Log = name
	return loc, nil
}
