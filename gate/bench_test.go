package gate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/gate"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// BenchmarkGateCall measures a tools/call through the gate: "gated" writes
// a pending and an outcome receipt to a ledger served on loopback HTTP
// (fsynced, verified answers) around the upstream call; "passthrough"
// forwards the same call ungated, so the difference is what the gate adds.
// "c1" is one call at a time, "c32" 32 concurrent agents' calls. Each
// reports calls/s; ns/op is wall time per call (per 32 calls' worth of
// throughput at c32).
func BenchmarkGateCall(b *testing.B) {
	for _, conc := range []int{1, 32} {
		for _, mode := range []string{"passthrough", "gated"} {
			b.Run(fmt.Sprintf("c%d/%s", conc, mode), func(b *testing.B) { benchGate(b, conc, mode) })
		}
	}
}

func benchGate(b *testing.B, conc int, mode string) {
	ctx := context.Background()
	lg := servertest.Start(b, server.Options{})
	owner := lg.Principal("user:alice")
	pub, priv := servertest.Key(b)
	if _, err := owner.Confirm(ctx, client.Grant{ID: "confirm_bench", Workflow: "wf_bench", Grantee: "agent:bench", GranteeKey: pub,
		Targets: []string{"fs/*"}, Capabilities: []string{"fs.write"}, TTL: time.Hour, Revocable: true}); err != nil {
		b.Fatal(err)
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "upstream"}, nil)
	for _, name := range []string{"write", "echo"} {
		mcp.AddTool(up, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok " + a.Path}}}, nil, nil
		})
	}
	url := serveUpstream(b, up)
	cfg, err := gate.ParseConfig([]byte(`{"tools":{"write":{"capability":"fs.write","target":"fs/{path}","inert":["text"]}},"passthrough":["echo"]}`))
	if err != nil {
		b.Fatal(err)
	}
	g, err := gate.New(ctx, gate.Options{Config: cfg, Runtime: client.NewRuntime(lg.NewClient(), priv, "agent:bench", nil),
		Grant: "confirm_bench", Upstreams: []gate.Upstream{{URL: url}}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	// Each agent has its own session, as 32 agents (or one agent's 32
	// concurrent calls) would.
	sessions := make([]*mcp.ClientSession, conc)
	for i := range sessions {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := g.Server().Connect(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
		if sessions[i], err = mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil); err != nil {
			b.Fatal(err)
		}
		defer sessions[i].Close()
	}
	tool := "write"
	if mode == "passthrough" {
		tool = "echo"
	}
	call := func(cs *mcp.ClientSession, i int) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"path": fmt.Sprintf("/d/%d", i)}})
		if err != nil || res.IsError {
			b.Errorf("call: %v %v", err, res)
		}
	}
	call(sessions[0], 0) // warm the connections
	b.ResetTimer()
	start := time.Now()
	work := make(chan int)
	done := make(chan struct{})
	for _, cs := range sessions {
		go func() {
			for i := range work {
				call(cs, i)
			}
			done <- struct{}{}
		}()
	}
	for i := 0; i < b.N; i++ {
		work <- i
	}
	close(work)
	for range sessions {
		<-done
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
