package serving

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/storage/pgstore"
)

// Selection is which logs of a database a server serves, as its command
// line says: the logs typed (--log NAME...), or every log the database
// holds (--all-logs), or else the log $CUSTODY_LOG names; and the logs it
// prefers to sequence (--prefer).
type Selection struct {
	Typed  []string
	All    bool
	Prefer []string
	// Witnessed is set when the server sends checkpoints to witnesses,
	// which it does for one log only.
	Witnessed bool
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
}

// UsageError is a selection that cannot be served as given.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// Names returns the logs to serve when the server serves several, or nil
// for the one log of loc, at / as ever; and the logs it prefers. Every
// name is a log name (pgstore.CheckLogName), none is given twice, and
// every preferred log is served; a data folder holds one log.
func (s Selection) Names(ctx context.Context, loc location.Location) (names, prefer []string, err error) {
	typed, all, prefer := slices.Clone(s.Typed), s.All, s.Prefer
	from := "--log"
	if len(typed) == 0 && !all {
		if v := s.Getenv(location.LogEnv); v != "" && v != pgstore.DefaultLog {
			typed, from = []string{v}, "$"+location.LogEnv
		}
	}
	if len(typed) == 0 && !all {
		if len(prefer) > 0 {
			return nil, nil, usage("--prefer is for a server of several logs (--log A --log B, or --all-logs)")
		}
		return nil, nil, nil
	}
	switch {
	case all && len(typed) > 0:
		return nil, nil, usage("--all-logs and --log %s: give one", strings.Join(typed, " --log "))
	case loc.Kind != location.Store:
		what := "--log " + strings.Join(typed, " --log ")
		if all {
			what = "--all-logs"
		}
		if from != "--log" {
			what = from + "=" + typed[0]
		}
		return nil, nil, usage("%s: a data folder (%s%s) holds one log; logs with names are in a PostgreSQL database (--store postgres://...)",
			what, loc.From, loc.Why())
	case s.Witnessed:
		return nil, nil, usage("--witness-policy serves one log's witnesses: run a server per log to have their checkpoints witnessed")
	}
	if all {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		logs, err := pgstore.ListLogs(lctx, loc.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("serve --all-logs: %w", err)
		}
		for _, li := range logs {
			typed = append(typed, li.Name)
		}
		if len(typed) == 0 {
			base, _, _ := pgstore.SplitLog(pgstore.Redact(loc.Value))
			return nil, nil, fmt.Errorf("serve --all-logs: the database at %s holds no log (custody init --store URL --log NAME --origin ORIGIN creates one)", base)
		}
	}
	for i, n := range typed {
		if n != pgstore.DefaultLog {
			if err := pgstore.CheckLogName(n); err != nil {
				return nil, nil, usage("%s: %v", from, err)
			}
		}
		if slices.Contains(typed[:i], n) {
			return nil, nil, usage("%s %s is given twice", from, n)
		}
	}
	for _, p := range prefer {
		if !slices.Contains(typed, p) {
			return nil, nil, usage("--prefer %s: this server does not serve log %s (it serves %s)", p, p, strings.Join(typed, ", "))
		}
	}
	return typed, prefer, nil
}
