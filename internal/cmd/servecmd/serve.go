// Package servecmd is the serve command: its flags, its help and how they
// become an internal/serving configuration.
package servecmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/console"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/serving"
	"github.com/custodylog/custody/internal/verifycli"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/publish"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/badgerstore"
	"github.com/custodylog/custody/witness/cosign"
)

// ServeCommand is `custody serve`.
func ServeCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve a ledger over HTTP",
		UsageText: "custody serve --dir D [--addr 127.0.0.1:8080] [--max-inflight N] [--tls-cert FILE --tls-key FILE] [--log-format text|json]\n" +
			"              [--witness-policy FILE [--witness-finality] [--witness-timeout 10s] [--witness-interval 1s]]\n" +
			"              [--publish s3://BUCKET/PREFIX] [--approval-webhook URL --approval-webhook-secret-file FILE]\n" +
			"              [--console [--console-origin ORIGIN] [--console-behind-proxy] [--console-rp-id HOST] [--console-session 8h]]\n" +
			"   custody serve --store postgres://... --log A --log B [--prefer A] | --all-logs [...]",
		Description: `Serves the ledger in D over HTTP until SIGINT or SIGTERM:

   POST /v1/entries                  append one signed envelope; answered only once
                                     the decision is durable under a signed checkpoint
                                     (200 accepted, 403 denied, 400/413 refused,
                                     429 rate limited, 503 overloaded: retry later)
   POST /v1/entries/batch            {"envelopes":[...]}: up to 256, decided in that
                                     order; each answer is what /v1/entries would say
   GET  /v1/log                      origin, size, verifier key and parameters
   GET  /v1/entries/{index}          an entry
   GET  /v1/statements/{id}          the entry of a statement id
   GET  /v1/proof/inclusion?index=&size=   an inclusion proof
   GET  /v1/proof/consistency?from=&to=    a consistency proof
   GET  /v1/roots/{size}             the tree's root at a size
   GET  /v1/bundle/{id}[?workflow=1] a bundle for custody verify (or /v1/bundle?index=N)
   GET  /v1/workflows                the workflows, newest first (?before=&limit=, at most 100)
   GET  /v1/workflows/{id}           a workflow's entries
   GET  /v1/workflows/{id}/replay    replay's report of a workflow, with its bundle
   GET  /v1/workflows/{id}/events    new entries of a workflow, streamed
   GET  /v1/keys/{keyid}/seq         a key's binding and next seq
   GET  /v1/approvals                receipts held for approval now (?approver=NAME, ?workflow=ID;
                                     ?wait=MS with If-None-Match: once the list changes)
   GET  /v1/approvals/{id}           a held receipt's state (?wait=MS: answer once it is decided)
   GET  /checkpoint, /tile/{path...} the log as C2SP tlog-tiles
   GET  /v1/checkpoint/witnessed     the newest checkpoint the witness quorum cosigned
   GET  /healthz, /readyz, /metrics  health and Prometheus metrics
   GET  /console/                    the console, with --console (a web page over this API);
                                     /console/enroll registers a passkey, Sign in opens a
                                     session (/console/session), docs/DEPLOY.md

Each append decision is logged at info (verdict, reason code, index,
latency); /metrics counts appends by verdict, denials and refusals by
reason code, and custody_build_info names the build.

An event stream whose client does not take a write within 10 s, or falls
1,024 events behind, is cut (custody_event_streams_cut_total), with a last
"event: resume" when it can still be told; a client reconnects with
Last-Event-ID and misses nothing.

The Go heap runs under a soft limit of --memory-limit MiB (384 by default;
0 for none; $GOMEMLIMIT, when set, wins): past it the collector works harder
instead of letting the heap double, which keeps a server on a large log
within a small container. docs/BENCHMARKS.md measures it.

Witnesses (--witness-policy FILE): the policy names witnesses (witness NAME
VKEY URL), groups (group NAME N|any|all MEMBER...) and a quorum (quorum
NAME), in the grammar Tessera reads (docs/FORMATS.md). Each new checkpoint
goes at once to every witness the quorum counts (C2SP tlog-witness POST
URL/add-checkpoint, with a consistency proof from the size the witness
holds); their cosignatures are added to the checkpoint GET /checkpoint
serves, never changing its body. GET /v1/checkpoint/witnessed serves the
newest one that meets the quorum, and bundles are made under it. A
witness gets at most one checkpoint per --witness-interval (the public
witness network asks for about one a second; 0 for a private set).
Witness answers other than a cosignature are logged and counted in
/metrics (custody_witness_requests_total); a fork or split view is logged
at ERROR.

With --witness-finality, a pending RECEIPT is answered only under a
checkpoint that meets the quorum, carrying its cosignatures; if none does
within --witness-timeout the answer is 503 unwitnessed: the entry is
logged, the runtime must not act, and the same submission sent again is
answered once witnessed. Other statements are answered when durable.

Publication (--publish s3://BUCKET/PREFIX): behind the sequencer, never on
the append path, the server that sequences the log copies each new tile,
entry bundle and then the checkpoint to an S3-compatible bucket, as the
tlog-tiles paths under PREFIX (PREFIX/checkpoint, PREFIX/tile/...), so that
readers and a CDN never touch the log's servers. Tiles are written once
(If-None-Match: *); an object already there with other bytes is an alarm,
logged at ERROR and never overwritten. It resumes from the bucket's
checkpoint after a restart or a change of leader. Credentials, region and
endpoint come the AWS SDK's standard way: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE and ~/.aws; for an
S3-compatible store, AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL), addressed
path-style. /metrics shows custody_publish_lag_entries and
custody_publish_lag_seconds. docs/DEPLOY.md sets up a CDN in front.

Several logs (--store with --log A --log B ..., or --all-logs): one
process serves several logs of one PostgreSQL database (custody logs lists
them), each with its own ledger and sequencer lease. Log NAME is served
under /logs/NAME/ with every path above (/logs/NAME/v1/entries,
/logs/NAME/checkpoint, /logs/NAME/tile/..., /logs/NAME/readyz), so a client
given http://HOST/logs/NAME works as with a server of that log alone; the
default log, if served (--log default), keeps the paths above at /. At the
root, /metrics has every log's metrics labelled log="NAME", and /readyz
(without the default log) one line per log: its role, epoch and leader.
Each log's leader advertises ADVERTISE/logs/NAME. Leaderships spread over
the servers: a server takes the free lease of a log it was told to
--prefer at once, and any other free lease only once it has stayed free
for one --lease-ttl for every log this server already sequences (none:
at once); a leader of a log it does not prefer hands it over to a live
server that prefers it. With --publish, log NAME is published under PREFIX/logs/NAME/
(the default log under PREFIX/), the same paths as on the server.
--all-logs serves the logs the database holds when the server starts.

On SIGINT or SIGTERM it stops accepting connections, answers every append in
flight, then closes the ledger. Clients (custody --ledger URL, package
client) check every answer against the log's verifier key.

Example:

   custody serve --dir ./custody-data --addr 127.0.0.1:8080
   curl -s http://127.0.0.1:8080/checkpoint
   custody serve --dir ./custody-data --witness-policy witnesses.policy --witness-finality`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
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
			&cli.StringFlag{Name: "memtable", Hidden: true,
				Usage: "internal: the size of the database's memtables (default 12MiB); the disk tests make it small so that the database writes table files often"},
			&cli.StringFlag{Name: "advertise", Usage: "with --store: the URL other servers send appends to while this one sequences the log (default: http(s)://ADDR)"},
			&cli.DurationFlag{Name: "lease-ttl", Value: 3 * time.Second, Usage: "with --store: how long the sequencer lease lasts unrenewed; a dead leader is replaced within about this time"},
			&cli.IntFlag{Name: "memory-limit", Value: server.DefaultMemoryLimit >> 20, Usage: "the Go heap's soft limit in MiB (0: none; $GOMEMLIMIT wins)"},
			&cli.StringFlag{Name: "approval-webhook", Usage: "POST each newly held receipt (the exact step, its rules, who may approve, expires_at) as JSON to this `URL`, signed X-Custody-Signature: sha256=<HMAC>",
				Sources: cli.EnvVars("CUSTODY_APPROVAL_WEBHOOK")},
			&cli.StringFlag{Name: "approval-webhook-secret-file", Usage: "the `FILE` holding the webhook's HMAC secret (required with --approval-webhook)", TakesFile: true,
				Sources: cli.EnvVars("CUSTODY_APPROVAL_WEBHOOK_SECRET_FILE")},
			&cli.BoolFlag{Name: "console", Usage: "serve the console, a web page for approvers and responders, at /console/ (and /logs/NAME/console/)"},
			&cli.StringFlag{Name: "console-origin", Usage: "with --console: the console's web `ORIGIN` (https://HOST[:PORT], or http://localhost:PORT); passkeys that sign there list it in their origins (default: http://localhost:PORT of a loopback --addr)"},
			&cli.BoolFlag{Name: "console-behind-proxy", Usage: "with --console: a proxy in front terminates TLS for the https --console-origin (docs/DEPLOY.md)"},
			&cli.StringFlag{Name: "console-rp-id", Usage: "with --console: the passkeys' relying party `ID`, the origin's host or a name above it (default: the origin's host)"},
			&cli.DurationFlag{Name: "console-session", Value: console.DefaultSession, Usage: "with --console: how long a passkey sign-in on the console lasts"},
			&cli.StringFlag{Name: "witness-policy", Usage: "a witness policy `FILE`: send checkpoints to its witnesses and gather their cosignatures", TakesFile: true,
				Sources: cli.EnvVars("CUSTODY_WITNESS_POLICY")},
			&cli.BoolFlag{Name: "witness-finality", Usage: "answer a pending RECEIPT only under a checkpoint the witness quorum cosigned",
				Sources: cli.EnvVars("CUSTODY_WITNESS_FINALITY")},
			&cli.DurationFlag{Name: "witness-timeout", Value: 10 * time.Second, Usage: "with --witness-finality: how long a pending RECEIPT waits for the quorum before 503",
				Sources: cli.EnvVars("CUSTODY_WITNESS_TIMEOUT")},
			&cli.StringFlag{Name: "publish", Usage: "publish the log's tiles to this `s3://BUCKET/PREFIX` (leader only, behind the sequencer)",
				Sources: cli.EnvVars("CUSTODY_PUBLISH")},
			&cli.StringSliceFlag{Name: "log", Usage: "with --store: serve the log `NAME` of the database, under /logs/NAME/ (repeat for several; default: the default log, at /; $CUSTODY_LOG)"},
			&cli.BoolFlag{Name: "all-logs", Usage: "with --store: serve every log the database holds (custody logs), each under /logs/NAME/"},
			&cli.StringSliceFlag{Name: "prefer", Usage: "with several logs: sequence log `NAME` whenever this server is up: take its free lease at once, and be handed it by a leader that does not prefer it (repeat for several)"},
			&cli.DurationFlag{Name: "witness-interval", Value: time.Second, Usage: "the least time between two checkpoints sent to one witness (0: none)",
				Sources: cli.EnvVars("CUSTODY_WITNESS_INTERVAL")},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			if (c.String("tls-cert") == "") != (c.String("tls-key") == "") {
				return clikit.Usage(c, "give both --tls-cert and --tls-key, or neither")
			}
			if n := c.Int("max-inflight"); n < 1 || n > 1<<20 {
				return clikit.Usage(c, "--max-inflight %d: want 1..1048576", n)
			}
			if n := c.Int("memory-limit"); n < 0 || n > 1<<30 {
				return clikit.Usage(c, "--memory-limit %d: want 0 (none) or a size in MiB", n)
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
				return clikit.Usage(c, "--log-format %q: use text or json", c.String("log-format"))
			}
			log := slog.New(h)
			reserve, err := serving.ParseSize(c.String("reserve"))
			if err != nil || reserve == 0 || reserve > 1<<50 {
				return clikit.Usage(c, "--reserve %q: want a size like 256MiB", c.String("reserve"))
			}
			ballast, err := serving.ParseSize(c.String("ballast"))
			if err != nil || ballast > 1<<40 {
				return clikit.Usage(c, "--ballast %q: want a size like 64MiB, or 0", c.String("ballast"))
			}
			// The data folder's own options (the Badger driver's); a
			// database takes none of these.
			folderOpts := badgerstore.Options{ReserveBytes: int64(reserve), BallastBytes: int64(ballast)}
			if ballast == 0 {
				folderOpts.BallastBytes = -1
			}
			if m := c.String("memtable"); m != "" {
				n, err := serving.ParseSize(m)
				if err != nil || n > 1<<30 {
					return clikit.Usage(c, "--memtable %q: want a size like 1MiB", m)
				}
				folderOpts.MemTableBytes = int64(n)
			}
			lopts := ledger.Options{Logger: log}
			if d := c.Duration("lease-ttl"); d < 300*time.Millisecond || d > time.Hour {
				return clikit.Usage(c, "--lease-ttl %s: want 300ms..1h", d)
			}
			loc, err := clikit.ResolveLocation(c)
			if err != nil {
				return err
			}
			if !storage.IsURL(loc.Value) {
				lopts.StoreOptions = folderOpts
			}
			sel := serving.Selection{Typed: c.StringSlice("log"), All: c.Bool("all-logs"), Prefer: c.StringSlice("prefer"),
				Witnessed: c.String("witness-policy") != "", Getenv: os.Getenv}
			names, prefer, err := sel.Names(ctx, loc)
			var ue *serving.UsageError
			if errors.As(err, &ue) {
				return clikit.Usage(c, "%v", ue)
			}
			if err != nil {
				return err
			}
			opts := server.Options{MaxInFlight: int(c.Int("max-inflight")), Logger: log}
			if err := witnessOptions(c, &opts); err != nil {
				return err
			}
			if err := webhookOptions(c, &opts); err != nil {
				return err
			}
			if err := consoleOptions(c, &opts); err != nil {
				return err
			}
			if u := c.String("publish"); u != "" && !publish.IsURL(u) {
				return clikit.Usage(c, "--publish %q: want s3://BUCKET/PREFIX", u)
			}
			var bucket *publish.Bucket
			if u := c.String("publish"); u != "" && names == nil {
				var err error
				if bucket, err = publish.Open(ctx, u); err != nil {
					return fmt.Errorf("--publish: %w", err)
				}
			}
			ln, err := net.Listen("tcp", c.String("addr"))
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			advertise := c.String("advertise")
			if advertise == "" {
				scheme := "http"
				if c.String("tls-cert") != "" {
					scheme = "https"
				}
				advertise = scheme + "://" + ln.Addr().String()
			}
			lopts.Advertise, lopts.LeaseTTL = advertise, c.Duration("lease-ttl")
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg := serving.Config{Listener: ln, Logger: log, Ledger: lopts, Server: opts,
				Serve: server.ServeOptions{TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"), ShutdownTimeout: c.Duration("shutdown-timeout")},
				Open: func(url, name string, o ledger.Options) (*ledger.Ledger, error) {
					if name == "" {
						name = loc.Log
					}
					return clikit.OpenLedgerAtWith(c, location.Location{Kind: loc.Kind, Value: url, From: loc.From, Log: name}, o)
				}}
			if names != nil {
				cfg.Ledger.HeadFile = os.Getenv("CUSTODY_HEAD_FILE")
				return serving.Logs(ctx, cfg, loc.Value, names, prefer, c.String("publish"))
			}
			return serving.One(ctx, cfg, loc.Value, bucket)
		},
	}
}

// witnessOptions reads the --witness-* flags into opts.
func witnessOptions(c *cli.Command, opts *server.Options) error {
	file := c.String("witness-policy")
	if file == "" {
		for _, f := range []string{"witness-finality", "witness-timeout", "witness-interval"} {
			if c.IsSet(f) {
				return clikit.Usage(c, "--%s needs --witness-policy FILE", f)
			}
		}
		return nil
	}
	p, err := verifycli.ReadPolicy(file)
	if err != nil {
		return fmt.Errorf("--witness-policy: %w", err)
	}
	if err := serving.CheckWitnessPolicy(p); errors.Is(err, serving.ErrQuorumNone) {
		return clikit.Usage(c, "--witness-policy %s: %v", file, err)
	} else if err != nil {
		return fmt.Errorf("--witness-policy %s: %w", file, err)
	}
	if d := c.Duration("witness-timeout"); d <= 0 || d > 10*time.Minute {
		return clikit.Usage(c, "--witness-timeout %s: want more than 0 and at most 10m", d)
	}
	if d := c.Duration("witness-interval"); d < 0 || d > time.Hour {
		return clikit.Usage(c, "--witness-interval %s: want 0 to 1h", d)
	}
	opts.WitnessPolicy = p
	opts.WitnessFinality = c.Bool("witness-finality")
	opts.WitnessTimeout = c.Duration("witness-timeout")
	opts.Witness = cosign.Options{Interval: c.Duration("witness-interval"), Timeout: min(5*time.Second, c.Duration("witness-timeout"))}
	return nil
}

// webhookOptions reads --approval-webhook and its secret file.
func webhookOptions(c *cli.Command, opts *server.Options) error {
	u, file := c.String("approval-webhook"), c.String("approval-webhook-secret-file")
	if u == "" {
		if file != "" {
			return clikit.Usage(c, "--approval-webhook-secret-file needs --approval-webhook URL")
		}
		return nil
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
		return clikit.Usage(c, "--approval-webhook %q: want an http(s) URL", u)
	}
	if file == "" {
		return clikit.Usage(c, "--approval-webhook needs --approval-webhook-secret-file FILE (the HMAC secret)")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--approval-webhook-secret-file: %w", err)
	}
	secret, err := serving.WebhookSecret(b)
	if err != nil {
		return fmt.Errorf("--approval-webhook-secret-file %s: %w", file, err)
	}
	opts.ApprovalWebhook, opts.ApprovalWebhookSecret = u, secret
	return nil
}

// consoleOptions reads --console, --console-origin and
// --console-behind-proxy into opts.
func consoleOptions(c *cli.Command, opts *server.Options) error {
	if !c.Bool("console") {
		if c.String("console-origin") != "" || c.Bool("console-behind-proxy") || c.IsSet("console-rp-id") || c.IsSet("console-session") {
			return clikit.Usage(c, "--console-origin, --console-behind-proxy, --console-rp-id and --console-session need --console")
		}
		return nil
	}
	if d := c.Duration("console-session"); d < time.Minute || d > 30*24*time.Hour {
		return clikit.Usage(c, "--console-session %s: want 1m..720h", d)
	}
	origin := c.String("console-origin")
	if origin == "" {
		host, port, err := net.SplitHostPort(c.String("addr"))
		ip := net.ParseIP(host)
		if err != nil || port == "0" || !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
			return clikit.Usage(c, "--console: give --console-origin (the console's web origin, e.g. https://custody.example.com) for --addr %s", c.String("addr"))
		}
		origin = "http://localhost:" + port
		if c.String("tls-cert") != "" {
			origin = "https://localhost:" + port
		}
	}
	o, err := console.CheckOrigin(origin, c.String("tls-cert") != "", c.Bool("console-behind-proxy"))
	if err != nil {
		return clikit.Usage(c, "--console-origin: %v", err)
	}
	if rp := c.String("console-rp-id"); rp != "" {
		if err := sign.CheckOrigins(rp, []string{o}); err != nil {
			return clikit.Usage(c, "--console-rp-id %s with --console-origin %s: %v", rp, o, err)
		}
	}
	opts.Console, opts.ConsoleOrigin = true, o
	opts.ConsoleRPID, opts.ConsoleSession = c.String("console-rp-id"), c.Duration("console-session")
	return nil
}
