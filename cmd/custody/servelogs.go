package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/storage/pgstore"
)

// serveLogNames returns the logs serve serves when it serves several
// (--log, --all-logs, $CUSTODY_LOG), or nil for the one log of its
// location, at / as ever; and the logs it prefers to sequence.
func serveLogNames(ctx context.Context, c *cli.Command, loc location.Location) (names, prefer []string, err error) {
	typed := c.StringSlice("log")
	all := c.Bool("all-logs")
	prefer = c.StringSlice("prefer")
	from := "--log"
	if len(typed) == 0 && !all {
		if v := os.Getenv(location.LogEnv); v != "" && v != pgstore.DefaultLog {
			typed, from = []string{v}, "$"+location.LogEnv
		}
	}
	if len(typed) == 0 && !all {
		if len(prefer) > 0 {
			return nil, nil, usage(c, "--prefer is for a server of several logs (--log A --log B, or --all-logs)")
		}
		return nil, nil, nil
	}
	switch {
	case all && len(typed) > 0:
		return nil, nil, usage(c, "--all-logs and --log %s: give one", strings.Join(typed, " --log "))
	case loc.Kind != location.Store:
		what := "--log " + strings.Join(typed, " --log ")
		if all {
			what = "--all-logs"
		}
		if from != "--log" {
			what = from + "=" + typed[0]
		}
		return nil, nil, usage(c, "%s: a data folder (%s%s) holds one log; logs with names are in a PostgreSQL database (--store postgres://...)",
			what, loc.From, loc.Why())
	case c.String("witness-policy") != "":
		return nil, nil, usage(c, "--witness-policy serves one log's witnesses: run a server per log to have their checkpoints witnessed")
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
				return nil, nil, usage(c, "%s: %v", from, err)
			}
		}
		if slices.Contains(typed[:i], n) {
			return nil, nil, usage(c, "%s %s is given twice", from, n)
		}
	}
	for _, p := range prefer {
		if !slices.Contains(typed, p) {
			return nil, nil, usage(c, "--prefer %s: this server does not serve log %s (it serves %s)", p, p, strings.Join(typed, ", "))
		}
	}
	return typed, prefer, nil
}
