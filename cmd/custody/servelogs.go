package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/publish"
	"github.com/custodylog/custody/server"
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

// servedLog is one log of a server of several.
type servedLog struct {
	name string
	l    *ledger.Ledger
	srv  *server.Server
}

// serveLogs serves the logs names of the database at loc on ln, each
// with its own ledger, lease loop and publisher, until ctx ends.
func serveLogs(ctx context.Context, c *cli.Command, log *slog.Logger, ln net.Listener, loc location.Location, names, prefer []string,
	lopts ledger.Options, opts server.Options) (err error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Leaderships spread: a free lease of a log this server does not
	// prefer is taken only once it has stayed free one lease time for
	// every log this server already sequences.
	var mu sync.Mutex
	var opened []*ledger.Ledger
	leading := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range opened {
			if l.Role().Leader {
				n++
			}
		}
		return n
	}
	ttl := lopts.LeaseTTL

	var logs []servedLog
	var publishers sync.WaitGroup
	pctx, stopPublishing := context.WithCancel(ctx)
	defer func() {
		stopPublishing()
		publishers.Wait()
		for _, sl := range logs {
			if cerr := sl.l.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing log %s: %w", sl.name, cerr)
			}
		}
	}()
	// The logs it prefers are opened first, so that they count as led
	// when the others' leases are tried at their open.
	names = slices.Clone(names)
	slices.SortStableFunc(names, func(a, b string) int {
		pa, pb := slices.Contains(prefer, a), slices.Contains(prefer, b)
		switch {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return 0
	})
	named := map[string]*server.Server{}
	var def *server.Server
	headFile := os.Getenv("CUSTODY_HEAD_FILE")
	for _, name := range names {
		url, err := pgstore.WithLog(loc.Value, name)
		if err != nil {
			ln.Close()
			return err
		}
		lo := lopts
		if name != pgstore.DefaultLog {
			lo.Advertise = strings.TrimRight(lopts.Advertise, "/") + server.LogsPrefix + name
		}
		if headFile != "" {
			lo.HeadFile = headFile + "." + name
		}
		preferred := slices.Contains(prefer, name)
		lo.Prefer = preferred
		lo.LeaseWait = func() time.Duration {
			if preferred {
				return 0
			}
			return time.Duration(leading()) * ttl
		}
		lloc := location.Location{Kind: location.Store, Value: url, From: loc.From}
		if name != pgstore.DefaultLog {
			lloc.Log = name
		}
		l, err := openLedgerAtWith(c, lloc, lo)
		if err != nil {
			ln.Close()
			return fmt.Errorf("log %s: %w", name, err)
		}
		logs = append(logs, servedLog{name: name, l: l})
		mu.Lock()
		opened = append(opened, l)
		mu.Unlock()
		lg := log.With("log", name)
		r := l.Role()
		role := "follower"
		if r.Leader {
			role = "leader"
		}
		lg.Info("serving a shared log", "store", l.Dir(), "role", role, "epoch", r.Epoch, "leader", r.LeaderURL, "advertise", lo.Advertise, "prefer", preferred)
		o := opts
		o.Logger = lg
		o.Registry = reg
		o.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"log": name}, reg)
		if u := c.String("publish"); u != "" {
			if name != pgstore.DefaultLog {
				u = strings.TrimRight(u, "/") + server.LogsPrefix + name
			}
			bucket, err := publish.Open(ctx, u)
			if err != nil {
				ln.Close()
				return fmt.Errorf("--publish for log %s: %w", name, err)
			}
			pub := publish.New(l, bucket, publish.Options{Logger: lg})
			if err := pub.Register(o.Registerer); err != nil {
				ln.Close()
				return err
			}
			publishers.Add(1)
			go func() { defer publishers.Done(); pub.Run(pctx) }()
			lg.Info("publishing tiles", "bucket", bucket.String())
		}
		srv := server.New(l, o)
		logs[len(logs)-1].srv = srv
		if name == pgstore.DefaultLog {
			def = srv
		} else {
			named[name] = srv
		}
	}
	g := server.NewLogs(named, def, reg)
	err = g.Serve(ctx, ln, server.ServeOptions{TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
		ShutdownTimeout: c.Duration("shutdown-timeout")})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
