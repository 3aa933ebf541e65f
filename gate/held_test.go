package gate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/gate"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

// TestHeldCall: a tool call whose pending receipt an approval rule holds
// (DESIGN §7) waits in the gate, which tells the agent who must approve
// and where (a log message and progress), and runs it only once the gate
// has verified the APPROVAL itself; a rejection is answered
// approval_rejected and a call nobody answers approval_timeout, neither
// forwarded, each with a failure outcome whose error starts with the
// code. The pending receipt carries params_sha256 of the arguments.
func TestHeldCall(t *testing.T) {
	ctx := context.Background()
	lg := servertest.Start(t, server.Options{})
	alice, bob := lg.Principal("user:alice"), lg.Principal("user:bob")
	pub, priv := servertest.Key(t)
	if _, err := alice.Confirm(ctx, client.Grant{ID: "confirm_held", Workflow: "wf_held", Grantee: "agent:held", GranteeKey: pub,
		Targets: []string{"fs/allowed/*"}, Capabilities: []string{"fs.write"}, Limits: map[string]int64{"writes": 10}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "writes", Capabilities: []string{"fs.write"}, Targets: []string{"fs/allowed/big/*"},
			Approvers: []string{"user:bob"}, Quorum: 1, TTLSeconds: 600}}}); err != nil {
		t.Fatal(err)
	}
	files, _, url := startUpstream(t)
	cfg, err := gate.ParseConfig([]byte(`{"tools": {"write": {"capability": "fs.write", "target": "fs/{path}", "inert": ["text"], "reserve": {"writes": 1}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(ctx, gate.Options{Config: cfg, Runtime: client.NewRuntime(lg.NewClient(), priv, "agent:held", nil), Grant: "confirm_held",
		Upstreams: []gate.Upstream{{URL: url}}, StreamTimeout: 2 * time.Second, ApprovalWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := g.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var told []string
	agent := mcp.NewClient(&mcp.Implementation{Name: "agent"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			told = append(told, fmt.Sprint(req.Params.Data))
			mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			told = append(told, "progress: "+req.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := agent.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// answer approves or rejects the next receipt held in the workflow.
	answer := func(reject bool) {
		go func() {
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				list, err := lg.NewClient().Approvals(ctx, "user:bob", "wf_held")
				if err != nil || len(list.Held) == 0 {
					continue
				}
				if _, err := bob.Approve(ctx, list.Held[0].ReceiptID, reject, "looked at it"); err != nil {
					t.Errorf("approve: %v", err)
				}
				return
			}
			t.Error("the call was never held")
		}()
	}
	call := func(path string) (bool, string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": path, "text": "t"},
			Meta: mcp.Meta{"progressToken": "p-" + path}})
		if err != nil {
			t.Fatal(err)
		}
		return res.IsError, res.Content[0].(*mcp.TextContent).Text
	}

	answer(false)
	if bad, text := call("/allowed/big/a.txt"); bad {
		t.Fatalf("an approved call: %s", text)
	}
	if _, ok := files.wrote("/allowed/big/a.txt"); !ok {
		t.Fatal("the approved call did not reach the upstream")
	}
	mu.Lock()
	all := strings.Join(told, "\n")
	mu.Unlock()
	if !strings.Contains(all, "is held for approval") || !strings.Contains(all, "user:bob") || !strings.Contains(all, "custody approve --receipt") || !strings.Contains(all, "progress: custody:") {
		t.Fatalf("the agent was not told who must approve and where:\n%s", all)
	}

	answer(true)
	if bad, text := call("/allowed/big/b.txt"); !bad || !strings.HasPrefix(text, "approval_rejected: ") || !strings.Contains(text, "user:bob") {
		t.Fatalf("a rejected call: %v %s", bad, text)
	}
	if _, ok := files.wrote("/allowed/big/b.txt"); ok {
		t.Fatal("the rejected call reached the upstream")
	}

	g2, err := gate.New(ctx, gate.Options{Config: cfg, Runtime: client.NewRuntime(lg.NewClient(), priv, "agent:held", nil), Grant: "confirm_held",
		Upstreams: []gate.Upstream{{URL: url}}, StreamTimeout: 2 * time.Second, ApprovalWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	st2, ct2 := mcp.NewInMemoryTransports()
	if _, err := g2.Server().Connect(ctx, st2, nil); err != nil {
		t.Fatal(err)
	}
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	res, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": "/allowed/big/c.txt", "text": "t"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "approval_timeout: ") {
		t.Fatalf("a call nobody answers: %v %+v", err, res)
	}

	// The log: each held pending carries params_sha256; the approved one
	// has a success outcome, the others failures naming the code.
	var outcomes []string
	for i := uint64(0); i < lg.Ledger.Head().Size; i++ {
		e, err := lg.Ledger.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := e.Statement.(*statement.ReceiptDoc)
		if !ok {
			continue
		}
		if r.IsPending() && r.ParamsSHA256 == "" {
			t.Errorf("pending %s has no params_sha256", r.ReceiptID)
		}
		if !r.IsPending() {
			code, _, _ := strings.Cut(r.Error, ":")
			outcomes = append(outcomes, r.Result+" "+code)
		}
	}
	if got := strings.Join(outcomes, ","); got != "success ,failure approval_rejected,failure approval_timeout" {
		t.Fatalf("outcomes: %s", got)
	}
}
