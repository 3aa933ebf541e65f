// Package gate is custody's MCP proxy: an agent connects to the gate
// instead of to its MCP servers, and every tools/call becomes a step that
// the ledger authorises before it reaches a server.
//
// # What it promises
//
// The gate serves MCP to the agent (stdio or streamable HTTP) and is an
// MCP client of one or more upstream servers (spawned over stdio, or
// reached by streamable HTTP). It mirrors what the upstreams offer —
// tools, resources, resource templates, prompts, completions, resource
// subscriptions, log messages, progress, cancellation, sampling and
// elicitation — and follows their list_changed notifications. It gates tools/call:
//
//   - A tool the configuration maps (Config) becomes a step: the gate
//     writes the pending RECEIPT (action, target and step from the
//     mapping, the reserve, under the configured grant), signed with the
//     agent's key, and forwards the call only after the ledger durably
//     accepted it and the workflow's event stream is connected. Afterwards
//     it writes the outcome RECEIPT: success or failure, consumed (the
//     reserve), a short side_effects summary and the SHA-256 of the result
//     in evidence_refs.
//   - A denial, an unreachable ledger or event stream, an argument that
//     makes no identifier, or a tool with no mapping is answered to the
//     agent as a tool result with isError set, whose text starts with a
//     reason code ("out_of_scope: ..."); the upstream never sees the call.
//   - A STOP that covers a call in flight cancels it upstream (MCP
//     notifications/cancelled) and the agent gets the STOP's reason. The
//     ledger refuses later pending receipts while the STOP is in force, so
//     later calls are refused too, until a RESUME.
//   - A tool in the configuration's passthrough list is forwarded ungated;
//     the gate says so at start.
//
// # What it does not promise
//
// The gate authorises calls; it cannot see what a server does with one.
// A target derived from an argument (fs/{path}) is what the agent asked
// for, unless the rule declares the argument a path the gate resolves
// (realpath): then it is the file the path leads to when the gate looked,
// and a link changed after that is not seen. An upstream's sampling
// and elicitation requests go to the agent session with a tool call in
// flight (or the only session); its roots requests are answered with no
// roots.
package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Upstream is one MCP server behind the gate: a command spawned over
// stdio, or a streamable HTTP URL.
type Upstream struct {
	Name    string   // for messages (default: the command or URL)
	Command []string // program and arguments
	URL     string   // streamable HTTP endpoint, instead of Command
}

func (u Upstream) label() string {
	switch {
	case u.Name != "":
		return u.Name
	case u.URL != "":
		return u.URL
	case len(u.Command) > 0:
		return u.Command[0]
	}
	return "upstream"
}

// Options configure a Gate.
type Options struct {
	Config    *Config
	Runtime   *client.Runtime // signs as the agent
	Grant     string          // the id of the grant the agent acts under
	Upstreams []Upstream
	// Logger gets the gate's own messages (default: discarded).
	Logger *slog.Logger
	// Stderr receives spawned upstreams' standard error (default
	// os.Stderr).
	Stderr io.Writer
	// StreamTimeout bounds how long a call waits for the workflow's event
	// stream before it is refused (default 5s).
	StreamTimeout time.Duration
	// Version is the gate's MCP implementation version.
	Version string
	// ApprovalWait bounds how long a call held for approval waits
	// (default 10 minutes); past it the call is answered approval_timeout.
	ApprovalWait time.Duration
}

// Gate is a running proxy. Serve it with Server (mcp.Server.Run or
// mcp.NewStreamableHTTPHandler); Close ends it.
type Gate struct {
	cfg     *Config
	rt      *client.Runtime
	c       *client.Client
	log     *slog.Logger
	stderr  io.Writer
	version string
	timeout time.Duration

	grantID   string
	grant     *statement.Grant
	workflow  string
	scopeHash string
	inForce   map[string]bool // limit keys in force on the grant's chain

	approvalWait time.Duration

	server *mcp.Server   // set once, before ready is closed
	ready  chan struct{} // closed once server is set
	ups    []*upstream
	cancel context.CancelFunc
	done   chan struct{}

	stepN atomic.Uint64

	metrics *gateMetrics

	streamMu  sync.Mutex
	connected bool          // guarded by streamMu: the event stream is up
	streamUp  chan struct{} // guarded by streamMu: closed when connected

	mu       sync.Mutex
	owner    map[string]*upstream       // guarded by mu: tool name -> upstream
	rowner   map[string]*upstream       // guarded by mu: resource URI or template -> upstream
	powner   map[string]*upstream       // guarded by mu: prompt name -> upstream
	inflight map[*call]struct{}         // guarded by mu
	progress map[string]*progressRoute  // guarded by mu: progress token -> agent session
	calling  map[*mcp.ServerSession]int // guarded by mu: agent sessions with tool calls in flight
	hidden   map[string]string          // guarded by mu: tool name -> why the gate does not offer it
	hiddenBy map[string]string          // guarded by mu: tool name -> the upstream that offers it hidden

	// What the gate has seen of the ledger's answers, to send a pending
	// receipt the ledger will likely deny in a round of its own
	// (client.Alone), where its denial costs no other call's receipt a
	// resend (the ledger withdraws the receipts after a denied one in a
	// batch, and the runtime signs them again: no seq_mismatch DENIAL).
	stops      map[string]*statement.StopDoc // guarded by mu: STOPs seen in force
	stopDenied bool                          // guarded by mu: a pending was denied for a STOP not seen; until a RESUME
	spent      map[string]int64              // guarded by mu: limit -> least reserve denied limit_exceeded
}

// progressRoute is where an upstream's progress notifications for one
// token go.
type progressRoute struct{ ss *mcp.ServerSession }

// progressGrace is how long a progress token stays routed after its call
// ended.
const progressGrace = 2 * time.Second

// call is a gated tools/call in flight.
type call struct {
	workflow, step string
	cancel         context.CancelCauseFunc
}

// covers reports whether a STOP applies to the call (as client.Step does:
// a chain STOP of its workflow, or a step STOP of its step or above it).
func (c *call) covers(stop *statement.StopDoc) bool {
	if stop.Workflow != c.workflow {
		return false
	}
	return stop.StopScope == statement.StopChain || c.step == stop.StepID || strings.HasPrefix(c.step, stop.StepID+"/")
}

// New reads the grant, connects to every upstream, mirrors what they
// offer and starts following the workflow's event stream. It fails when
// the grant is not the runtime's, a reserve names a limit not in force,
// or an upstream cannot be reached.
func New(ctx context.Context, o Options) (*Gate, error) {
	if o.Config == nil || o.Runtime == nil || o.Grant == "" || len(o.Upstreams) == 0 {
		return nil, errors.New("gate: a config, a runtime, a grant and at least one upstream are needed")
	}
	g := &Gate{cfg: o.Config, rt: o.Runtime, c: o.Runtime.Client(), log: o.Logger, stderr: o.Stderr,
		version: o.Version, timeout: o.StreamTimeout, grantID: o.Grant, inForce: map[string]bool{},
		owner: map[string]*upstream{}, rowner: map[string]*upstream{}, powner: map[string]*upstream{},
		inflight: map[*call]struct{}{}, progress: map[string]*progressRoute{}, calling: map[*mcp.ServerSession]int{},
		stops: map[string]*statement.StopDoc{}, spent: map[string]int64{}, streamUp: make(chan struct{}),
		hidden: map[string]string{}, hiddenBy: map[string]string{}, metrics: newGateMetrics(),
		done: make(chan struct{}), ready: make(chan struct{})}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.stderr == nil {
		g.stderr = os.Stderr
	}
	if g.timeout <= 0 {
		g.timeout = 5 * time.Second
	}
	if g.version == "" {
		g.version = "dev"
	}
	g.approvalWait = o.ApprovalWait
	if g.approvalWait <= 0 {
		g.approvalWait = 10 * time.Minute
	}
	if err := g.readGrant(ctx); err != nil {
		return nil, err
	}
	for _, name := range g.cfg.Passthrough {
		g.log.Warn("passthrough: calls of this tool are forwarded ungated, with no receipt", "tool", name)
	}

	ok := false
	defer func() {
		if !ok {
			// Release a list_changed follower waiting for a server that
			// will never be; it sees no server and does nothing.
			select {
			case <-g.ready:
			default:
				close(g.ready)
			}
			g.closeUpstreams()
		}
	}()
	for _, u := range o.Upstreams {
		up, err := g.connect(ctx, u)
		if err != nil {
			return nil, err
		}
		g.ups = append(g.ups, up)
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "custody-gate", Version: g.version}, g.serverOptions())
	g.server.AddReceivingMiddleware(g.middleware)
	close(g.ready)
	for _, up := range g.ups {
		if err := g.sync(ctx, up); err != nil {
			return nil, err
		}
		if up.caps.Prompts != nil && !g.cfg.Prompts {
			g.log.Info("the upstream's prompts are not offered (set \"prompts\": true in the configuration to pass them)", "upstream", up.name)
		}
		if up.caps.Completions != nil && !g.cfg.Completions {
			g.log.Info("the upstream's completions are not offered (set \"completions\": true in the configuration to pass them)", "upstream", up.name)
		}
	}

	head, _, err := g.c.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("gate: reaching the ledger at %s: %w", g.c.URL(), err)
	}
	ok = true
	wctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.watch(wctx, head.Size-1)
	return g, nil
}

// Server is the MCP server the agent talks to.
func (g *Gate) Server() *mcp.Server { return g.server }

// Workflow is the grant's workflow.
func (g *Gate) Workflow() string { return g.workflow }

// Close stops following the event stream and closes every upstream.
func (g *Gate) Close() error {
	if g.cancel != nil {
		g.cancel()
		<-g.done
	}
	g.closeUpstreams()
	return nil
}

func (g *Gate) closeUpstreams() {
	for _, up := range g.ups {
		up.cs.Close()
	}
}

// readGrant fetches the grant, checks that the runtime's key is its
// grantee, and collects the limit keys in force on its chain.
func (g *Gate) readGrant(ctx context.Context) error {
	id := g.grantID
	for depth := 0; id != ""; depth++ {
		if depth > 16 {
			return fmt.Errorf("gate: grant %s: chain longer than 16", g.grantID)
		}
		e, err := g.c.Statement(ctx, id)
		if err != nil {
			return fmt.Errorf("gate: reading grant %s from %s: %w", id, g.c.URL(), err)
		}
		k := statement.Kind(e.Kind)
		if k != statement.Confirm && k != statement.Delegate {
			return fmt.Errorf("gate: %s is a %s, not a CONFIRM or DELEGATE", id, e.Kind)
		}
		st, err := statement.Parse(k, e.Statement)
		if err != nil {
			return fmt.Errorf("gate: grant %s: %w", id, err)
		}
		gr := statement.GrantOf(st)
		if g.grant == nil {
			g.grant = gr
			if gr.Grantee.PublicKey != sign.EncodePublicKey(g.rt.PublicKey()) {
				return fmt.Errorf("gate: the key given (%s) is not the grantee of %s (%s)", sign.KeyID(g.rt.PublicKey()), id, gr.Grantee.Name)
			}
		}
		for k := range gr.Limits {
			g.inForce[k] = true
		}
		id = ""
		if d, ok := st.(*statement.DelegateDoc); ok {
			id = d.ParentRef
		}
	}
	g.workflow, g.scopeHash = g.grant.Scope.WorkflowID, g.grant.ScopeHash
	for name, r := range g.cfg.Tools {
		for k := range r.Reserve {
			if !g.inForce[k] {
				return fmt.Errorf("gate config: tool %q reserves %q, which is not a limit of grant %s or its ancestors (the ledger would refuse every call)", name, k, g.grantID)
			}
		}
	}
	return nil
}

// mayAllow reports whether the grant could ever allow some call of tool:
// its capability is covered, its target and step templates could make an
// identifier the grant covers, and no reserve exceeds the grant's limit.
func (g *Gate) mayAllow(tool string) bool {
	if g.cfg.Passes(tool) {
		return true
	}
	r, ok := g.cfg.Tools[tool]
	if !ok {
		return false
	}
	sc := g.grant.Scope
	if !scope.Covers(sc.Capabilities, r.Capability) {
		return false
	}
	for _, t := range r.targets {
		if !anyMay(sc.Targets, t) {
			return false
		}
	}
	step := r.step
	if step == nil {
		step = &Template{parts: []part{{lit: tool + "/"}, {arg: "n"}}}
	}
	if sc.StepIDs != nil && !anyMay(sc.StepIDs, step) {
		return false
	}
	for k, v := range r.Reserve {
		if lim, ok := g.grant.Limits[k]; ok && v > lim {
			return false
		}
	}
	return true
}

// anyMay reports whether some pattern of set could match an identifier
// the template makes.
func anyMay(set []string, t *Template) bool {
	prefix, whole := t.Prefix()
	for _, p := range set {
		switch {
		case whole:
			if scope.Match(p, prefix) {
				return true
			}
		case p == "*":
			return true
		case strings.HasSuffix(p, "/*"):
			base := strings.TrimSuffix(p, "*")
			if strings.HasPrefix(prefix, base) || strings.HasPrefix(base, prefix) {
				return true
			}
		default:
			if strings.HasPrefix(p, prefix) {
				return true
			}
		}
	}
	return false
}

// middleware is a receiving middleware: a tools/call of a tool no
// upstream offers is refused like any other (a tool result, not a
// protocol error), and tools/list shows only the tools the grant could
// ever allow, when the configuration says so.
func (g *Gate) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && cr.Params != nil {
			g.mu.Lock()
			up, why, server := g.owner[cr.Params.Name], g.hidden[cr.Params.Name], g.hiddenBy[cr.Params.Name]
			g.mu.Unlock()
			if up == nil {
				rf := &refusal{CodeUnmapped, fmt.Sprintf("no upstream server offers tool %q", cr.Params.Name)}
				if why != "" {
					rf = &refusal{CodeHidden, fmt.Sprintf("tool %q is not offered: %s", cr.Params.Name, why)}
				}
				capability := ""
				if r := g.cfg.Tools[cr.Params.Name]; r != nil {
					capability = r.Capability
				}
				g.record(ctx, rf, "tool", cr.Params.Name, server, capability, true)
				return refusalResult(rf), nil
			}
		}
		res, err := next(ctx, method, req)
		if method == "logging/setLevel" && err == nil {
			// Each agent session filters log messages at its own level;
			// the upstreams send them all.
			for _, up := range g.ups {
				if up.caps.Logging != nil {
					if lerr := up.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); lerr != nil {
						g.log.Warn("setting an upstream's log level", "upstream", up.name, "err", lerr)
					}
				}
			}
		}
		if method != "tools/list" || err != nil || !g.cfg.Filter() {
			return res, err
		}
		lr, ok := res.(*mcp.ListToolsResult)
		if !ok {
			return res, err
		}
		out := *lr
		out.Tools = nil
		for _, t := range lr.Tools {
			if g.mayAllow(t.Name) {
				out.Tools = append(out.Tools, t)
			}
		}
		if out.Tools == nil {
			out.Tools = []*mcp.Tool{}
		}
		return &out, nil
	}
}

// Refusal is a tool result that refuses a call: isError, and a text that
// starts with the reason code.
func Refusal(code, format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: code + ": " + fmt.Sprintf(format, args...)}}}
}

// Reason codes of the gate's own refusals (the ledger's denials keep
// theirs: out_of_scope, limit_exceeded, workflow_stopped, ...).
const (
	CodeUnmapped     = "unmapped_tool"      // no mapping, not passed through
	CodeBadArguments = "bad_arguments"      // a template could not be filled
	CodeUnavailable  = "ledger_unavailable" // no durable answer, or no event stream
	CodeUpstream     = "upstream_error"     // the upstream failed the call
	CodeCancelled    = "cancelled"          // the agent cancelled the call
	CodeHidden       = "tool_hidden"        // a mapped tool the gate does not offer (undeclared argument, drifted pin)
	CodeUnmappedURI  = "unmapped_resource"  // a resource URI no rule maps, or no upstream listed
	CodeNotOffered   = "not_offered"        // prompts or completions the configuration does not pass
)

// callTool gates one tools/call.
func (g *Gate) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := req.Params.Name
	g.mu.Lock()
	up := g.owner[name]
	g.mu.Unlock()
	if up == nil {
		return Refusal(CodeUnmapped, "no upstream server offers tool %q", name), nil
	}
	if req.Session != nil {
		g.mu.Lock()
		g.calling[req.Session]++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			if g.calling[req.Session]--; g.calling[req.Session] <= 0 {
				delete(g.calling, req.Session)
			}
			g.mu.Unlock()
		}()
	}
	params := &mcp.CallToolParams{Meta: hop(req.Params.Meta), Name: name}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	if tok := params.GetProgressToken(); tok != nil && req.Session != nil {
		key := fmt.Sprint(tok)
		g.mu.Lock()
		route := &progressRoute{ss: req.Session}
		g.progress[key] = route
		g.mu.Unlock()
		// A notification the upstream sent before its answer may be read
		// after it: keep the route a moment longer.
		defer time.AfterFunc(progressGrace, func() {
			g.mu.Lock()
			if g.progress[key] == route {
				delete(g.progress, key)
			}
			g.mu.Unlock()
		})
	}
	if g.cfg.Passes(name) {
		res, err := up.cs.CallTool(ctx, params)
		if err != nil {
			return Refusal(CodeUpstream, "%s: %v", up.name, err), nil
		}
		return res, nil
	}
	rule, ok := g.cfg.Tools[name]
	if !ok {
		rf := &refusal{CodeUnmapped, fmt.Sprintf("tool %q has no mapping in the gate's configuration and is not in its passthrough list", name)}
		g.record(ctx, rf, "tool", name, up.name, "", true)
		return refusalResult(rf), nil
	}
	spec, args, rf := g.toolStep(name, rule, up, req.Params.Arguments)
	if rf != nil {
		g.record(ctx, rf, "tool", name, up.name, rule.Capability, true)
		return refusalResult(rf), nil
	}
	params.Arguments = args
	spec.notify = g.notifier(ctx, req)
	var res *mcp.CallToolResult
	var cerr error
	rf = g.runStep(ctx, spec, func(fctx context.Context) ran {
		res, cerr = up.cs.CallTool(fctx, params)
		switch {
		case cerr != nil && ctx.Err() != nil:
			return ran{result: "cancelled by the agent", err: "cancelled by the agent: " + ctx.Err().Error()}
		case cerr != nil:
			return ran{result: "upstream error", err: cerr.Error()}
		}
		b, _ := json.Marshal(res)
		if res.IsError {
			msg := firstText(res)
			if msg == "" {
				msg = "the tool reported an error"
			}
			return ran{result: "tool error", err: msg, evidence: b}
		}
		return ran{result: "ok", evidence: b}
	})
	switch {
	case rf != nil && rf.code != "workflow_stopped" && rf.code != "step_stopped":
		g.record(ctx, rf, "tool", name, up.name, rule.Capability, false)
		return refusalResult(rf), nil
	case rf != nil:
		return refusalResult(rf), nil
	case cerr != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case cerr != nil:
		return Refusal(CodeUpstream, "%s: %v", up.name, cerr), nil
	}
	return res, nil
}

// notifier tells the agent of a call something while it waits: a log
// message (level warning, logger custody-gate) to its session, and a
// progress notification when the call carries a progress token.
func (g *Gate) notifier(ctx context.Context, req *mcp.CallToolRequest) func(string) {
	if req.Session == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	n := 0.0
	return func(msg string) {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "custody-gate", Data: msg})
		if tok != nil {
			n++
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n, Message: msg})
		}
	}
}

func refusalResult(rf *refusal) *mcp.CallToolResult { return Refusal(rf.code, "%s", rf.msg) }

// toolStep makes a tool call's step: its targets and step id from the
// rule's templates, each argument checked. Every argument must be
// declared (a template's or inert); a path argument must be absolute, and
// a realpath one is resolved and forwarded resolved. It returns the
// arguments to forward.
func (g *Gate) toolStep(name string, rule *ToolRule, up *upstream, raw json.RawMessage) (*stepSpec, json.RawMessage, *refusal) {
	bad := func(format string, a ...any) *refusal {
		return &refusal{CodeBadArguments, fmt.Sprintf("tool %q: ", name) + fmt.Sprintf(format, a...)}
	}
	var args map[string]json.RawMessage
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, nil, bad("the arguments are not a JSON object: %v", err)
		}
	}
	var undeclared []string
	for k := range args {
		if !rule.Declared(k) {
			undeclared = append(undeclared, k)
		}
	}
	if len(undeclared) > 0 {
		slices.Sort(undeclared)
		return nil, nil, bad("argument %s is neither in a target or step template nor declared inert in the gate's configuration", strings.Join(undeclared, ", "))
	}
	vals := map[string]string{}
	changed := false
	for _, a := range rule.TemplateArgs() {
		rawv, ok := args[a]
		if !ok {
			continue // the template says it is missing
		}
		v, err := argValue(a, rawv)
		if err != nil {
			return nil, nil, bad("%v", err)
		}
		switch rule.Paths[a] {
		case PathAbsolute, PathRealpath:
			if !strings.HasPrefix(v, "/") {
				return nil, nil, bad("argument %q is %q: the configuration declares it an absolute path (a relative one is resolved by the server against a folder of its choosing)", a, v)
			}
		}
		if rule.Paths[a] == PathRealpath {
			r, err := resolvePath(v)
			if err != nil {
				return nil, nil, bad("argument %q (%s): resolving the path: %v", a, v, err)
			}
			if r != v {
				b, _ := json.Marshal(r)
				args[a] = b
				changed = true
			}
			v = r
		}
		vals[a] = v
	}
	spec := &stepSpec{what: "tool", name: name, up: up, capability: rule.Capability, reserve: rule.Reserve}
	for _, t := range rule.targets {
		target, err := t.RenderValues(vals)
		if err != nil {
			return nil, nil, bad("target %s: %v", t, err)
		}
		if !slices.Contains(spec.targets, target) {
			spec.targets = append(spec.targets, target)
		}
	}
	if rule.step != nil {
		var err error
		if spec.step, err = rule.step.RenderValues(vals); err != nil {
			return nil, nil, bad("step %s: %v", rule.step, err)
		}
	} else {
		spec.step = g.defaultStep(name)
		if err := scope.CheckIdentifier(spec.step); err != nil {
			return nil, nil, bad("the default step id %s: %v (give the tool a step template)", spec.step, err)
		}
	}
	if changed {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, nil, bad("%v", err)
		}
		raw = b
	}
	spec.params = paramsSHA256(raw)
	return spec, raw, nil
}

// doubtful reports whether the ledger will likely deny a call's pending
// receipt: outside the grant's scope, over its limits, over what a denial
// showed is left, or under a STOP the gate knows of. The ledger still
// decides; this only keeps such a receipt out of a batch.
func (g *Gate) doubtful(c *call, action, target string, reserve map[string]int64) bool {
	sc := g.grant.Scope
	if !scope.Covers(sc.Capabilities, action) || !scope.Covers(sc.Targets, target) || (sc.StepIDs != nil && !scope.Covers(sc.StepIDs, c.step)) {
		return true
	}
	for k, v := range reserve {
		if lim, ok := g.grant.Limits[k]; ok && v > lim {
			return true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopDenied {
		return true
	}
	for _, st := range g.stops {
		if c.covers(st) {
			return true
		}
	}
	for k, v := range reserve {
		if least, ok := g.spent[k]; ok && v >= least {
			return true
		}
	}
	return false
}

// denied notes what a denial shows: a STOP in force, or a budget spent
// (charges are never released, so a reserve as large will be denied too).
func (g *Gate) denied(code string, reserve map[string]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch code {
	case "workflow_stopped", "step_stopped":
		g.stopDenied = true
	case "limit_exceeded":
		for k, v := range reserve {
			if v > 0 {
				if least, ok := g.spent[k]; !ok || v < least {
					g.spent[k] = v
				}
			}
		}
	}
}

// outcome is an outcome receipt being filled.
type outcome struct {
	doc  *statement.ReceiptDoc
	side map[string]string
}

func (o *outcome) fail(msg string) {
	o.doc.Result = statement.ResultFailure
	if len(msg) > 1024 {
		msg = msg[:1024] + "…"
	}
	if msg == "" {
		msg = "the tool reported an error"
	}
	o.doc.Error = strings.ToValidUTF8(msg, "?")
}

// evidence records the SHA-256 of the result's JSON.
func (o *outcome) evidence(b []byte) {
	sum := sha256.Sum256(b)
	o.doc.EvidenceRefs = []string{"sha256:" + hex.EncodeToString(sum[:])}
}

func (g *Gate) writeOutcome(ctx context.Context, o *outcome) error {
	o.doc.SideEffects = o.side
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := g.rt.Receipt(octx, o.doc)
	return err
}

func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// awaitStream waits (at most the stream timeout) for the workflow's event
// stream to be connected.
func (g *Gate) awaitStream(ctx context.Context) error {
	g.streamMu.Lock()
	up, ch := g.connected, g.streamUp
	g.streamMu.Unlock()
	if up {
		return nil
	}
	t := time.NewTimer(g.timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return fmt.Errorf("no event stream for workflow %s within %s, so a STOP could not reach the call", g.workflow, g.timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Gate) setConnected(up bool) {
	g.streamMu.Lock()
	defer g.streamMu.Unlock()
	if up == g.connected {
		return
	}
	g.connected = up
	if up {
		close(g.streamUp)
	} else {
		g.streamUp = make(chan struct{})
	}
}

// watch follows the workflow's event stream from after, reconnecting
// with the last index seen, and cancels the calls a STOP covers.
func (g *Gate) watch(ctx context.Context, after uint64) {
	defer close(g.done)
	wait := backoff.Backoff{First: 50 * time.Millisecond, Max: time.Second}
	for ctx.Err() == nil {
		s, err := g.c.Events(ctx, g.workflow, after)
		if err == nil {
			g.setConnected(true)
			wait.Reset()
			var err error
			for {
				var e *api.Entry
				if e, err = s.Next(); err != nil {
					break
				}
				after = e.Index
				g.onEntry(e)
			}
			s.Close()
			g.setConnected(false)
			if ctx.Err() == nil {
				g.log.Warn("the workflow's event stream dropped; calls wait for it (at most the stream timeout) or are refused", "workflow", g.workflow, "err", err)
			}
		}
		wait.Wait(ctx)
	}
}

func (g *Gate) onEntry(e *api.Entry) {
	if statement.Kind(e.Kind) == statement.Resume {
		if st, err := statement.Parse(statement.Resume, e.Statement); err == nil {
			g.mu.Lock()
			delete(g.stops, st.(*statement.ResumeDoc).StopRef)
			g.stopDenied = false
			g.mu.Unlock()
		}
		return
	}
	if statement.Kind(e.Kind) != statement.Stop {
		return
	}
	st, err := statement.Parse(statement.Stop, e.Statement)
	if err != nil {
		return
	}
	stop := st.(*statement.StopDoc)
	g.log.Warn("STOP", "id", stop.RequestID, "scope", stop.StopScope, "step", stop.StepID, "reason", stop.Reason)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stops[stop.RequestID] = stop
	for c := range g.inflight {
		if c.covers(stop) {
			c.cancel(&client.StoppedError{Stop: stop, Index: e.Index})
		}
	}
}

// upstream is one connected MCP server.
type upstream struct {
	name  string
	local bool // spawned by the gate: paths it sees are the gate's
	cs    *mcp.ClientSession
	caps  *mcp.ServerCapabilities
	inst  string

	syncMu sync.Mutex // one sync at a time
	tools  []string   // guarded by syncMu: the tools it owns
	res    []string   // guarded by syncMu: resource URIs it owns
	tmpl   []string   // guarded by syncMu: resource templates it owns
	prompt []string   // guarded by syncMu: prompts it owns
}

func (g *Gate) connect(ctx context.Context, u Upstream) (*upstream, error) {
	up := &upstream{name: u.label(), local: len(u.Command) > 0 && u.URL == ""}
	resync := func() {
		go func() {
			// A notification may come before the gate's server exists;
			// the first sync, after it, lists everything anyway.
			<-g.ready
			if g.server == nil {
				return // New failed
			}
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := g.sync(sctx, up); err != nil {
				g.log.Error("following a list change", "upstream", up.name, "err", err)
			}
		}()
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "custody-gate", Version: g.version}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { resync() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { resync() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resync() },
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if g.isReady() {
				g.server.ResourceUpdated(ctx, req.Params)
			}
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			if !g.isReady() {
				return
			}
			for ss := range g.server.Sessions() {
				ss.Log(ctx, req.Params)
			}
		},
		// An upstream's sampling and elicitation requests go to the agent
		// whose tool call is in flight (they come while a tool runs).
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			ss, err := g.agentSession()
			if err != nil {
				return nil, err
			}
			return ss.CreateMessage(ctx, req.Params)
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ss, err := g.agentSession()
			if err != nil {
				return nil, err
			}
			return ss.Elicit(ctx, req.Params)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			g.mu.Lock()
			route := g.progress[fmt.Sprint(req.Params.ProgressToken)]
			g.mu.Unlock()
			if route != nil {
				route.ss.NotifyProgress(ctx, req.Params)
			}
		},
	})
	var t mcp.Transport
	tail := &tailWriter{}
	switch {
	case u.URL != "":
		t = &mcp.StreamableClientTransport{Endpoint: u.URL}
	case len(u.Command) > 0:
		cmd := exec.Command(u.Command[0], u.Command[1:]...)
		cmd.Stderr = io.MultiWriter(g.stderr, tail)
		t = &mcp.CommandTransport{Command: cmd}
	default:
		return nil, errors.New("gate: an upstream needs a command or a URL")
	}
	cs, err := cl.Connect(ctx, t, nil)
	if err != nil {
		if said := tail.String(); said != "" {
			return nil, fmt.Errorf("gate: connecting to upstream %s: %w; its standard error ended with: %s", up.name, err, said)
		}
		return nil, fmt.Errorf("gate: connecting to upstream %s: %w", up.name, err)
	}
	tail.stop()
	up.cs = cs
	if ir := cs.InitializeResult(); ir != nil {
		up.caps, up.inst = ir.Capabilities, ir.Instructions
		// Recorded by the name the server gives itself, not by the
		// program that started it (npx, node, uvx).
		if u.Name == "" && ir.ServerInfo != nil && ir.ServerInfo.Name != "" {
			up.name = ir.ServerInfo.Name
		}
	}
	if up.caps == nil {
		up.caps = &mcp.ServerCapabilities{}
	}
	return up, nil
}

// tailWriter keeps the last 512 bytes written to it, until stopped: an
// upstream that fails to start says why on its standard error.
type tailWriter struct {
	mu      sync.Mutex
	b       []byte
	stopped bool
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.b = append(w.b, p...)
		if len(w.b) > 512 {
			w.b = w.b[len(w.b)-512:]
		}
	}
	return len(p), nil
}

func (w *tailWriter) stop() { w.mu.Lock(); w.stopped, w.b = true, nil; w.mu.Unlock() }

// String is the text kept, on one line.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(w.b), "?")), " ")
}

func (g *Gate) isReady() bool {
	select {
	case <-g.ready:
		return g.server != nil
	default:
		return false
	}
}

// agentSession is the agent session an upstream's request goes to: one
// with a tool call in flight, or else the only one.
func (g *Gate) agentSession() (*mcp.ServerSession, error) {
	g.mu.Lock()
	for ss := range g.calling {
		g.mu.Unlock()
		return ss, nil
	}
	g.mu.Unlock()
	if !g.isReady() {
		return nil, errors.New("custody gate: no agent is connected")
	}
	var only *mcp.ServerSession
	n := 0
	for ss := range g.server.Sessions() {
		only = ss
		n++
	}
	if n != 1 {
		return nil, fmt.Errorf("custody gate: %d agents are connected and none has a call in flight; the request has no one to go to", n)
	}
	return only, nil
}

// serverOptions derives the capabilities the gate offers from its
// upstreams'.
func (g *Gate) serverOptions() *mcp.ServerOptions {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	var inst []string
	subscribe, complete := false, false
	for _, up := range g.ups {
		if up.inst != "" {
			inst = append(inst, up.inst)
		}
		if up.caps.Resources != nil {
			caps.Resources = &mcp.ResourceCapabilities{ListChanged: true}
			subscribe = subscribe || up.caps.Resources.Subscribe
		}
		if up.caps.Prompts != nil && g.cfg.Prompts {
			caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
		}
		if up.caps.Logging != nil {
			caps.Logging = &mcp.LoggingCapabilities{}
		}
		if up.caps.Completions != nil {
			complete = true
		}
	}
	o := &mcp.ServerOptions{Instructions: strings.Join(inst, "\n\n"), Capabilities: caps}
	if subscribe {
		caps.Resources.Subscribe = true
		o.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			up := g.resourceOwner(req.Params.URI)
			if up == nil {
				rf := &refusal{CodeUnmappedURI, fmt.Sprintf("no upstream server listed resource %s (or a template it matches)", req.Params.URI)}
				g.record(ctx, rf, "resource", req.Params.URI, "", "", true)
				return rf
			}
			var serr error
			rf := g.gateResource(ctx, up, req.Params.URI, func(fctx context.Context) ran {
				p := *req.Params
				p.Meta = hop(p.Meta)
				if serr = up.cs.Subscribe(fctx, &p); serr != nil {
					return ran{result: "upstream error", err: serr.Error()}
				}
				return ran{result: "subscribed"}
			})
			if rf != nil {
				return rf
			}
			return serr
		}
		o.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			up := g.resourceOwner(req.Params.URI)
			if up == nil {
				return nil
			}
			p := *req.Params
			p.Meta = hop(p.Meta)
			return up.cs.Unsubscribe(ctx, &p)
		}
	}
	if complete && g.cfg.Completions {
		caps.Completions = &mcp.CompletionCapabilities{}
		o.CompletionHandler = func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var up *upstream
			if r := req.Params.Ref; r != nil {
				g.mu.Lock()
				if r.Type == "ref/prompt" {
					up = g.powner[r.Name]
				} else {
					up = g.rowner[r.URI]
				}
				g.mu.Unlock()
			}
			if up == nil {
				return nil, errors.New("no upstream server offers what the completion refers to")
			}
			p := *req.Params
			p.Meta = hop(p.Meta)
			return up.cs.Complete(ctx, &p)
		}
	}
	return o
}

// resourceOwner finds the upstream that listed a resource URI, or a
// resource template it matches; none: nil (never a guess).
func (g *Gate) resourceOwner(uri string) *upstream {
	g.mu.Lock()
	defer g.mu.Unlock()
	if up := g.rowner[uri]; up != nil {
		return up
	}
	for k, up := range g.rowner {
		if !strings.Contains(k, "{") {
			continue
		}
		if t, err := uritemplate.New(k); err == nil && t.Regexp().MatchString(uri) {
			return up
		}
	}
	return nil
}

// sync mirrors an upstream's tools, resources, resource templates and
// prompts into the gate's server: new ones are added, vanished ones
// removed (the server tells the agent's sessions that the lists changed).
// A name another upstream already offers stays with that one.
func (g *Gate) sync(ctx context.Context, up *upstream) error {
	up.syncMu.Lock()
	defer up.syncMu.Unlock()
	if up.caps.Tools != nil {
		var tools []*mcp.Tool
		for t, err := range up.cs.Tools(ctx, nil) {
			if err != nil {
				return fmt.Errorf("gate: listing the tools of %s: %w", up.name, err)
			}
			tools = append(tools, t)
		}
		var names []string
		for _, t := range tools {
			if !g.claim(g.owner, t.Name, up) {
				g.log.Warn("two upstreams offer one tool; the first keeps it", "tool", t.Name, "upstream", up.name)
				continue
			}
			if why := g.unfit(up, t); why != "" {
				g.hide(t.Name, why, up)
				g.release(g.owner, []string{t.Name}, up)
				continue
			}
			g.hide(t.Name, "", up)
			if err := addTool(g.server, t, g.callTool); err != nil {
				g.log.Warn("an upstream tool cannot be offered", "tool", t.Name, "upstream", up.name, "err", err)
				g.release(g.owner, []string{t.Name}, up)
				continue
			}
			names = append(names, t.Name)
		}
		gone := missing(up.tools, names)
		g.release(g.owner, gone, up)
		g.server.RemoveTools(gone...)
		up.tools = names
	}
	if up.caps.Resources != nil {
		var uris []string
		for r, err := range up.cs.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("gate: listing the resources of %s: %w", up.name, err)
			}
			if g.claim(g.rowner, r.URI, up) && try(func() { g.server.AddResource(r, g.gatedRead(up)) }) == nil {
				uris = append(uris, r.URI)
			}
		}
		gone := missing(up.res, uris)
		g.release(g.rowner, gone, up)
		g.server.RemoveResources(gone...)
		up.res = uris
		var tmpls []string
		for t, err := range up.cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				// Not every server has templates; resources still work.
				break
			}
			if g.claim(g.rowner, t.URITemplate, up) && try(func() { g.server.AddResourceTemplate(t, g.gatedRead(up)) }) == nil {
				tmpls = append(tmpls, t.URITemplate)
			}
		}
		gone = missing(up.tmpl, tmpls)
		g.release(g.rowner, gone, up)
		g.server.RemoveResourceTemplates(gone...)
		up.tmpl = tmpls
	}
	if up.caps.Prompts != nil && g.cfg.Prompts {
		var names []string
		for p, err := range up.cs.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("gate: listing the prompts of %s: %w", up.name, err)
			}
			if g.claim(g.powner, p.Name, up) && try(func() {
				g.server.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					p := *req.Params
					p.Meta = hop(p.Meta)
					return up.cs.GetPrompt(ctx, &p)
				})
			}) == nil {
				names = append(names, p.Name)
			}
		}
		gone := missing(up.prompt, names)
		g.release(g.powner, gone, up)
		g.server.RemovePrompts(gone...)
		up.prompt = names
	}
	return nil
}

// gatedRead reads a resource of up as a step: the configuration's
// resources rule for the URI gives its capability and target.
func (g *Gate) gatedRead(up *upstream) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		var res *mcp.ReadResourceResult
		var rerr error
		rf := g.gateResource(ctx, up, uri, func(fctx context.Context) ran {
			p := *req.Params
			p.Meta = hop(p.Meta)
			res, rerr = up.cs.ReadResource(fctx, &p)
			if rerr != nil {
				return ran{result: "upstream error", err: rerr.Error()}
			}
			b, _ := json.Marshal(res)
			return ran{result: "ok", evidence: b}
		})
		if rf != nil {
			return nil, rf
		}
		if rerr != nil {
			return nil, fmt.Errorf("%s: %s: %w", CodeUpstream, up.name, rerr)
		}
		return res, nil
	}
}

// gateResource runs fn (a read of, or a subscription to, uri on up) as a
// step under the configuration's resources rule for uri; a URI no rule
// maps is refused.
func (g *Gate) gateResource(ctx context.Context, up *upstream, uri string, fn func(context.Context) ran) *refusal {
	rule, target, err := g.cfg.Resource(uri)
	if rule == nil {
		rf := &refusal{CodeUnmappedURI, fmt.Sprintf("resource %s: no resources rule of the gate's configuration maps this URI", uri)}
		g.record(ctx, rf, "resource", uri, up.name, "", true)
		return rf
	}
	if err != nil {
		rf := &refusal{CodeBadArguments, err.Error()}
		g.record(ctx, rf, "resource", uri, up.name, rule.Capability, true)
		return rf
	}
	spec := &stepSpec{what: "resource", name: uri, up: up, capability: rule.Capability, targets: []string{target}, step: g.defaultStep("resource")}
	rf := g.runStep(ctx, spec, fn)
	if rf != nil && rf.code != "workflow_stopped" && rf.code != "step_stopped" {
		g.record(ctx, rf, "resource", uri, up.name, rule.Capability, false)
	}
	return rf
}

// unfit says why a mapped tool is not offered ("" when it is): its
// definition differs from its pin, an argument of its input schema is
// undeclared, or a realpath argument's upstream is not local.
func (g *Gate) unfit(up *upstream, t *mcp.Tool) string {
	rule := g.cfg.Tools[t.Name]
	if rule == nil {
		return ""
	}
	if rule.Pin != "" {
		h, err := DefinitionHash(t.Name, t.Description, t.InputSchema)
		if err != nil {
			return fmt.Sprintf("its definition cannot be hashed: %v", err)
		}
		if h != rule.Pin {
			return fmt.Sprintf("its definition (name, description, input schema) drifted from its pin: pinned %s, offered %s; review the tool, then run custody gate pin", rule.Pin, h)
		}
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if b, err := json.Marshal(t.InputSchema); err == nil {
		json.Unmarshal(b, &schema)
	}
	var undeclared []string
	for k := range schema.Properties {
		if !rule.Declared(k) {
			undeclared = append(undeclared, k)
		}
	}
	if len(undeclared) > 0 {
		slices.Sort(undeclared)
		return fmt.Sprintf("undeclared argument(s) %s: each argument of its input schema must be in a target or step template or declared inert; name it in \"targets\" if it designates something acted on, else add it to \"inert\"", strings.Join(undeclared, ", "))
	}
	if !up.local {
		for a, mode := range rule.Paths {
			if mode == PathRealpath {
				return fmt.Sprintf("paths.%s is realpath, which the gate can only resolve for an upstream it spawns; %s is reached by URL (use absolute)", a, up.name)
			}
		}
	}
	return ""
}

// hide records that a tool is not offered (why), or offered again (why
// empty), and says so on standard error when that changes.
func (g *Gate) hide(tool, why string, up *upstream) {
	g.mu.Lock()
	old := g.hidden[tool]
	if why == "" {
		delete(g.hidden, tool)
		delete(g.hiddenBy, tool)
	} else {
		g.hidden[tool], g.hiddenBy[tool] = why, up.name
	}
	n := len(g.hidden)
	g.mu.Unlock()
	g.metrics.hidden.Set(float64(n))
	switch {
	case why != "" && why != old:
		g.log.Warn("tool hidden: the gate does not offer it", "tool", tool, "upstream", up.name, "reason", why)
	case why == "" && old != "":
		g.log.Info("tool offered again", "tool", tool, "upstream", up.name)
	}
}

// Hidden is the mapped tools the gate does not offer, and why.
func (g *Gate) Hidden() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.hidden)
}

// hop is the part of a request's _meta that travels on to the upstream:
// everything but the protocol's own per-connection keys
// (io.modelcontextprotocol/...), which each hop sets for itself.
func hop(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}

// claim gives name to up unless another upstream has it.
func (g *Gate) claim(m map[string]*upstream, name string, up *upstream) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if o, ok := m[name]; ok && o != up {
		return false
	}
	m[name] = up
	return true
}

func (g *Gate) release(m map[string]*upstream, names []string, up *upstream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range names {
		if m[n] == up {
			delete(m, n)
		}
	}
}

func missing(old, now []string) []string {
	var out []string
	for _, n := range old {
		if !slices.Contains(now, n) {
			out = append(out, n)
		}
	}
	return out
}

// addTool offers an upstream tool. The SDK panics on a schema it cannot
// use; that is an error here: one odd tool must not bring the gate down.
func addTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) error {
	var m map[string]any
	b, err := json.Marshal(t.InputSchema)
	if err != nil || json.Unmarshal(b, &m) != nil || m["type"] != "object" {
		return fmt.Errorf("input schema is not a JSON object schema of type object")
	}
	t.InputSchema = json.RawMessage(b)
	return try(func() { s.AddTool(t, h) })
}

// try runs f, turning a panic into an error.
func try(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	f()
	return nil
}
