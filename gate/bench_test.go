package gate_test

import (
	"context"
	"fmt"
	"io"
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

// BenchmarkGate shows, in one run, what the checks of a tool call cost:
// "single" is a call with one target (one pending and one outcome
// receipt), "targets3" a call with three (three of each, sent together),
// "single-pinned" the single-target call of a tool whose definition is
// pinned (the pin is checked when the tools are listed, not per call),
// and "pin-check" the hash of one tool definition, which is what a pin
// adds to each tools/list and list_changed re-check, per mapped tool.
func BenchmarkGate(b *testing.B) {
	for _, mode := range []string{"single", "targets3", "single-pinned"} {
		b.Run("c1/"+mode, func(b *testing.B) { benchGate(b, 1, mode) })
	}
	b.Run("pin-check", func(b *testing.B) {
		schema := map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string", "description": "the file"}, "content": map[string]any{"type": "string"}},
			"required": []any{"path", "content"}}
		for i := 0; i < b.N; i++ {
			if _, err := gate.DefinitionHash("write_file", "Create a new file or completely overwrite an existing file with new content.", schema); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type threeArgs struct {
	A string `json:"a"`
	B string `json:"b"`
	C string `json:"c"`
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
	mcp.AddTool(up, &mcp.Tool{Name: "move3"}, func(ctx context.Context, req *mcp.CallToolRequest, a threeArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok " + a.A}}}, nil, nil
	})
	url := serveUpstream(b, up)
	config := `{"tools":{"write":{"capability":"fs.write","target":"fs/{path}","inert":["text"]},
 "move3":{"capability":"fs.write","targets":["fs/{a}","fs/{b}","fs/{c}"]}},"passthrough":["echo"]}`
	if mode == "single-pinned" {
		pinned, _, err := gate.Pin(ctx, []byte(config), []gate.Upstream{{URL: url}}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		config = string(pinned)
	}
	cfg, err := gate.ParseConfig([]byte(config))
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
	switch mode {
	case "passthrough":
		tool = "echo"
	case "targets3":
		tool = "move3"
	}
	args := func(i int) map[string]any {
		if tool == "move3" {
			return map[string]any{"a": fmt.Sprintf("/d/%d/a", i), "b": fmt.Sprintf("/d/%d/b", i), "c": fmt.Sprintf("/d/%d/c", i)}
		}
		return map[string]any{"path": fmt.Sprintf("/d/%d", i)}
	}
	call := func(cs *mcp.ClientSession, i int) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args(i)})
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
