package gate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestEndToEndGoClient drives the custody binary with the official Go
// MCP client (the Go SDK's CommandTransport spawns `custody gate` as a
// host would) in front of the reference filesystem server: pins written
// by `custody gate pin`, a drifted pin hiding its tool, two-path and
// symbolic-link calls, a write held for approval (approved, then
// rejected), and a JSON-RPC batch on the binary's stdio.
func TestEndToEndGoClient(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := mcpParts(t)
	bin := buildCustody(t)
	ctx := context.Background()
	lg := servertest.Start(t, server.Options{})
	owner := lg.Principal("user:alice")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"allowed", "other", "allowed/big"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fsTarget := "fs/" + strings.TrimLeft(root, "/")
	pub, priv := servertest.Key(t)
	bob := lg.Principal("user:bob")
	if _, err := owner.Confirm(ctx, client.Grant{ID: "confirm_go", Workflow: "wf_go", Grantee: "agent:go", GranteeKey: pub,
		Targets: []string{fsTarget + "/allowed/*"}, Capabilities: []string{"fs.read", "fs.write"},
		Limits: map[string]int64{"writes": 10}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"fs.write"}, Targets: []string{fsTarget + "/allowed/big/*"},
			Approvers: []string{"user:bob"}, Quorum: 1, TTLSeconds: 600}}}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	keyFile, vkeyFile, cfgFile := filepath.Join(work, "agent.pem"), filepath.Join(work, "log.vkey"), filepath.Join(work, "gate.json")
	if err := sign.WritePrivateKeyFile(keyFile, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vkeyFile, []byte(lg.VKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte(e2eConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	fsServer := []string{"node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root}

	// custody gate pin writes the pins of the filesystem server's tools.
	pin := exec.Command(bin, append([]string{"gate", "pin", "--config", cfgFile, "--"}, fsServer...)...)
	out, err := pin.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "write_file (secure-filesystem-server): pinned sha256:") {
		t.Fatalf("custody gate pin: %v\n%s", err, out)
	}
	var pinned struct {
		Tools map[string]map[string]any `json:"tools"`
	}
	data, _ := os.ReadFile(cfgFile)
	if err := json.Unmarshal(data, &pinned); err != nil || pinned.Tools["write_file"]["pin"] == nil || pinned.Tools["get-sum"]["pin"] != nil {
		t.Fatalf("the pinned configuration: %v\n%s", err, data)
	}
	// A drift: read_text_file's pin no longer matches what the server says.
	drifted := strings.Replace(string(data), pinned.Tools["read_text_file"]["pin"].(string), "sha256:"+strings.Repeat("0", 64), 1)
	if err := os.WriteFile(cfgFile, []byte(drifted), 0o644); err != nil {
		t.Fatal(err)
	}

	gateArgs := append([]string{"gate", "--ledger", lg.URL, "--log-key", vkeyFile, "--key", keyFile, "--grant", "confirm_go",
		"--config", cfgFile, "--"}, fsServer...)
	stderr := &testWriter{t: t}
	cmd := exec.Command(bin, gateArgs...)
	cmd.Stderr = stderr
	cl := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != "custody-gate" {
		t.Fatalf("serverInfo: %+v", si)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "write_file") || !strings.Contains(got, "move_file") || strings.Contains(got, "read_text_file") {
		t.Fatalf("tools/list (read_text_file's pin drifted): %s", got)
	}
	call := func(tool string, args map[string]any) (bool, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.IsError, res.Content[0].(*mcp.TextContent).Text
	}
	a := filepath.Join(root, "allowed", "a.txt")
	if bad, text := call("write_file", map[string]any{"path": a, "content": "hello"}); bad {
		t.Fatalf("an allowed write: %s", text)
	}
	if bad, text := call("read_text_file", map[string]any{"path": a}); !bad || !strings.HasPrefix(text, "tool_hidden: ") || !strings.Contains(text, "drifted from its pin") {
		t.Fatalf("a call of the drifted tool: %v %s", bad, text)
	}
	if bad, text := call("move_file", map[string]any{"source": a, "destination": filepath.Join(root, "other", "a.txt")}); !bad || !strings.HasPrefix(text, "out_of_scope: ") {
		t.Fatalf("a move out of the grant: %v %s", bad, text)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatal("the refused move moved the file")
	}
	if err := os.Symlink(filepath.Join(root, "other"), filepath.Join(root, "allowed", "out")); err != nil {
		t.Fatal(err)
	}
	if bad, text := call("write_file", map[string]any{"path": filepath.Join(root, "allowed", "out", "x.txt"), "content": "x"}); !bad || !strings.HasPrefix(text, "out_of_scope: ") {
		t.Fatalf("a write through a linked folder: %v %s", bad, text)
	}
	if _, err := os.Stat(filepath.Join(root, "other", "x.txt")); !os.IsNotExist(err) {
		t.Fatal("the write through the linked folder happened")
	}
	// A write the grant's approval rule holds: the agent is told who must
	// approve; bob approves and the write happens; then bob rejects one,
	// and it does not.
	answer := func(reject bool) {
		go func() {
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				list, err := lg.NewClient().Approvals(ctx, "user:bob", "wf_go")
				if err != nil || len(list.Held) == 0 {
					continue
				}
				if _, err := bob.Approve(ctx, list.Held[0].ReceiptID, reject, "reviewed"); err != nil {
					t.Errorf("approve: %v", err)
				}
				return
			}
			t.Error("the write was never held")
		}()
	}
	big := filepath.Join(root, "allowed", "big", "h.txt")
	answer(false)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": big, "content": "approved"},
		Meta: mcp.Meta{"progressToken": "held-1"}})
	if err != nil || res.IsError {
		t.Fatalf("an approved write: %v %+v", err, res)
	}
	if b, err := os.ReadFile(big); err != nil || string(b) != "approved" {
		t.Fatalf("the approved write did not happen: %v", err)
	}
	answer(true)
	rejected := filepath.Join(root, "allowed", "big", "r.txt")
	if bad, text := call("write_file", map[string]any{"path": rejected, "content": "no"}); !bad || !strings.HasPrefix(text, "approval_rejected: ") {
		t.Fatalf("a rejected write: %v %s", bad, text)
	}
	if _, err := os.Stat(rejected); !os.IsNotExist(err) {
		t.Fatal("the rejected write happened")
	}
	cs.Close()

	// The same binary on raw stdio: a batch is answered -32600 and the
	// session goes on.
	raw := exec.Command(bin, gateArgs...)
	raw.Stderr = stderr
	in, _ := raw.StdinPipe()
	outp, _ := raw.StdoutPipe()
	if err := raw.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); raw.Process.Kill(); raw.Wait() }()
	sc := bufio.NewScanner(outp)
	sc.Buffer(nil, 4<<20)
	next := func() map[string]any {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("no answer from the gate: %v", sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
	if m := next(); fmt.Sprint(m["error"].(map[string]any)["code"]) != "-32600" {
		t.Fatalf("a batch: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if m := next(); m["id"] != float64(3) || m["result"] == nil {
		t.Fatalf("a ping after the batch: %v", m)
	}

	// The log: the allowed write, the refused move's two pendings, and
	// the gate's own refusal of the hidden tool.
	var refusals int
	for i := uint64(0); i < lg.Ledger.Head().Size; i++ {
		e, err := lg.Ledger.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := e.Statement.(*statement.DenialDoc); ok && d.ReasonCode == "out_of_scope" {
			refusals++
		}
	}
	if refusals < 3 {
		t.Fatalf("%d out_of_scope DENIALs, want at least 3 (the move, the linked write, the hidden tool's refusal)", refusals)
	}
}

// TestEndToEndUnavailableTS: a newcomer's mistake (a relative --config
// path, resolved in a folder the host chose) with the official
// TypeScript client as the host: the handshake completes and the call
// is answered with what is wrong and how to fix it, where before the
// host saw only "Connection closed".
func TestEndToEndUnavailableTS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := mcpParts(t)
	bin := buildCustody(t)
	_, priv := servertest.Key(t)
	work := t.TempDir()
	keyFile := filepath.Join(work, "agent.pem")
	if err := sign.WritePrivateKeyFile(keyFile, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	lg := servertest.Start(t, server.Options{})
	vkeyFile := filepath.Join(work, "log.vkey")
	if err := os.WriteFile(vkeyFile, []byte(lg.VKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, dir, []string{bin, "gate", "--ledger", lg.URL, "--log-key", vkeyFile, "--key", keyFile,
		"--grant", "confirm_x", "--config", "relative/gate.json",
		"--", "node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), work})
	isErr, text := a.call("write_file", map[string]any{"path": "/x", "content": "x"})
	if !isErr || !strings.HasPrefix(text, "gate_unavailable: custody gate could not start: ") || !strings.Contains(text, "relative/gate.json") || !strings.Contains(text, "give the absolute path") {
		t.Fatalf("the host was told: %v %s", isErr, text)
	}
	a.wait(first(a.send(map[string]any{"op": "close"})))
}
