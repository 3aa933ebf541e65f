// Package serving runs the process custody serve is: one log, or several
// logs of one PostgreSQL database, served over HTTP behind one listener,
// each log with its own ledger, sequencer lease and publisher.
//
// It promises the order of a server's life: each ledger is opened before
// the listener serves (a log that cannot be opened is an error, and the
// listener is closed); a publisher copies a log's tiles behind its
// sequencer, never on the append path; on shutdown the listener stops
// accepting, every append in flight is answered, the publishers stop, and
// only then is each ledger closed. With several logs, leaderships spread
// over the servers: a log this server prefers is sequenced whenever it is
// up, and another log's free lease is taken only once it has stayed free
// one lease time for every log this server already sequences.
//
// The flags that choose all this are the command's; this package takes
// their values.
package serving

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/publish"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/witness"
)

// Config is a server process's settings.
type Config struct {
	// Listener is where it serves; it is closed when serving ends or the
	// ledgers cannot be opened.
	Listener net.Listener
	Logger   *slog.Logger
	// Ledger are the options every log's ledger is opened with (Advertise
	// is this server's URL, LeaseTTL its lease time); HeadFile, when set,
	// is suffixed with .NAME for each named log.
	Ledger ledger.Options
	// Server are the options of every log's HTTP server.
	Server server.Options
	Serve  server.ServeOptions
	// Open opens the ledger at loc (a data folder or a store URL); log is
	// the log's name in its database ("" for the default log).
	Open func(loc, log string, opts ledger.Options) (*ledger.Ledger, error)
}

// One serves the one log at loc until ctx ends. bucket, when not nil, is
// where its tiles are published.
func One(ctx context.Context, cfg Config, loc string, bucket *publish.Bucket) error {
	log := cfg.Logger
	l, err := cfg.Open(loc, "", cfg.Ledger)
	if err != nil {
		cfg.Listener.Close()
		return err
	}
	if r := l.Role(); r.Shared {
		log.Info("serving a shared log", "store", l.Dir(), "role", role(r), "epoch", r.Epoch, "leader", r.LeaderURL, "advertise", cfg.Ledger.Advertise)
	}
	opts := cfg.Server
	if l.Role().Shared {
		// Only the server that sequences the log talks to witnesses.
		opts.Leading = l.LeadingChanges(ctx)
	}
	var published chan struct{}
	stopPublishing := func() {}
	if bucket != nil {
		pub := publish.New(l, bucket, publish.Options{Logger: log})
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if err := pub.Register(reg); err != nil {
			l.Close()
			cfg.Listener.Close()
			return err
		}
		opts.Registry = reg
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopPublishing = cancel
		published = make(chan struct{})
		go func() { defer close(published); pub.Run(pctx) }()
		log.Info("publishing tiles", "bucket", bucket.String())
	}
	srv := server.New(l, opts)
	err = srv.Serve(ctx, cfg.Listener, cfg.Serve)
	if published != nil {
		stopPublishing()
		<-published
	}
	if cerr := l.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("closing the ledger: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("ledger closed")
	return nil
}

func role(r ledger.Role) string {
	if r.Leader {
		return "leader"
	}
	return "follower"
}

// servedLog is one log of a server of several.
type servedLog struct {
	name string
	l    *ledger.Ledger
}

// Logs serves the logs names of the database at storeURL until ctx ends,
// log NAME under /logs/NAME/ (the default log, if named, at /), each with
// its own ledger and lease loop, and, when publishURL is set, publisher
// (log NAME under PREFIX/logs/NAME/). prefer are the logs this server
// sequences whenever it is up.
func Logs(ctx context.Context, cfg Config, storeURL string, names, prefer []string, publishURL string) (err error) {
	log, ln := cfg.Logger, cfg.Listener
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var mu sync.Mutex
	var opened []*ledger.Ledger // guarded by mu
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
	ttl := cfg.Ledger.LeaseTTL

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
	for _, name := range names {
		url, err := pgstore.WithLog(storeURL, name)
		if err != nil {
			ln.Close()
			return err
		}
		lo := cfg.Ledger
		if name != pgstore.DefaultLog {
			lo.Advertise = strings.TrimRight(cfg.Ledger.Advertise, "/") + server.LogsPrefix + name
		}
		if cfg.Ledger.HeadFile != "" {
			lo.HeadFile = cfg.Ledger.HeadFile + "." + name
		}
		preferred := slices.Contains(prefer, name)
		lo.Prefer = preferred
		lo.LeaseWait = func() time.Duration {
			if preferred {
				return 0
			}
			return time.Duration(leading()) * ttl
		}
		logName := name
		if name == pgstore.DefaultLog {
			logName = ""
		}
		l, err := cfg.Open(url, logName, lo)
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
		lg.Info("serving a shared log", "store", l.Dir(), "role", role(r), "epoch", r.Epoch, "leader", r.LeaderURL, "advertise", lo.Advertise, "prefer", preferred)
		o := cfg.Server
		o.Logger = lg
		o.Registry = reg
		o.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"log": name}, reg)
		if u := publishURL; u != "" {
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
		if name == pgstore.DefaultLog {
			def = srv
		} else {
			named[name] = srv
		}
	}
	g := server.NewLogs(named, def, reg)
	if err := g.Serve(ctx, ln, cfg.Serve); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// ParseSize reads a size: a number of bytes with an optional unit (KiB,
// MiB, GiB, TiB; K, M, G, T and KB, MB, GB, TB count 1024s too).
func ParseSize(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20,
		"g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}
	sh, ok := shift[strings.ToLower(unit)]
	if !ok || n > (1<<63)>>sh {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (KiB, MiB, GiB)", s)
	}
	return n << sh, nil
}

// ErrQuorumNone is CheckWitnessPolicy's refusal of a policy whose quorum
// is none: there would be nothing to send to witnesses.
var ErrQuorumNone = errors.New("its quorum is none, so there is nothing to send to witnesses")

// CheckWitnessPolicy checks a witness policy a server sends its
// checkpoints under: its quorum counts someone (else ErrQuorumNone), and
// every witness it counts has a URL to send checkpoints to.
func CheckWitnessPolicy(p *witness.Policy) error {
	if p.None() {
		return ErrQuorumNone
	}
	for _, w := range p.Required() {
		if w.URL == "" {
			return fmt.Errorf("witness %s has no URL: the log needs one to send it checkpoints (witness NAME VKEY URL)", w.Name)
		}
	}
	return nil
}

// WebhookSecret is the approval webhook's HMAC secret in a file's bytes:
// surrounding space trimmed, at least 16 bytes left.
func WebhookSecret(file []byte) ([]byte, error) {
	secret := bytes.TrimSpace(file)
	if len(secret) < 16 {
		return nil, fmt.Errorf("the secret is %d bytes; use at least 16", len(secret))
	}
	return secret, nil
}
