package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/gate"
)

func init() { register(gateCommand) }

const gateExample = `{
  "tools": {
    "write_file": {"capability": "fs.write", "target": "fs/{path}",
                   "reserve": {"writes": 1}},
    "read_text_file": {"capability": "fs.read", "target": "fs/{path}"}
  },
  "passthrough": ["list_allowed_directories"]
}`

func gateCommand() *cli.Command {
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

The configuration (JSON) maps tool names to custody identifiers:

` + gateExample + `

  capability  the RECEIPT's action (an identifier)
  target      a template: {arg} is the call's argument arg (a string or an
              integer), its leading '/' dropped: fs/{path} with path
              /a/b.txt gives fs/a/b.txt. A value that makes no identifier
              (spaces, "..", an empty segment) refuses the call.
  step        a template for the step id (default: the tool name, '/', and
              a counter: write_file/7)
  reserve     limit -> amount reserved by each call; limits in force on the
              grant's chain that it omits are reserved at 0
  passthrough tools forwarded ungated, without receipts (logged at start)
  filter_list false to list every upstream tool; by default tools/list
              shows only tools the grant could ever allow

A tool with no mapping that is not in passthrough is refused
("unmapped_tool: ...").

Exit codes: 0 ok (the agent hung up), 1 error (the grant or an upstream
could not be used), 2 usage (bad flags or configuration), 5 unavailable
(the ledger could not be reached).

Example:

   custody gate --ledger http://127.0.0.1:8080 --log-key log.vkey \
     --key agent.pem --grant confirm_42 --config gate.json \
     -- npx -y @modelcontextprotocol/server-filesystem /srv/work`,
		Flags: []cli.Flag{
			locFlag(locLedger, "the custody server's `URL` ($CUSTODY_LEDGER)"),
			logKeyFlag("the log's checkpoint verifier key (`VKEY`), or a file holding it; every answer is checked against it"),
			&cli.StringFlag{Name: "key", Usage: "the agent's private key `FILE` (PKCS#8 PEM; the grant's grantee)", TakesFile: true, Sources: cli.EnvVars("CUSTODY_KEY")},
			&cli.StringFlag{Name: "grant", Usage: "the `ID` of the CONFIRM or DELEGATE the agent acts under", Sources: cli.EnvVars("CUSTODY_GRANT")},
			&cli.StringFlag{Name: "config", Usage: "the gate's configuration `FILE` (JSON; see above)", TakesFile: true, Sources: cli.EnvVars("CUSTODY_GATE_CONFIG")},
			&cli.StringSliceFlag{Name: "upstream-url", Usage: "an upstream MCP server's streamable HTTP `URL` (repeat for several)"},
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on this loopback `ADDR` (127.0.0.1:8931) instead of stdio"},
			&cli.DurationFlag{Name: "stream-timeout", Value: 5 * time.Second, Usage: "how long a call waits for the workflow's event stream before it is refused"},
			&cli.BoolFlag{Name: "quiet", Usage: "log only errors to standard error"},
		},
		Action: runGate,
	}
}

func runGate(ctx context.Context, c *cli.Command) error {
	loc, err := resolveLocation(c)
	if err != nil {
		return err
	}
	if k, _ := logKeyArg(c); k == "" {
		return usage(c, "--log-key is required ($%s)", logKeyEnv)
	}
	for _, f := range []string{"key", "grant", "config"} {
		if c.String(f) == "" {
			return usage(c, "--%s is required", f)
		}
	}
	var ups []gate.Upstream
	if c.NArg() > 0 {
		ups = append(ups, gate.Upstream{Command: c.Args().Slice()})
	}
	for _, u := range c.StringSlice("upstream-url") {
		ups = append(ups, gate.Upstream{URL: u})
	}
	if len(ups) == 0 {
		return usage(c, "no upstream: give a command after -- or --upstream-url URL")
	}
	addr := c.String("http")
	if addr != "" {
		if err := loopbackAddr(addr); err != nil {
			return usage(c, "--http %s: %v", addr, err)
		}
	}
	data, err := os.ReadFile(c.String("config"))
	if err != nil {
		return usage(c, "--config: %v", err)
	}
	cfg, err := gate.ParseConfig(data)
	if err != nil {
		return usage(c, "--config %s: %v", c.String("config"), err)
	}
	vkey, err := verifierKeyArg(c, "log-key")
	if err != nil {
		return err
	}
	priv, err := readPrivateKey(c.String("key"))
	if err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	cl, err := client.New(loc.value, vkey, nil)
	if err != nil {
		return usage(c, "--ledger: %v", err)
	}
	level := slog.LevelInfo
	if c.Bool("quiet") {
		level = slog.LevelError
	}
	stderr := c.Root().ErrWriter
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("component", "custody gate")
	rt := client.NewRuntime(cl, priv, "", nil)
	g, err := gate.New(ctx, gate.Options{Config: cfg, Runtime: rt, Grant: c.String("grant"), Upstreams: ups,
		Logger: logger, Stderr: stderr, StreamTimeout: c.Duration("stream-timeout"), Version: version()})
	if err != nil {
		return err
	}
	defer g.Close()
	logger.Info("gating", "grant", c.String("grant"), "workflow", g.Workflow(), "ledger", cl.URL())

	if addr == "" {
		err := g.Server().Run(ctx, &mcp.StdioTransport{})
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.Server() }, nil)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/")
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopbackAddr checks that addr listens on a loopback address only.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("the gate serves HTTP on a loopback address only (127.0.0.1, [::1], localhost)")
	}
	return nil
}
