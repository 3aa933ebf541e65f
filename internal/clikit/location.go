package clikit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
)

// Where a command reads and writes is decided by package location, by one
// rule (its doc); this file makes the location flags and hands the package
// what was typed. Location flags never read the environment themselves (no
// urfave Sources): that is how an exported variable used to beat a typed
// flag, or clash with it.

// LocCategory groups the location flags in --help and marks them for
// LocationKinds; cmd/custody's configure replaces it with the rule as it
// applies to each command (WhereCategory), which keeps the prefix.
const LocCategory = "WHERE"

// WhereCategory is the heading of a command's location flags in --help:
// the rule, for the kinds the command takes.
func WhereCategory(kinds []location.Kind) string {
	var envs []string
	for _, e := range location.Env {
		if slices.Contains(kinds, e.Kind) {
			envs = append(envs, "$"+e.Var)
		}
	}
	s := LocCategory + " (a typed flag wins"
	switch len(envs) {
	case 0:
	case 1:
		s += "; else " + envs[0]
	default:
		s += "; else " + strings.Join(envs, ", ") + ", the first set"
	}
	if slices.Contains(kinds, location.Dir) {
		s += "; else " + location.DefaultDir
	}
	return s + ")"
}

// LocFlag makes the flag of a location kind; usageText overrides the
// kind's usual sentence when not empty.
func LocFlag(k location.Kind, usageText string) cli.Flag {
	f := &cli.StringFlag{Name: string(k), Category: LocCategory, TakesFile: k != location.Ledger && k != location.Store}
	switch k {
	case location.Dir:
		f.Usage = "the ledger's data `FOLDER` ($CUSTODY_DIR; default " + location.DefaultDir + ")"
	case location.Ledger:
		f.Usage = "a custody server's `URL`, like http://127.0.0.1:8080, instead of a data folder ($CUSTODY_LEDGER)"
	case location.Store:
		f.Usage = "the ledger's database instead of a data folder: `postgres://USER@HOST:PORT/DB` ($CUSTODY_STORE; docs/DEPLOY.md)"
	case location.Bundle:
		f.Usage = "a workflow bundle `FILE` instead of a ledger"
	case location.Tiles:
		f.Usage = "a static export (custody export) in this `FOLDER` or at this http(s) URL, instead of a ledger"
	}
	if usageText != "" {
		f.Usage = usageText
	}
	return f
}

// LogFlag is --log, which names one log of a store or server; cmd/custody's
// configure gives it to every command that takes --store or --ledger.
func LogFlag() cli.Flag {
	return &cli.StringFlag{Name: "log", Usage: "with --store or --ledger: the `NAME` of the log, among the logs of one database or server (custody logs lists them; $" + location.LogEnv + "; default: the default log)"}
}

// logArg returns the log name typed with --log, or else $CUSTODY_LOG, and
// what said so; "" when neither. Commands whose --log is something else
// (serve's list) have none.
func logArg(c *cli.Command) (name, from string) {
	for _, f := range c.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "log" {
			return location.LogArg(c.String("log"), c.IsSet("log"), os.Getenv)
		}
	}
	return "", ""
}

// DirFlag is --dir.
func DirFlag() cli.Flag { return LocFlag(location.Dir, "") }

// LogKeyFlag is --log-key, the verifier key that answers from a server,
// a bundle or an export are checked against.
func LogKeyFlag(usageText string) cli.Flag {
	return &cli.StringFlag{Name: "log-key", Usage: usageText + " ($" + location.LogKeyEnv + ")", TakesFile: true}
}

// LocationKinds returns the kinds of location c takes, in its flags'
// order.
func LocationKinds(c *cli.Command) []location.Kind {
	var out []location.Kind
	for _, f := range c.Flags {
		if cf, ok := f.(cli.CategorizableFlag); ok && strings.HasPrefix(cf.GetCategory(), LocCategory) {
			out = append(out, location.Kind(f.Names()[0]))
		}
	}
	return out
}

// ResolveNoArgs is ResolveLocation for a command that takes no
// positional arguments (a usage error if it has any).
func ResolveNoArgs(c *cli.Command) (location.Location, error) {
	if _, err := Args(c, 0, 0, ""); err != nil {
		return location.Location{}, err
	}
	return ResolveLocation(c)
}

// ResolveLocation decides where c reads and writes (package location's
// rule), from the location flags typed and --log.
func ResolveLocation(c *cli.Command) (location.Location, error) {
	r := location.Request{Kinds: LocationKinds(c), Typed: map[location.Kind]string{}, Getenv: os.Getenv}
	for _, k := range r.Kinds {
		if c.IsSet(string(k)) {
			r.Typed[k] = c.String(string(k))
		}
	}
	r.Log, r.LogFrom = logArg(c)
	loc, err := location.Resolve(r)
	var ue *location.UsageError
	if errors.As(err, &ue) {
		return loc, Usage(c, "%v", ue)
	}
	return loc, err
}

// LogKeyArg returns the verifier key typed with --log-key, or else
// $CUSTODY_LOG_KEY, and what said so; "" when neither.
func LogKeyArg(c *cli.Command) (value, from string) {
	return location.LogKeyArg(c.String("log-key"), c.IsSet("log-key"), os.Getenv)
}

// OpenLedgerAt opens the ledger of a data folder or store location. The
// log key may be passphrase-protected; the passphrase comes from
// $CUSTODY_PASSPHRASE or the terminal.
//
// A reading command opens it readOnly: a data folder through a scratch
// copy, so that nothing in it changes (not even what the storage engine
// would cut from a damaged file), and a damaged one still opens, with a
// warning, for inspection.
func OpenLedgerAt(c *cli.Command, loc location.Location, readOnly bool) (*ledger.Ledger, error) {
	return OpenLedgerAtWith(c, loc, ledger.Options{ReadOnly: readOnly})
}

// OpenLedgerAtWith is OpenLedgerAt with options (serve's reserve and
// ballast).
func OpenLedgerAtWith(c *cli.Command, loc location.Location, opts ledger.Options) (*ledger.Ledger, error) {
	if loc.Kind != location.Dir && loc.Kind != location.Store {
		return nil, fmt.Errorf("%s is not a ledger this command can open", loc)
	}
	if opts.HeadFile == "" {
		opts.HeadFile = os.Getenv("CUSTODY_HEAD_FILE")
	}
	opts.Passphrase = sign.Passphrase("passphrase for the log key of " + loc.Value + ": ")
	l, err := ledger.Open(loc.Value, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the ledger%s: %w", loc.Why(), err)
	}
	if d := l.Damage(); d != nil {
		fmt.Fprintf(c.Root().ErrWriter, "custody: warning: %v\n", d)
	}
	return l, nil
}

// OpenLedger resolves c's location and opens its ledger (readOnly for a
// command that only reads); the location must be a data folder or a store.
func OpenLedger(c *cli.Command, readOnly bool) (*ledger.Ledger, error) {
	return openLedgerWith(c, ledger.Options{ReadOnly: readOnly})
}

// openLedgerWith is OpenLedger with options.
func openLedgerWith(c *cli.Command, opts ledger.Options) (*ledger.Ledger, error) {
	loc, err := ResolveLocation(c)
	if err != nil {
		return nil, err
	}
	return OpenLedgerAtWith(c, loc, opts)
}
