package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
)

func init() { register(serveCommand) }

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve a ledger over HTTP",
		UsageText: "custody serve --dir D [--addr 127.0.0.1:8080] [--max-inflight N] [--tls-cert FILE --tls-key FILE] [--log-format text|json]",
		Description: `Serves the ledger in D over HTTP until SIGINT or SIGTERM:

   POST /v1/entries                  append one signed envelope; answered only once
                                     the decision is durable under a signed checkpoint
                                     (200 accepted, 403 denied, 400/413 refused,
                                     429 rate limited, 503 overloaded: retry later)
   GET  /v1/entries/{index}          an entry      GET /v1/statements/{id}  by id
   GET  /v1/proof/inclusion?index=&size=   GET /v1/proof/consistency?from=&to=
   GET  /v1/bundle/{id}[?workflow=1] a bundle for custody verify
   GET  /v1/workflows/{id}           a workflow's entries; /events streams new ones
   GET  /v1/keys/{keyid}/seq         a key's binding and next seq
   GET  /checkpoint, /tile/...       the log as C2SP tlog-tiles
   GET  /healthz, /readyz, /metrics  health and Prometheus metrics

The Go heap runs under a soft limit of --memory-limit MiB (384 by default;
0 for none; $GOMEMLIMIT, when set, wins): past it the collector works harder
instead of letting the heap double, which keeps a server on a large log
within a small container. docs/BENCHMARKS.md measures it.

On SIGINT or SIGTERM it stops accepting connections, answers every append in
flight, then closes the ledger. Clients (custody --ledger URL, package
client) check every answer against the log's verifier key.

Example:

   custody serve --dir ./custody-data --addr 127.0.0.1:8080
   curl -s http://127.0.0.1:8080/checkpoint`,
		Flags: []cli.Flag{
			dirFlag(), storeFlag(),
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "the address to listen on"},
			&cli.IntFlag{Name: "max-inflight", Value: 1024, Usage: "appends decided at once; more are answered 503 at once"},
			&cli.StringFlag{Name: "tls-cert", Usage: "a PEM certificate file: serve HTTPS", TakesFile: true},
			&cli.StringFlag{Name: "tls-key", Usage: "the certificate's PEM private key file", TakesFile: true},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json (structured logs on standard error)"},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "how long shutdown waits for appends in flight"},
			&cli.StringFlag{Name: "reserve", Value: "256MiB", Sources: cli.EnvVars("CUSTODY_RESERVE"),
				Usage: "free space kept on the data folder's disk: appends answer 503 below it"},
			&cli.StringFlag{Name: "ballast", Value: "64MiB", Sources: cli.EnvVars("CUSTODY_BALLAST"),
				Usage: "a file of this size kept in the data folder and given back when another program fills the disk, so the database can finish its writes (0: none)"},
			&cli.IntFlag{Name: "memory-limit", Value: server.DefaultMemoryLimit >> 20, Usage: "the Go heap's soft limit in MiB (0: none; $GOMEMLIMIT wins)"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			if (c.String("tls-cert") == "") != (c.String("tls-key") == "") {
				return usage(c, "give both --tls-cert and --tls-key, or neither")
			}
			if n := c.Int("max-inflight"); n < 1 || n > 1<<20 {
				return usage(c, "--max-inflight %d: want 1..1048576", n)
			}
			if n := c.Int("memory-limit"); n < 0 || n > 1<<30 {
				return usage(c, "--memory-limit %d: want 0 (none) or a size in MiB", n)
			} else if n > 0 && os.Getenv("GOMEMLIMIT") == "" {
				debug.SetMemoryLimit(int64(n) << 20)
			}
			var h slog.Handler
			switch c.String("log-format") {
			case "text":
				h = slog.NewTextHandler(c.Root().ErrWriter, nil)
			case "json":
				h = slog.NewJSONHandler(c.Root().ErrWriter, nil)
			default:
				return usage(c, "--log-format %q: use text or json", c.String("log-format"))
			}
			log := slog.New(h)
			reserve, err := parseSize(c.String("reserve"))
			if err != nil || reserve == 0 || reserve > 1<<50 {
				return usage(c, "--reserve %q: want a size like 256MiB", c.String("reserve"))
			}
			ballast, err := parseSize(c.String("ballast"))
			if err != nil || ballast > 1<<40 {
				return usage(c, "--ballast %q: want a size like 64MiB, or 0", c.String("ballast"))
			}
			opts := ledger.Options{ReserveBytes: int64(reserve), BallastBytes: int64(ballast)}
			if ballast == 0 {
				opts.BallastBytes = -1
			}
			l, err := openLedgerWith(c, opts)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				l.Close()
				return fmt.Errorf("serve: %w", err)
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv := server.New(l, server.Options{MaxInFlight: int(c.Int("max-inflight")), Logger: log})
			err = srv.Serve(ctx, ln, server.ServeOptions{TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
				ShutdownTimeout: c.Duration("shutdown-timeout")})
			if cerr := l.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing the ledger: %w", cerr)
			}
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			log.Info("ledger closed")
			return nil
		},
	}
}

// parseSize reads a size: a number of bytes with an optional unit (KiB,
// MiB, GiB, TiB; K, M, G, T and KB, MB, GB, TB count 1024s too).
func parseSize(s string) (uint64, error) {
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
