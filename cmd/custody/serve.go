package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

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
			dirFlag(),
			locFlag(locStore, ""),
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "the address to listen on"},
			&cli.IntFlag{Name: "max-inflight", Value: 1024, Usage: "appends decided at once; more are answered 503 at once"},
			&cli.StringFlag{Name: "tls-cert", Usage: "a PEM certificate file: serve HTTPS", TakesFile: true},
			&cli.StringFlag{Name: "tls-key", Usage: "the certificate's PEM private key file", TakesFile: true},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json (structured logs on standard error)"},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "how long shutdown waits for appends in flight"},
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
			l, err := openLedger(c)
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
