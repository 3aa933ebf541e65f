// Package gatecmd is the gate command, the MCP proxy that puts every tool
// call under a grant (package gate does the gating).
package gatecmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/gate"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/internal/location"
)

const gateExample = `{
  "tools": {
    "write_file": {"capability": "fs.write", "target": "fs/{path}",
                   "paths": {"path": "realpath"}, "inert": ["content"],
                   "reserve": {"writes": 1}},
    "move_file": {"capability": "fs.write",
                  "targets": ["fs/{source}", "fs/{destination}"],
                  "paths": {"source": "realpath", "destination": "realpath"}},
    "read_text_file": {"capability": "fs.read", "target": "fs/{path}",
                       "paths": {"path": "realpath"}, "inert": ["head", "tail"]}
  },
  "resources": [{"uri": "file:///{path}", "capability": "fs.read",
                 "target": "fs/{path}"}],
  "passthrough": ["list_allowed_directories"]
}`

// GateCommand is `custody gate`.
func GateCommand() *cli.Command {
	return &cli.Command{
		Name:  "gate",
		Usage: "an MCP proxy that puts every tool call under a grant",
		UsageText: `custody gate --ledger URL --log-key VKEY --key AGENT_KEY --grant GRANT_ID --config FILE -- UPSTREAM_COMMAND [ARGS...]
custody gate ... --upstream-url http://127.0.0.1:3001/mcp [--http 127.0.0.1:8931]`,
		Description: `The agent connects to the gate instead of to its MCP servers. The gate
serves MCP on its standard input and output (or, with --http, streamable HTTP
on a loopback address), spawns the upstream server given after -- (and/or
connects to each --upstream-url), and forwards everything MCP has: tools,
resources, prompts, completions, log messages, progress, cancellation and
list_changed notifications.

Each tools/call of a mapped tool becomes a step under the grant --grant,
signed with the agent's key (--key, the grantee of that grant):
  1. the gate writes a pending RECEIPT (capability, target and step from
     --config, its reserve) and forwards the call only once the ledger has
     durably accepted it and the workflow's event stream is connected;
  2. afterwards it writes the outcome RECEIPT (success or failure, consumed,
     a short side_effects summary, the SHA-256 of the result).
A denied call is answered with a tool error whose text starts with the
reason code ("out_of_scope: ...", "limit_exceeded: ...") and the upstream
never sees it. A STOP covering a call in flight cancels it upstream and the
agent gets the STOP's reason; later calls are denied until a RESUME. When the
ledger or the event stream cannot be reached, calls are refused
("ledger_unavailable: ..."), never forwarded.

The configuration (JSON) maps tool names and resource URIs to custody
identifiers:

` + gateExample + `

  capability  the RECEIPT's action (an identifier)
  target      a template: {arg} is the call's argument arg (a string, or an
              integer within ±(2^53-1): a fraction, an exponent or a larger
              number is refused), its leading '/' dropped: fs/{path} with
              path /a/b.txt gives fs/a/b.txt. A value that makes no
              identifier (spaces, "..", an empty segment) refuses the call.
  targets     instead of target, several templates for a tool that acts on
              several things: one pending RECEIPT each, and the call runs
              only when the ledger accepted every one (the first reserves)
  inert       the arguments that designate nothing acted on; every argument
              of the tool's input schema must be in a template or inert, or
              the tool is not offered (a warning names it)
  paths       arg -> "absolute" (a relative path is refused) or "realpath"
              (also resolved through symbolic links by the gate, and
              forwarded resolved; for a spawned upstream only)
  step        a template for the step id (default: the tool name, '/', and
              a counter: write_file/7)
  reserve     limit -> amount reserved by each call; limits in force on the
              grant's chain that it omits are reserved at 0
  pin         "sha256:..." of the tool's definition (custody gate pin): a
              tool whose definition changed is not offered
  resources   [{uri, capability, target}]: reads and subscriptions of a URI
              the template matches are steps; any other URI is refused
  prompts, completions
              true to pass the upstreams' prompts or completions (ungated)
  passthrough tools forwarded ungated, without receipts (logged at start)
  filter_list false to list every upstream tool; by default tools/list
              shows only tools the grant could ever allow

A tool with no mapping that is not in passthrough is refused
("unmapped_tool: ..."). Every refusal is one line on standard error (msg=
refused, code=...), counted in custody_gate_refusals_total (--metrics), and,
when the gate refused it before the ledger decided, a pending RECEIPT with
side_effects.refused_by that the ledger denies (or accepts, followed by its
failure outcome): replay shows it. A JSON-RPC batch on stdio is answered
with error -32600 and the session goes on. When the gate cannot start (a
configuration, key or grant problem, the ledger or an upstream down) it
still answers the host on stdio: each call gets the error and how to fix it.
The gate logs to standard error, which MCP hosts keep in their MCP server
logs.

Exit codes: 0 ok (the agent hung up), 1 error (the grant or an upstream
could not be used), 2 usage (bad flags or configuration), 5 unavailable
(the ledger could not be reached).

Example:

   custody gate --ledger http://127.0.0.1:8080 --log-key log.vkey \
     --key agent.pem --grant confirm_42 --config gate.json \
     -- npx -y @modelcontextprotocol/server-filesystem /srv/work`,
		Flags: []cli.Flag{
			clikit.LocFlag(location.Ledger, "the custody server's `URL` ($CUSTODY_LEDGER)"),
			clikit.LogKeyFlag("the log's checkpoint verifier key (`VKEY`), or a file holding it; every answer is checked against it"),
			&cli.StringFlag{Name: "key", Usage: "the agent's private key `FILE` (PKCS#8 PEM; the grant's grantee)", TakesFile: true, Sources: cli.EnvVars("CUSTODY_KEY")},
			&cli.StringFlag{Name: "grant", Usage: "the `ID` of the CONFIRM or DELEGATE the agent acts under", Sources: cli.EnvVars("CUSTODY_GRANT")},
			&cli.StringFlag{Name: "config", Usage: "the gate's configuration `FILE` (JSON; see above)", TakesFile: true, Sources: cli.EnvVars("CUSTODY_GATE_CONFIG")},
			&cli.StringSliceFlag{Name: "upstream-url", Usage: "an upstream MCP server's streamable HTTP `URL` (repeat for several)"},
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on this loopback `ADDR` (127.0.0.1:8931) instead of stdio"},
			&cli.DurationFlag{Name: "approval-wait", Value: 10 * time.Minute, Usage: "how long a call held for approval waits for its approvers before it is answered approval_timeout"},
			&cli.DurationFlag{Name: "stream-timeout", Value: 5 * time.Second, Usage: "how long a call waits for the workflow's event stream before it is refused"},
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus metrics (refusals by code, hidden tools) at http://`ADDR`/metrics (loopback only)"},
			&cli.BoolFlag{Name: "quiet", Usage: "log only errors to standard error"},
		},
		Commands: []*cli.Command{gatePinCommand()},
		Action:   runGate,
	}
}

func runGate(ctx context.Context, c *cli.Command) error {
	loc, err := clikit.ResolveLocation(c)
	if err != nil {
		return err
	}
	if k, _ := clikit.LogKeyArg(c); k == "" {
		return clikit.Usage(c, "--log-key is required ($%s)", location.LogKeyEnv)
	}
	for _, f := range []string{"key", "grant", "config"} {
		if c.String(f) == "" {
			return clikit.Usage(c, "--%s is required", f)
		}
	}
	ups := gateUpstreams(c)
	if len(ups) == 0 {
		return clikit.Usage(c, "no upstream: give a command after -- or --upstream-url URL")
	}
	addr := c.String("http")
	if addr != "" {
		if err := gate.LoopbackAddr(addr); err != nil {
			return clikit.Usage(c, "--http %s: %v", addr, err)
		}
	}
	if m := c.String("metrics"); m != "" {
		if err := gate.LoopbackAddr(m); err != nil {
			return clikit.Usage(c, "--metrics %s: %v", m, err)
		}
	}
	level := slog.LevelInfo
	if c.Bool("quiet") {
		level = slog.LevelError
	}
	stderr := c.Root().ErrWriter
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "custody gate")

	g, err := startGate(ctx, c, loc.Value, ups, logger, stderr)
	if err != nil {
		if addr != "" {
			return err
		}
		// Started by an MCP host over stdio: a gate that exits shows the
		// host only "connection closed". It serves MCP anyway and answers
		// every call with what is wrong and how to fix it; it exits (with
		// the error's code) when the host hangs up.
		logger.Error("the gate could not start; it answers every call with this error until the host stops it", "err", err)
		gate.ServeUnavailable(ctx, clikit.OneLine(err.Error()), clikit.Version(), c.Root().Reader, c.Root().Writer, logger)
		return err
	}
	defer g.Close()
	logger.Info("gating", "grant", c.String("grant"), "workflow", g.Workflow(), "ledger", loc.Value)
	if m := c.String("metrics"); m != "" {
		stop, err := gate.ServeMetrics(m, g.Metrics(), logger)
		if err != nil {
			return fmt.Errorf("--metrics %s: %w", m, err)
		}
		defer stop()
	}
	if addr == "" {
		return g.ServeStdio(ctx, c.Root().Reader, c.Root().Writer, logger)
	}
	return g.ServeHTTP(ctx, addr, logger)
}

func gateUpstreams(c *cli.Command) []gate.Upstream {
	var ups []gate.Upstream
	if c.NArg() > 0 {
		ups = append(ups, gate.Upstream{Command: c.Args().Slice()})
	}
	for _, u := range c.StringSlice("upstream-url") {
		ups = append(ups, gate.Upstream{URL: u})
	}
	return ups
}

// readGateConfig reads --config; the error says how to fix a relative
// path that the host resolved against a folder the user did not expect.
func readGateConfig(c *cli.Command) (*gate.Config, error) {
	path := c.String("config")
	data, err := os.ReadFile(path)
	if err != nil {
		if !filepath.IsAbs(path) {
			wd, _ := os.Getwd()
			return nil, clikit.Usage(c, "--config %s: %v; the path is relative and the gate runs in %s (an MCP host starts it in a folder of its choosing): give the absolute path", path, err, wd)
		}
		return nil, clikit.Usage(c, "--config: %v", err)
	}
	cfg, err := gate.ParseConfig(data)
	if err != nil {
		return nil, clikit.Usage(c, "--config %s: %v; fix the file (the README's gate section shows its fields)", path, err)
	}
	return cfg, nil
}

// startGate reads the configuration and the keys and starts the gate;
// each error says what is wrong and how to fix it.
func startGate(ctx context.Context, c *cli.Command, ledgerURL string, ups []gate.Upstream, logger *slog.Logger, stderr io.Writer) (*gate.Gate, error) {
	cfg, err := readGateConfig(c)
	if err != nil {
		return nil, err
	}
	vkey, err := clikit.VerifierKeyArg(c, "log-key")
	if err != nil {
		return nil, err
	}
	priv, err := keyfile.ReadPrivate(c.String("key"))
	if err != nil {
		hint := ""
		if !filepath.IsAbs(c.String("key")) {
			hint = " (the path is relative: give the absolute path)"
		}
		return nil, fmt.Errorf("--key: %w%s", err, hint)
	}
	cl, err := client.New(ledgerURL, vkey, nil)
	if err != nil {
		return nil, clikit.Usage(c, "--ledger: %v", err)
	}
	rt := client.NewRuntime(cl, priv, "", nil)
	g, err := gate.New(ctx, gate.Options{Config: cfg, Runtime: rt, Grant: c.String("grant"), Upstreams: ups,
		Logger: logger, Stderr: stderr, StreamTimeout: c.Duration("stream-timeout"), Version: clikit.Version(), ApprovalWait: c.Duration("approval-wait")})
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, gate.Fix(err, ledgerURL))
	}
	return g, nil
}

func gatePinCommand() *cli.Command {
	return &cli.Command{
		Name:      "pin",
		Usage:     "pin the definitions of the tools the gate's configuration maps",
		UsageText: "custody gate pin --config FILE -- UPSTREAM_COMMAND [ARGS...]\ncustody gate pin --config FILE --upstream-url URL",
		Description: `Connects to the upstream servers, reads the definition (name, description,
input schema) of each tool the configuration maps, and writes its SHA-256 into
the tool's "pin" in FILE. Review the tools first: the gate offers a pinned tool
only while its definition is the one pinned, so a server that later changes
what a tool says it does (a "rug pull") loses the tool, and the gate says so on
standard error. It also says which tools the gate would still not offer (an
argument of the input schema neither in a template nor declared inert).

Example:

   custody gate pin --config /srv/agent/gate.json \
     -- npx -y @modelcontextprotocol/server-filesystem /srv/work`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the gate's configuration `FILE`, rewritten with the pins", TakesFile: true, Sources: cli.EnvVars("CUSTODY_GATE_CONFIG")},
			&cli.StringSliceFlag{Name: "upstream-url", Usage: "an upstream MCP server's streamable HTTP `URL` (repeat for several)"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			path := c.String("config")
			if path == "" {
				return clikit.Usage(c, "--config is required")
			}
			ups := gateUpstreams(c)
			if len(ups) == 0 {
				return clikit.Usage(c, "no upstream: give a command after -- or --upstream-url URL")
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return clikit.Usage(c, "--config: %v", err)
			}
			out, results, err := gate.Pin(ctx, data, ups, c.Root().ErrWriter)
			if err != nil {
				return err
			}
			if err := clikit.WriteFileAtomic(path, out); err != nil {
				return err
			}
			w := c.Root().Writer
			for _, r := range results {
				switch {
				case r.Upstream == "":
					fmt.Fprintf(w, "%s: no upstream offers it; pin unchanged\n", r.Tool)
				case r.Old == r.New:
					fmt.Fprintf(w, "%s (%s): pin unchanged %s\n", r.Tool, r.Upstream, r.New)
				case r.Old == "":
					fmt.Fprintf(w, "%s (%s): pinned %s\n", r.Tool, r.Upstream, r.New)
				default:
					fmt.Fprintf(w, "%s (%s): definition changed: pin %s replaced by %s\n", r.Tool, r.Upstream, r.Old, r.New)
				}
				if r.Unfit != "" {
					fmt.Fprintf(w, "  warning: the gate will not offer %s: %s\n", r.Tool, r.Unfit)
				}
			}
			return nil
		},
	}
}
