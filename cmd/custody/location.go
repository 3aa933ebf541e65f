package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/storage/pgstore"
)

// # Where a command reads and writes
//
// Every command that reads or writes a log finds it here, in one function,
// resolveLocation, by one rule:
//
//  1. a location flag the user typed (--dir, --ledger, --store, --bundle,
//     --tiles) wins; typing two of them is a usage error (exit 2), never a
//     silent choice;
//  2. otherwise the first set of $CUSTODY_LEDGER, $CUSTODY_STORE and
//     $CUSTODY_DIR, in that order, among the kinds the command takes;
//  3. otherwise ./custody-data, for a command that takes a data folder.
//
// Which log of a database or a server: --log NAME, else $CUSTODY_LOG, else
// the default log (logLocation). With --store it becomes the URL's
// custody_log parameter (storage/pgstore), with --ledger the server's
// /logs/NAME path; a data folder, a bundle and an export hold one log, so
// a named log there is a usage error.
//
// Location flags never read the environment themselves (no urfave Sources):
// that is how an exported variable used to beat a typed flag, or clash
// with it. The environment is consulted only here, and only when no
// location flag was typed.

// locKind is a kind of place a command can read a log from.
type locKind string

const (
	locDir    locKind = "dir"    // a data folder (Badger)
	locLedger locKind = "ledger" // a custody server's URL
	locStore  locKind = "store"  // a store URL, like postgres://...
	locBundle locKind = "bundle" // a bundle file (replay)
	locTiles  locKind = "tiles"  // a static tlog-tiles export, folder or URL (audit)
)

// locEnv is the environment, in the order it is consulted.
var locEnv = []struct {
	kind locKind
	env  string
}{
	{locLedger, "CUSTODY_LEDGER"},
	{locStore, "CUSTODY_STORE"},
	{locDir, "CUSTODY_DIR"},
}

// logKeyEnv is the verifier key used with --ledger, --bundle or --tiles
// when --log-key is not typed.
const logKeyEnv = "CUSTODY_LOG_KEY"

// locCategory groups the location flags in --help and marks them for
// locationKinds; configure replaces it with the rule as it applies to each
// command (whereCategory), which keeps the prefix.
const locCategory = "WHERE"

// whereCategory is the heading of a command's location flags in --help:
// the rule, for the kinds the command takes.
func whereCategory(kinds []locKind) string {
	var envs []string
	for _, e := range locEnv {
		if slices.Contains(kinds, e.kind) {
			envs = append(envs, "$"+e.env)
		}
	}
	s := locCategory + " (a typed flag wins"
	switch len(envs) {
	case 0:
	case 1:
		s += "; else " + envs[0]
	default:
		s += "; else " + strings.Join(envs, ", ") + ", the first set"
	}
	if slices.Contains(kinds, locDir) {
		s += "; else " + defaultDir
	}
	return s + ")"
}

// defaultDir is the data folder when no flag or variable says.
const defaultDir = "./custody-data"

// logEnv names the log of a store or server when --log is not typed.
const logEnv = "CUSTODY_LOG"

// location is where a command reads and writes, and what said so.
type location struct {
	kind  locKind
	value string
	from  string // "--dir", "$CUSTODY_DIR" or "default"
	// log names the log of a store or server ("" for the default log);
	// value names it already.
	log string
}

func (l location) String() string {
	if l.from == "default" {
		return fmt.Sprintf("%s %s (the default)", l.kind, l.value)
	}
	return fmt.Sprintf("%s %s (from %s)", l.kind, l.value, l.from)
}

// why names where loc came from when the user did not type it, for an
// error message: " (--dir from $CUSTODY_DIR)"; "" for a typed flag, since
// the error names the value already.
func (l location) why() string {
	switch {
	case strings.HasPrefix(l.from, "--"):
		return ""
	case l.from == "default":
		return fmt.Sprintf(" (--%s defaults to %s)", l.kind, l.value)
	}
	return fmt.Sprintf(" (--%s from %s)", l.kind, l.from)
}

// locFlag makes the flag of a location kind; usageText overrides the
// kind's usual sentence when not empty.
func locFlag(k locKind, usageText string) cli.Flag {
	f := &cli.StringFlag{Name: string(k), Category: locCategory, TakesFile: k != locLedger && k != locStore}
	switch k {
	case locDir:
		f.Usage = "the ledger's data `FOLDER` ($CUSTODY_DIR; default " + defaultDir + ")"
	case locLedger:
		f.Usage = "a custody server's `URL`, like http://127.0.0.1:8080, instead of a data folder ($CUSTODY_LEDGER)"
	case locStore:
		f.Usage = "the ledger's database instead of a data folder: `postgres://USER@HOST:PORT/DB` ($CUSTODY_STORE; docs/DEPLOY.md)"
	case locBundle:
		f.Usage = "a workflow bundle `FILE` instead of a ledger"
	case locTiles:
		f.Usage = "a static export (custody export) in this `FOLDER` or at this http(s) URL, instead of a ledger"
	}
	if usageText != "" {
		f.Usage = usageText
	}
	return f
}

// logFlag is --log, which names one log of a store or server; configure
// gives it to every command that takes --store or --ledger.
func logFlag() cli.Flag {
	return &cli.StringFlag{Name: "log", Usage: "with --store or --ledger: the `NAME` of the log, among the logs of one database or server (custody logs lists them; $" + logEnv + "; default: the default log)"}
}

// logArg returns the log name typed with --log, or else $CUSTODY_LOG, and
// what said so; "" when neither. Commands whose --log is something else
// (serve's list) have none.
func logArg(c *cli.Command) (name, from string) {
	has := false
	for _, f := range c.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "log" {
			has = true
		}
	}
	if !has {
		return "", ""
	}
	if c.IsSet("log") {
		return c.String("log"), "--log"
	}
	if v := os.Getenv(logEnv); v != "" {
		return v, "$" + logEnv
	}
	return "", ""
}

// logLocation applies the log named by --log or $CUSTODY_LOG to loc.
func logLocation(c *cli.Command, loc location) (location, error) {
	name, from := logArg(c)
	if from == "" || name == pgstore.DefaultLog {
		return loc, nil
	}
	if err := pgstore.CheckLogName(name); err != nil {
		return location{}, usage(c, "%s: %v", from, err)
	}
	switch loc.kind {
	case locStore:
		if _, have, err := pgstore.SplitLog(loc.value); err == nil && have != "" && have != name {
			return location{}, usage(c, "%s %s, but the store URL%s names log %s (custody_log=%s): name one", from, name, loc.why(), have, have)
		}
		v, err := pgstore.WithLog(loc.value, name)
		if err != nil {
			return location{}, usage(c, "%s%s: %v", loc.from, loc.why(), err)
		}
		loc.value = v
	case locLedger:
		// A server serving several logs serves log NAME under /logs/NAME.
		bases := strings.Split(loc.value, ",")
		for i, b := range bases {
			bases[i] = strings.TrimRight(strings.TrimSpace(b), "/") + "/logs/" + name
		}
		loc.value = strings.Join(bases, ",")
	default:
		return location{}, usage(c, "%s %s: a %s (%s%s) holds one log; logs with names are in a PostgreSQL database (--store postgres://...) or on a server (--ledger URL)",
			from, name, locNoun(loc.kind), "--"+string(loc.kind), loc.why())
	}
	loc.log = name
	return loc, nil
}

// dirFlag is --dir.
func dirFlag() cli.Flag { return locFlag(locDir, "") }

// logKeyFlag is --log-key, the verifier key that answers from a server,
// a bundle or an export are checked against.
func logKeyFlag(usageText string) cli.Flag {
	return &cli.StringFlag{Name: "log-key", Usage: usageText + " ($" + logKeyEnv + ")", TakesFile: true}
}

// locationKinds returns the kinds of location c takes, in its flags'
// order.
func locationKinds(c *cli.Command) []locKind {
	var out []locKind
	for _, f := range c.Flags {
		if cf, ok := f.(cli.CategorizableFlag); ok && strings.HasPrefix(cf.GetCategory(), locCategory) {
			out = append(out, locKind(f.Names()[0]))
		}
	}
	return out
}

// resolveLocation decides where c reads and writes (see the rule above).
func resolveLocation(c *cli.Command) (location, error) {
	kinds := locationKinds(c)
	var typed []location
	for _, k := range kinds {
		if c.IsSet(string(k)) {
			typed = append(typed, location{kind: k, value: c.String(string(k)), from: "--" + string(k)})
		}
	}
	switch {
	case len(typed) > 1:
		names := make([]string, len(typed))
		for i, t := range typed {
			names[i] = fmt.Sprintf("%s %q", t.from, t.value)
		}
		return location{}, usage(c, "%s: give one place to read from, not %d", strings.Join(names, " and "), len(typed))
	case len(typed) == 1:
		if strings.TrimSpace(typed[0].value) == "" {
			return location{}, usage(c, "%s is empty: give a %s", typed[0].from, locNoun(typed[0].kind))
		}
		return checkLocation(c, typed[0])
	}
	loc, err := envLocation(c, kinds)
	if err != nil {
		return loc, err
	}
	return checkLocation(c, loc)
}

// envLocation is resolveLocation past the typed flags: the environment,
// else the default.
func envLocation(c *cli.Command, kinds []locKind) (location, error) {
	for _, e := range locEnv {
		if !slices.Contains(kinds, e.kind) {
			continue
		}
		if v := os.Getenv(e.env); v != "" {
			return location{kind: e.kind, value: v, from: "$" + e.env}, nil
		}
	}
	if slices.Contains(kinds, locDir) {
		return location{kind: locDir, value: defaultDir, from: "default"}, nil
	}
	flags := make([]string, len(kinds))
	for i, k := range kinds {
		flags[i] = "--" + string(k)
	}
	return location{}, usage(c, "say where to read from: give %s", strings.Join(flags, " or "))
}

// checkLocation refuses a store location that is not a store URL (a data
// folder is --dir), as a usage error naming where it came from, and
// applies the log --log or $CUSTODY_LOG names.
func checkLocation(c *cli.Command, loc location) (location, error) {
	if loc.kind == locStore && !ledger.IsStoreURL(loc.value) {
		return location{}, usage(c, "%s %q: want a postgres:// URL (a data folder is --dir)", loc.from, loc.value)
	}
	return logLocation(c, loc)
}

func locNoun(k locKind) string {
	switch k {
	case locDir, locTiles:
		return "folder"
	case locBundle:
		return "file"
	}
	return "URL"
}

// logKeyArg returns the verifier key typed with --log-key, or else
// $CUSTODY_LOG_KEY, and what said so; "" when neither.
func logKeyArg(c *cli.Command) (value, from string) {
	if c.IsSet("log-key") {
		return c.String("log-key"), "--log-key"
	}
	if v := os.Getenv(logKeyEnv); v != "" {
		return v, "$" + logKeyEnv
	}
	return "", ""
}

// openLedgerAt opens the ledger of a data folder or store location. The
// log key may be passphrase-protected; the passphrase comes from
// $CUSTODY_PASSPHRASE or the terminal.
//
// A reading command opens it readOnly: a data folder through a scratch
// copy, so that nothing in it changes (not even what the storage engine
// would cut from a damaged file), and a damaged one still opens, with a
// warning, for inspection.
func openLedgerAt(c *cli.Command, loc location, readOnly bool) (*ledger.Ledger, error) {
	return openLedgerAtWith(c, loc, ledger.Options{ReadOnly: readOnly})
}

// openLedgerAtWith is openLedgerAt with options (serve's reserve and
// ballast).
func openLedgerAtWith(c *cli.Command, loc location, opts ledger.Options) (*ledger.Ledger, error) {
	if loc.kind != locDir && loc.kind != locStore {
		return nil, fmt.Errorf("%s is not a ledger this command can open", loc)
	}
	opts.HeadFile = os.Getenv("CUSTODY_HEAD_FILE")
	opts.Passphrase = sign.Passphrase("passphrase for the log key of " + loc.value + ": ")
	l, err := ledger.Open(loc.value, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the ledger%s: %w", loc.why(), err)
	}
	if d := l.Damage(); d != nil {
		fmt.Fprintf(c.Root().ErrWriter, "custody: warning: %v\n", d)
	}
	return l, nil
}

// openLedger resolves c's location and opens its ledger (readOnly for a
// command that only reads); the location must be a data folder or a store.
func openLedger(c *cli.Command, readOnly bool) (*ledger.Ledger, error) {
	return openLedgerWith(c, ledger.Options{ReadOnly: readOnly})
}

// openLedgerWith is openLedger with options.
func openLedgerWith(c *cli.Command, opts ledger.Options) (*ledger.Ledger, error) {
	loc, err := resolveLocation(c)
	if err != nil {
		return nil, err
	}
	return openLedgerAtWith(c, loc, opts)
}
