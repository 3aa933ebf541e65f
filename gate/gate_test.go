package gate_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/gate"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

// files is the upstream's state: what its tools did.
type files struct {
	mu        sync.Mutex
	written   map[string]string
	calls     int
	cancelled int
	started   chan string
}

func (f *files) wrote(path string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.written[path]
	return s, ok
}

func (f *files) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

// cancelledCount is the number of upstream calls that saw their context end.
func (f *files) cancelledCount() int { f.mu.Lock(); defer f.mu.Unlock(); return f.cancelled }

type pathArgs struct {
	Path string `json:"path"`
	Text string `json:"text,omitempty"`
}

// startUpstream serves an MCP server (the Go SDK's) over streamable HTTP
// with tools write, slow, echo and secret.
func startUpstream(t *testing.T) (*files, *mcp.Server, string) {
	f := &files{written: map[string]string{}, started: make(chan string, 16)}
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "write a file"}, func(ctx context.Context, req *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		f.mu.Lock()
		f.calls++
		f.written[a.Path] = a.Text
		f.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + a.Path}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "wait until cancelled"}, func(ctx context.Context, req *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		f.mu.Lock()
		f.calls++
		f.mu.Unlock()
		f.started <- a.Path
		select {
		case <-ctx.Done():
			f.mu.Lock()
			f.cancelled++
			f.mu.Unlock()
			return nil, nil, ctx.Err()
		case <-time.After(20 * time.Second):
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		// Progress and a log message on the way, when asked for.
		if tok := req.Params.GetProgressToken(); tok != nil {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2})
		}
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "upstream", Data: "echoing " + a.Text})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "secret"}, func(ctx context.Context, req *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		f.mu.Lock()
		f.calls++
		f.mu.Unlock()
		return &mcp.CallToolResult{}, nil, nil
	})
	return f, s, serveUpstream(t, s)
}

// serveUpstream serves an MCP server over streamable HTTP on loopback.
func serveUpstream(tb testing.TB, s *mcp.Server) string {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	tb.Cleanup(hs.Close)
	return hs.URL + "/"
}

const testConfig = `{"tools": {
  "write": {"capability": "fs.write", "target": "fs/{path}", "inert": ["text"], "reserve": {"writes": 1}},
  "slow": {"capability": "fs.write", "target": "fs/{path}", "inert": ["text"], "step": "slow/{path}"}
 },
 "passthrough": ["echo"]}`

type world struct {
	lg     *servertest.Log
	owner  *client.Runtime
	agent  ed25519.PrivateKey
	grant  string
	files  *files
	up     *mcp.Server
	g      *gate.Gate
	cs     *mcp.ClientSession
	notify chan string
}

// newWorld starts a ledger, grants agent:gate fs.write on fs/allowed/*
// with 2 writes in workflow wf_gate, starts an upstream and a gate, and
// connects an agent to the gate.
func newWorld(t *testing.T, config string) *world {
	t.Helper()
	return newWorldLimits(t, config, map[string]int64{"writes": 2})
}

// newWorldLimits is newWorld with the grant's limits given.
func newWorldLimits(t *testing.T, config string, limits map[string]int64) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{lg: servertest.Start(t, server.Options{}), notify: make(chan string, 16)}
	w.owner = w.lg.Principal("user:alice")
	pub, priv := servertest.Key(t)
	w.agent, w.grant = priv, "confirm_gate"
	if _, err := w.owner.Confirm(ctx, client.Grant{ID: w.grant, Workflow: "wf_gate", Grantee: "agent:gate", GranteeKey: pub,
		Targets: []string{"fs/allowed/*"}, Capabilities: []string{"fs.write"}, Limits: limits,
		TTL: time.Hour, Revocable: true}); err != nil {
		t.Fatal(err)
	}
	var url string
	w.files, w.up, url = startUpstream(t)
	cfg, err := gate.ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(w.lg.NewClient(), priv, "agent:gate", nil)
	w.g, err = gate.New(ctx, gate.Options{Config: cfg, Runtime: rt, Grant: w.grant,
		Upstreams: []gate.Upstream{{Name: "files", URL: url}}, StreamTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.g.Close() })
	st, ct := mcp.NewInMemoryTransports()
	if _, err := w.g.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	agent := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { w.notify <- "tools" },
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			w.notify <- fmt.Sprintf("log %v", req.Params.Data)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			w.notify <- fmt.Sprintf("progress %v/%v", req.Params.Progress, req.Params.Total)
		},
	})
	w.cs, err = agent.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cs.Close() })
	return w
}

func (w *world) call(t *testing.T, tool string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := w.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	if len(res.Content) > 0 {
		text = res.Content[0].(*mcp.TextContent).Text
	}
	return res, text
}

// receipts returns the workflow's RECEIPTs and DENIALs, in log order.
func (w *world) receipts(t *testing.T) (rs []*statement.ReceiptDoc, denials []*statement.DenialDoc) {
	t.Helper()
	size := w.lg.Ledger.Head().Size
	for i := uint64(0); i < size; i++ {
		e, err := w.lg.Ledger.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		switch st := e.Statement.(type) {
		case *statement.ReceiptDoc:
			rs = append(rs, st)
		case *statement.DenialDoc:
			denials = append(denials, st)
		}
	}
	return rs, denials
}

func TestGatedCall(t *testing.T) {
	w := newWorld(t, testConfig)

	// Allowed: the upstream sees it, and a pending and an outcome receipt
	// are logged, the pending first.
	res, text := w.call(t, "write", map[string]any{"path": "/allowed/a.txt", "text": "hello"})
	if res.IsError || text != "wrote /allowed/a.txt" {
		t.Fatalf("allowed call: %v %q", res.IsError, text)
	}
	if s, ok := w.files.wrote("/allowed/a.txt"); !ok || s != "hello" {
		t.Fatal("the upstream did not get the allowed call")
	}
	rs, _ := w.receipts(t)
	if len(rs) != 2 || rs[0].Result != statement.ResultPending || rs[1].PendingRef != rs[0].ReceiptID {
		t.Fatalf("receipts: %+v", rs)
	}
	p, o := rs[0], rs[1]
	if p.Action != "fs.write" || p.Target != "fs/allowed/a.txt" || p.StepID != "write/1" || p.Reserve["writes"] != 1 {
		t.Fatalf("pending: %+v", p)
	}
	if o.Result != statement.ResultSuccess || o.Consumed["writes"] != 1 || o.SideEffects["tool"] != "write" ||
		len(o.EvidenceRefs) != 1 || !strings.HasPrefix(o.EvidenceRefs[0], "sha256:") {
		t.Fatalf("outcome: %+v", o)
	}

	// Refused, and the upstream never sees them.
	before := w.files.count()
	for _, c := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"write", map[string]any{"path": "/etc/passwd", "text": "x"}, "out_of_scope: "},
		{"write", map[string]any{"path": "/allowed/../etc/passwd", "text": "x"}, "bad_arguments: "},
		{"write", map[string]any{"text": "x"}, "bad_arguments: "},
		{"write", map[string]any{"path": 3.5}, "bad_arguments: "},
		{"secret", map[string]any{}, "unmapped_tool: "},
		{"nosuch", map[string]any{}, "unmapped_tool: "},
	} {
		res, text := w.call(t, c.tool, c.args)
		if !res.IsError || !strings.HasPrefix(text, c.code) {
			t.Errorf("%s %v: %v %q, want %s...", c.tool, c.args, res.IsError, text, c.code)
		}
	}
	if _, ok := w.files.wrote("/etc/passwd"); ok || w.files.count() != before {
		t.Fatal("a refused call reached the upstream")
	}
	// Over budget: 2 writes allowed, 1 spent; the second passes, the
	// third is denied.
	if res, text := w.call(t, "write", map[string]any{"path": "allowed/b.txt", "text": "b"}); res.IsError {
		t.Fatalf("second write: %q", text)
	}
	res, text = w.call(t, "write", map[string]any{"path": "allowed/c.txt", "text": "c"})
	if !res.IsError || !strings.HasPrefix(text, "limit_exceeded: ") {
		t.Fatalf("over budget: %q", text)
	}
	if _, ok := w.files.wrote("allowed/c.txt"); ok {
		t.Fatal("the over-budget call reached the upstream")
	}
	// Passthrough is forwarded without receipts.
	n := len(rs)
	if res, text := w.call(t, "echo", map[string]any{"path": "-", "text": "hi"}); res.IsError || text != "hi" {
		t.Fatalf("passthrough: %q", text)
	}
	// The gate's own refusals (bad_arguments, unmapped_tool) are in the
	// log too: each as a pending receipt the ledger denied.
	rs, denials := w.receipts(t)
	if len(rs) != n+2 || len(denials) != 7 {
		t.Fatalf("%d receipts and %d denials, want %d and 7", len(rs), len(denials), n+2)
	}
}

func TestListFilteredAndFollowed(t *testing.T) {
	w := newWorld(t, testConfig)
	names := func() []string {
		res, err := w.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	if got := strings.Join(names(), ","); got != "echo,slow,write" {
		t.Fatalf("tools/list: %s", got)
	}
	// The upstream gains and loses tools: the agent is told, and sees the
	// new list (a gated one shows once it is mapped; this one is not).
	mcp.AddTool(w.up, &mcp.Tool{Name: "later"}, func(ctx context.Context, req *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	w.up.RemoveTools("echo")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-w.notify:
		case <-deadline:
			t.Fatalf("the agent was not told of the upstream's change: %v", names())
		}
		if got := strings.Join(names(), ","); got == "slow,write" {
			break
		}
	}
	// An unmapped upstream tool is listed when filtering is off.
	res, text := w.call(t, "later", nil)
	if !res.IsError || !strings.HasPrefix(text, "unmapped_tool: ") {
		t.Fatalf("later: %q", text)
	}
}

func TestListUnfiltered(t *testing.T) {
	w := newWorld(t, strings.Replace(testConfig, `"passthrough"`, `"filter_list": false, "passthrough"`, 1))
	res, err := w.cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 4 {
		t.Fatalf("unfiltered tools/list: %v %d", err, len(res.Tools))
	}
}

// TestLogAndProgress: an upstream's log messages reach an agent that set
// a level, and its progress notifications reach the agent whose call
// carried the token.
func TestLogAndProgress(t *testing.T) {
	w := newWorld(t, testConfig)
	ctx := context.Background()
	if err := w.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"path": "-", "text": "hi"}}
	params.SetProgressToken("tok-1")
	if res, err := w.cs.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("echo: %v %v", err, res)
	}
	got := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !got["log echoing hi"] || !got["progress 1/2"] {
		select {
		case m := <-w.notify:
			got[m] = true
		case <-deadline:
			t.Fatalf("the agent got %v", got)
		}
	}
}

// TestStopCancelsCall: a STOP during a slow call cancels it upstream; the
// agent gets the STOP's reason; later calls are denied until a RESUME.
func TestStopCancelsCall(t *testing.T) {
	w := newWorld(t, testConfig)
	type answer struct {
		res  *mcp.CallToolResult
		text string
	}
	done := make(chan answer, 1)
	go func() {
		res, text := w.call(t, "slow", map[string]any{"path": "/allowed/slow.txt"})
		done <- answer{res, text}
	}()
	select {
	case <-w.files.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call never reached the upstream")
	}
	ctx := context.Background()
	stop, err := w.owner.Stop(ctx, client.StopSpec{Workflow: "wf_gate", Reason: "the agent is writing too much"})
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the STOP did not end the call")
	}
	if !a.res.IsError || !strings.HasPrefix(a.text, "workflow_stopped: ") || !strings.Contains(a.text, "the agent is writing too much") {
		t.Fatalf("stopped call: %q", a.text)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.files.cancelledCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if w.files.cancelledCount() != 1 {
		t.Fatal("the upstream call was not cancelled")
	}
	rs, _ := w.receipts(t)
	if o := rs[len(rs)-1]; o.Result != statement.ResultFailure || !strings.Contains(o.SideEffects["result"], "STOP") {
		t.Fatalf("outcome of the stopped call: %+v", o)
	}
	// While the STOP is in force, calls are denied and not forwarded.
	before := w.files.count()
	res, text := w.call(t, "write", map[string]any{"path": "/allowed/x.txt", "text": "x"})
	if !res.IsError || !strings.HasPrefix(text, "workflow_stopped: ") || w.files.count() != before {
		t.Fatalf("a call under a STOP: %q", text)
	}
	if _, err := w.owner.Append(ctx, &statement.ResumeDoc{ResumeID: "resume_1", Workflow: "wf_gate", StopRef: stop.Statement.ID()}); err != nil {
		t.Fatal(err)
	}
	if res, text := w.call(t, "write", map[string]any{"path": "/allowed/x.txt", "text": "x"}); res.IsError {
		t.Fatalf("after RESUME: %q", text)
	}
}

// TestAgentCancels: the agent's own cancellation reaches the upstream and
// the outcome records it.
func TestAgentCancels(t *testing.T) {
	w := newWorld(t, testConfig)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := w.cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"path": "/allowed/s"}})
		errc <- err
	}()
	<-w.files.started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rs, _ := w.receipts(t)
		if len(rs) == 2 && rs[1].Result == statement.ResultFailure && rs[1].SideEffects["result"] == "cancelled by the agent" {
			w.files.mu.Lock()
			c := w.files.cancelled
			w.files.mu.Unlock()
			if c == 1 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the cancellation was not forwarded and recorded")
}

// TestLedgerRestart: with the ledger's server down, calls are refused and
// never forwarded; once it is back (the same data folder, a new server on
// the same address) they pass again.
func TestLedgerRestart(t *testing.T) {
	w := newWorld(t, testConfig)
	if res, text := w.call(t, "write", map[string]any{"path": "/allowed/1", "text": "1"}); res.IsError {
		t.Fatal(text)
	}
	addr := w.lg.HTTP.Listener.Addr().String()
	w.lg.HTTP.CloseClientConnections()
	w.lg.HTTP.Close()
	before := w.files.count()
	res, text := w.call(t, "write", map[string]any{"path": "/allowed/2", "text": "2"})
	if !res.IsError || !strings.HasPrefix(text, "ledger_unavailable: ") || w.files.count() != before {
		t.Fatalf("ledger down: %q (upstream calls %d -> %d)", text, before, w.files.count())
	}
	restartLedger(t, w.lg, addr)
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, text := w.call(t, "write", map[string]any{"path": "/allowed/2", "text": "2"})
		if !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate did not recover after the ledger restarted: %q", text)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, ok := w.files.wrote("/allowed/2"); !ok {
		t.Fatal("the call after the restart did not reach the upstream")
	}
}

// TestConfigAgainstGrant: a reserve of a limit the grant does not have is
// refused at start; a grant that is not the key's too.
func TestConfigAgainstGrant(t *testing.T) {
	w := newWorld(t, testConfig)
	_, _, url := startUpstream(t)
	for _, c := range []struct {
		config string
		key    ed25519.PrivateKey
		want   string
	}{
		{`{"tools": {"write": {"capability": "fs.write", "target": "fs/{path}", "reserve": {"usd": 1}}}}`, w.agent, "not a limit"},
		{testConfig, w.lg.KeyOf(w.owner), "not the grantee"},
	} {
		cfg, err := gate.ParseConfig([]byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		_, err = gate.New(context.Background(), gate.Options{Config: cfg, Runtime: client.NewRuntime(w.lg.NewClient(), c.key, "", nil),
			Grant: w.grant, Upstreams: []gate.Upstream{{URL: url}}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want %q", err, c.want)
		}
	}
}

// restartLedger closes lg's ledger, opens its data folder again and
// serves it on addr, as a restarted server would.
func restartLedger(t *testing.T, lg *servertest.Log, addr string) {
	t.Helper()
	if err := lg.Ledger.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(lg.Dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lg.Ledger = l
	var ln net.Listener
	for i := 0; ; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if i == 50 {
			t.Fatalf("serving the ledger again on %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	hs := &http.Server{Handler: server.New(l, server.Options{}).Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
}

// TestConcurrentCalls: 32 agents' calls at once, some out of scope. The
// in-scope ones pass, the others are refused, and the refused ones (sent
// alone, since the gate sees they are out of scope) cost no other call's
// receipt a seq_mismatch.
func TestConcurrentCalls(t *testing.T) {
	w := newWorld(t, `{"tools": {"write": {"capability": "fs.write", "target": "fs/{path}", "inert": ["text"]}}}`)
	var wg sync.WaitGroup
	texts := make([]string, 32)
	errs := make([]bool, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := "allowed"
			if i%8 == 3 {
				dir = "secret"
			}
			res, err := w.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": fmt.Sprintf("/%s/%d", dir, i), "text": "x"}})
			if err != nil {
				t.Error(err)
				return
			}
			errs[i], texts[i] = res.IsError, res.Content[0].(*mcp.TextContent).Text
		}()
	}
	wg.Wait()
	for i := range 32 {
		if want := i%8 == 3; errs[i] != want || (want && !strings.HasPrefix(texts[i], "out_of_scope: ")) {
			t.Errorf("call %d: isError %v %q", i, errs[i], texts[i])
		}
	}
	rs, denials := w.receipts(t)
	if len(rs) != 2*28 || len(denials) != 4 {
		t.Fatalf("%d receipts and %d denials, want 56 and 4", len(rs), len(denials))
	}
	for _, d := range denials {
		if d.ReasonCode != "out_of_scope" {
			t.Errorf("a DENIAL %s: %s", d.ReasonCode, d.Reason)
		}
	}
}
