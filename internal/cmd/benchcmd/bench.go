// Package benchcmd is the bench command and its subcommands (log, serve,
// witness): measure the ledger on this machine and print one table.
package benchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/bench"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/ledger"
)

// benchSubcommands are commands under `custody bench` that other files add
// with registerBench (such as `custody bench serve`), so that `bench` is
// one command however many files contribute to it.
var benchSubcommands []func() *cli.Command

// registerBench adds a subcommand to `custody bench`.
func registerBench(f func() *cli.Command) { benchSubcommands = append(benchSubcommands, f) }

// BenchCommand is `custody bench`.
func BenchCommand() *cli.Command {
	def := bench.DefaultConfig()
	cmd := &cli.Command{
		Name:  "bench",
		Usage: "measure the ledger on this machine and print one table",
		UsageText: "custody bench [--size N] [--peer tessera] [--json] [--cpuprofile FILE] [--phases LIST] ...\n" +
			"custody bench SUBCOMMAND ...",
		Description: `Runs, on fresh ledgers in a temporary folder, in one process:

  ceiling  parallel Ed25519 verifies/s of a receipt on all cores
  auth     authorised durable appends in process: receipts under 16 depth-3
           chains, 1 in 20 from a rogue agent and denied; and their ratio to
           the ceiling
  http     the same over HTTP: a custody server on a loopback port, and
           --http-clients clients (one chain each), one request in flight
           each; p50 and p99 latency
  logonly  durable appends of 400-byte raw leaves (Options.LogOnly,
           AppendLeaves) from --clients clients: the figure to compare with
           other logs
  big      a --size entry log (raw leaves, with a real depth-3 workflow at
           both ends), then in a child process: open time, inclusion
           proofs/s, bundle builds/s, bundles verified/s offline, peak RSS;
           and disk bytes per entry
  peer     with --peer tessera: the same 400-byte entries from as many
           clients through Tessera's POSIX driver (bench/peers/tessera, a
           separate Go module built with the go command)

Every append counts only once it is durable (fsynced) and covered by a
signed checkpoint. The defaults finish in a few minutes on 2 cores; the
figures mean something only on a quiet machine. docs/BENCHMARKS.md explains
each figure and how to reproduce it.

Example:

   custody bench
   custody bench --peer tessera --json > bench.json
   custody bench --size 10000000 --phases big      # 1M, then 10M, and how proofs grow
   custody bench --phases auth --cpuprofile auth.prof
   custody bench --phases auth,http --store postgres://custody@127.0.0.1:54329/custody`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "size", Local: true, Value: def.Size, Usage: "entries in the big log (proofs, bundles, open, RSS, disk)"},
			&cli.IntFlag{Name: "growth-from", Local: true, Value: def.GrowthFrom, Usage: "with --size above it, also measure a log of this many entries first and print how proofs and bundles grow between the two (0: don't)"},
			&cli.IntFlag{Name: "growth-rounds", Local: true, Value: 1, Usage: "measure the growth this many times on the same two logs (each time both in turn), for rounds without building them again"},
			&cli.IntFlag{Name: "appends", Local: true, Value: def.AuthN, Usage: "authorised submissions"},
			&cli.IntFlag{Name: "window", Local: true, Value: def.AuthWindow, Usage: "submissions each of the 32 agents keeps in flight"},
			&cli.IntFlag{Name: "http-appends", Local: true, Value: def.HTTPN, Usage: "authorised submissions over HTTP"},
			&cli.IntFlag{Name: "http-clients", Local: true, Value: def.HTTPClients, Usage: "HTTP clients (and depth-3 chains), each with one request in flight"},
			&cli.IntFlag{Name: "leaves", Local: true, Value: def.LogOnlyN, Usage: "log-only entries (and the peer's)"},
			&cli.IntFlag{Name: "clients", Local: true, Value: def.Inflight, Usage: "log-only (and peer) clients, each with one append in flight"},
			&cli.DurationFlag{Name: "ceiling", Local: true, Value: def.Ceiling, Usage: "how long to measure the verify ceiling"},
			&cli.DurationFlag{Name: "read-for", Local: true, Value: def.ReadFor, Usage: "how long to measure each of proofs, bundles and verification"},
			&cli.StringFlag{Name: "phases", Local: true, Usage: "comma-separated phases to run (" + strings.Join(bench.AllPhases, ",") + "; default all but peer, and peer with --peer)"},
			&cli.StringFlag{Name: "peer", Local: true, Usage: "a log to run beside custody: tessera"},
			&cli.StringFlag{Name: "store", Local: true, Usage: "also measure on this PostgreSQL database (`postgres://...`): the auth (and proofs), http and logonly phases among --phases, beside Badger's, each log in a new schema dropped after, with the server's CPU and WAL flushes per append"},
			&cli.StringFlag{Name: "peer-dir", Local: true, Usage: "the Tessera peer's module folder (default: " + bench.PeerDir + " found from the working directory)"},
			&cli.StringFlag{Name: "tmpdir", Local: true, Usage: "where to make the run's temporary folder (default: the system's); put it on the disk to measure"},
			&cli.BoolFlag{Name: "keep", Local: true, Usage: "keep the run's temporary folder"},
			&cli.BoolFlag{Name: "in-process", Local: true, Usage: "measure the big log in this process, not a child (RSS then includes building it)"},
			&cli.IntFlag{Name: "proof-cache-tiles", Local: true, Usage: "ledger Options.ProofCacheTiles for the big log's measurement (default: the ledger's)"},
			&cli.StringFlag{Name: "cpuprofile", Local: true, Usage: "write a CPU profile of the run to FILE (and of the big log's child to FILE.big)"},
			&cli.StringFlag{Name: "memprofile", Local: true, Usage: "write a heap profile at the end of the run to FILE (and of the big log's child to FILE.big)"},
			&cli.BoolFlag{Name: "json", Local: true, Usage: "print one JSON document instead of text"},
			&cli.StringFlag{Name: "measure-big", Local: true, Hidden: true, Usage: "internal: measure the big log in DIR and print JSON"},
			&cli.StringFlag{Name: "pair-with", Local: true, Hidden: true, Usage: "internal: with --measure-big, measure proofs and bundles on the smaller log in DIR and that one in turn, and print both as JSON"},
		},
		Action: runBench,
	}
	for _, f := range benchSubcommands {
		cmd.Commands = append(cmd.Commands, f())
	}
	return cmd
}

func runBench(ctx context.Context, c *cli.Command) error {
	if _, err := clikit.Args(c, 0, 0, ""); err != nil {
		return err
	}
	return benchWith(ctx, c)
}

// benchWith runs the suite with c's flags (c is the bench command).
func benchWith(ctx context.Context, c *cli.Command) error {
	if p := c.String("cpuprofile"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if p := c.String("memprofile"); p != "" {
		defer func() {
			if f, err := os.Create(p); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if dir, small := c.String("measure-big"), c.String("pair-with"); dir != "" && small != "" {
		r, err := bench.MeasurePair(ctx, small, dir, [2]*bench.BuildResult{}, c.Duration("read-for"), ledger.Options{ProofCacheTiles: c.Int("proof-cache-tiles")})
		if err != nil {
			return err
		}
		return json.NewEncoder(c.Root().Writer).Encode(r)
	}
	if dir := c.String("measure-big"); dir != "" {
		r, err := bench.MeasureBigLog(ctx, dir, c.Duration("read-for"), ledger.Options{ProofCacheTiles: c.Int("proof-cache-tiles")})
		if err != nil {
			return err
		}
		return json.NewEncoder(c.Root().Writer).Encode(r)
	}
	cfg := bench.Config{Dir: c.String("tmpdir"), Keep: c.Bool("keep"), Ceiling: c.Duration("ceiling"),
		AuthN: c.Int("appends"), AuthWindow: c.Int("window"), LogOnlyN: c.Int("leaves"), Inflight: c.Int("clients"),
		HTTPN: c.Int("http-appends"), HTTPClients: c.Int("http-clients"),
		Size: c.Int("size"), GrowthFrom: growthFrom(c.Int("growth-from")), GrowthRounds: c.Int("growth-rounds"), ReadFor: c.Duration("read-for"), Peer: c.String("peer"), PeerDir: c.String("peer-dir"),
		ProofCacheTiles: c.Int("proof-cache-tiles"), Progress: c.Root().ErrWriter, Store: c.String("store")}
	if cfg.Store != "" && !ledger.IsStoreURL(cfg.Store) {
		return clikit.Usage(c, "--store %q: want a postgres:// URL", cfg.Store)
	}
	for _, n := range []string{"size", "appends", "window", "http-appends", "http-clients", "leaves", "clients", "growth-rounds"} {
		if c.Int(n) <= 0 {
			return clikit.Usage(c, "--%s must be positive", n)
		}
	}
	if cfg.Peer != "" && cfg.Peer != "tessera" {
		return clikit.Usage(c, "--peer %q: the one peer is tessera", cfg.Peer)
	}
	if p := c.String("phases"); p != "" {
		for _, ph := range strings.Split(p, ",") {
			ph = strings.TrimSpace(ph)
			if !slices.Contains(bench.AllPhases, ph) {
				return clikit.Usage(c, "--phases: unknown phase %q (phases: %s)", ph, strings.Join(bench.AllPhases, ","))
			}
			cfg.Phases = append(cfg.Phases, ph)
		}
		if slices.Contains(cfg.Phases, bench.PhasePeer) && cfg.Peer == "" {
			cfg.Peer = "tessera"
		}
	}
	if !c.Bool("in-process") {
		cfg.MeasureBig = childMeasure(c.String("cpuprofile"), c.String("memprofile"), c.Int("proof-cache-tiles"))
		cfg.MeasurePair = childPair(c.Int("proof-cache-tiles"))
	}
	r, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return clikit.WriteJSON(c.Root().Writer, r)
	}
	fmt.Fprintln(c.Root().Writer)
	r.WriteTable(c.Root().Writer)
	if cfg.Keep {
		fmt.Fprintf(c.Root().Writer, "\nkept %s\n", r.Params.Dir)
	}
	return nil
}

// growthFrom maps the --growth-from flag to bench.Config.GrowthFrom: 0 or
// less, none.
func growthFrom(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// childMeasure measures the big log in a child process running this same
// binary, so that its peak RSS is the open log's alone, not building it.
func childMeasure(cpuprofile, memprofile string, cacheTiles int) func(context.Context, string, time.Duration) (bench.BigResult, error) {
	return bench.InChild(func(dir string, d time.Duration) []string {
		argv := []string{"bench", "--measure-big", dir, "--read-for", d.String()}
		if cpuprofile != "" {
			argv = append(argv, "--cpuprofile", cpuprofile+".big")
		}
		if memprofile != "" {
			argv = append(argv, "--memprofile", memprofile+".big")
		}
		if cacheTiles > 0 {
			argv = append(argv, "--proof-cache-tiles", strconv.Itoa(cacheTiles))
		}
		return argv
	})
}

// childPair measures two big logs in turn (the growth figures) in a child
// process running this same binary, as childMeasure does one.
func childPair(cacheTiles int) func(context.Context, string, string, time.Duration) ([2]bench.BigResult, error) {
	return func(ctx context.Context, small, large string, d time.Duration) ([2]bench.BigResult, error) {
		argv := []string{"bench", "--measure-big", large, "--pair-with", small, "--read-for", d.String()}
		if cacheTiles > 0 {
			argv = append(argv, "--proof-cache-tiles", strconv.Itoa(cacheTiles))
		}
		return bench.RunChild[[2]bench.BigResult](ctx, argv)
	}
}
