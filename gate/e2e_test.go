package gate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// mcpParts installs (once, cached under .cache/mcp) the npm parts the
// end-to-end test drives: the reference filesystem and everything
// servers and the TypeScript SDK. Without node or npm the test skips on
// a developer's machine and fails under CI.
func mcpParts(t *testing.T) string {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		testenv.Need(t, format, args...)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			need("%s is not installed: the MCP end-to-end test needs it", tool)
		}
	}
	out, err := exec.Command("bash", "../scripts/mcp.sh").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		need("scripts/mcp.sh: %v %s", err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// buildCustody builds the custody command into a temporary folder.
func buildCustody(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "custody")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/custodylog/custody/cmd/custody")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building custody: %v", err)
	}
	return bin
}

// startOnFreePort starts the command cmdFor makes for a free loopback
// port and waits until the port answers. Another process on the machine
// may take the port between the choice and the bind: then the command
// exits, and it is tried again on another port.
func startOnFreePort(t *testing.T, what string, cmdFor func(port string) *exec.Cmd) string {
	t.Helper()
	for try := 0; try < 5; try++ {
		port := freePort(t)
		cmd := cmdFor(port)
		cmd.Stderr = &testWriter{t: t}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited })
		for i := 0; i < 600; i++ {
			c, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				c.Close()
				select {
				case <-exited: // the port is someone else's
				default:
					return port
				}
			}
			select {
			case <-exited:
				i = 600 // it could not bind: another port
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	t.Fatalf("%s did not start", what)
	return ""
}

// freePort returns a free port below the kernel's ephemeral range. The
// node servers listen on every address ([::]), and such a bind fails with
// EADDRINUSE while any socket, even a closed connection in TIME_WAIT, has
// the port: when other packages' tests open tens of thousands of loopback
// connections (the reader attacks), a port taken from the ephemeral range
// is nearly always in some such socket's hands.
func freePort(t *testing.T) string {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				lo = v
			}
		}
	}
	for range 200 {
		port := strconv.Itoa(10000 + rand.IntN(lo-10000))
		if ln, err := net.Listen("tcp", ":"+port); err == nil {
			ln.Close()
			return port
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// agentProc is the TypeScript agent, driven line by line.
type agentProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	mu    sync.Mutex
	next  int
	waits map[int]chan map[string]any
	prog  map[int]chan map[string]any
	ev    chan map[string]any
}

func startAgent(t *testing.T, dir string, gateArgs []string) *agentProc {
	t.Helper()
	return startAgentArgs(t, dir, append([]string{"--"}, gateArgs...))
}

func startAgentArgs(t *testing.T, dir string, agentArgs []string) *agentProc {
	t.Helper()
	args := append([]string{"testdata/agent.mjs"}, agentArgs...)
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), "CUSTODY_MCP_DIR="+dir)
	cmd.Stderr = &testWriter{t: t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{t: t, cmd: cmd, in: in, waits: map[int]chan map[string]any{}, prog: map[int]chan map[string]any{}, ev: make(chan map[string]any, 64)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Logf("agent: %s", sc.Text())
				continue
			}
			id, ok := m["id"].(float64)
			if !ok {
				a.ev <- m
				continue
			}
			a.mu.Lock()
			ch := a.waits[int(id)]
			if _, isProgress := m["progress"]; isProgress {
				ch = a.prog[int(id)]
			}
			a.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}()
	select {
	case m := <-a.ev:
		if m["event"] != "connected" {
			t.Fatalf("agent: %v", m)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the agent did not connect to the gate")
	}
	return a
}

// send sends a request and returns the channels of its answer and its
// progress notifications.
func (a *agentProc) send(req map[string]any) (answer, progress chan map[string]any) {
	a.mu.Lock()
	a.next++
	id := a.next
	answer, progress = make(chan map[string]any, 1), make(chan map[string]any, 64)
	a.waits[id], a.prog[id] = answer, progress
	a.mu.Unlock()
	req["id"] = id
	b, _ := json.Marshal(req)
	if _, err := a.in.Write(append(b, '\n')); err != nil {
		a.t.Fatal(err)
	}
	return answer, progress
}

func (a *agentProc) wait(ch chan map[string]any) map[string]any {
	a.t.Helper()
	select {
	case m := <-ch:
		if e, ok := m["error"]; ok {
			a.t.Fatalf("agent: %v", e)
		}
		return m
	case <-time.After(90 * time.Second):
		a.t.Fatal("no answer from the agent")
	}
	return nil
}

// call makes a tool call and returns isError and the text.
func (a *agentProc) call(tool string, args map[string]any) (bool, string) {
	a.t.Helper()
	ch, _ := a.send(map[string]any{"op": "call", "tool": tool, "args": args})
	m := a.wait(ch)
	return m["isError"] == true, fmt.Sprint(m["text"])
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// e2eConfig maps tools of the reference filesystem and everything
// servers: every argument of each is in a target or inert, the paths are
// resolved by the gate (realpath), and the everything server's resources
// are gated.
const e2eConfig = `{"tools": {
	  "write_file": {"capability": "fs.write", "target": "fs/{path}", "paths": {"path": "realpath"}, "inert": ["content"], "reserve": {"writes": 1}},
	  "read_text_file": {"capability": "fs.read", "target": "fs/{path}", "paths": {"path": "realpath"}, "inert": ["head", "tail"]},
	  "move_file": {"capability": "fs.write", "targets": ["fs/{source}", "fs/{destination}"], "paths": {"source": "realpath", "destination": "realpath"}},
	  "trigger-long-running-operation": {"capability": "ops.run", "target": "ops/long", "step": "long", "inert": ["duration", "steps"]},
	  "echo": {"capability": "ops.run", "target": "ops/echo", "inert": ["message"]},
	  "get-sum": {"capability": "ops.run", "target": "ops/sum/{a}/{b}"},
	  "trigger-sampling-request": {"capability": "ops.run", "target": "ops/sample", "inert": ["prompt", "maxTokens"]}
	 },
	 "resources": [{"uri": "demo://resource/{path}", "capability": "ops.run", "target": "ops/resource/{path}"}],
	 "prompts": true,
	 "passthrough": ["list_allowed_directories"]}`

// TestEndToEndNPM drives custody gate with real MCP parts nobody here
// wrote: the TypeScript SDK's Client as the agent, over stdio, and the
// reference filesystem server (spawned over stdio) and everything server
// (over streamable HTTP) upstream.
func TestEndToEndNPM(t *testing.T) {
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
	for _, d := range []string{"allowed", "other"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fsTarget := "fs/" + strings.TrimLeft(root, "/")
	pub, priv := servertest.Key(t)
	grant := "confirm_e2e"
	if _, err := owner.Confirm(ctx, client.Grant{ID: grant, Workflow: "wf_e2e", Grantee: "agent:e2e", GranteeKey: pub,
		Targets: []string{fsTarget + "/allowed/*", "ops/*"}, Capabilities: []string{"fs.read", "fs.write", "ops.run"},
		Limits: map[string]int64{"writes": 2}, TTL: time.Hour, Revocable: true}); err != nil {
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
	cfg := e2eConfig
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	// server-everything over streamable HTTP.
	port := startOnFreePort(t, "server-everything", func(port string) *exec.Cmd {
		every := exec.Command("node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
		every.Env = append(os.Environ(), "PORT="+port)
		return every
	})

	a := startAgent(t, dir, []string{bin, "gate", "--ledger", lg.URL, "--log-key", vkeyFile, "--key", keyFile,
		"--grant", grant, "--config", cfgFile, "--stream-timeout", "2s",
		"--upstream-url", "http://127.0.0.1:" + port + "/mcp",
		"--", "node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root})

	// tools/list shows what the grant could allow, from both upstreams.
	m := a.wait(first(a.send(map[string]any{"op": "list"})))
	tools := fmt.Sprint(m["tools"])
	for _, want := range []string{"write_file", "read_text_file", "move_file", "list_allowed_directories", "trigger-long-running-operation", "echo", "get-sum"} {
		if !strings.Contains(tools, want) {
			t.Errorf("tools/list lacks %s: %s", want, tools)
		}
	}
	for _, hidden := range []string{"create_directory", "edit_file"} {
		if strings.Contains(tools, hidden) {
			t.Errorf("tools/list shows %s, which the grant never allows: %s", hidden, tools)
		}
	}

	// Resources and resource templates of the upstream are listed; reads
	// are steps under the resources rule. Prompts pass (configured).
	m = a.wait(first(a.send(map[string]any{"op": "resources"})))
	var docURI string
	for _, u := range m["resources"].([]any) {
		if s := fmt.Sprint(u); strings.HasPrefix(s, "demo://resource/static/document/") {
			docURI = s
			break
		}
	}
	if docURI == "" || !strings.Contains(fmt.Sprint(m["templates"]), "demo://resource/dynamic/text/{") {
		t.Fatalf("resources through the gate: %v", m)
	}
	if m = a.wait(first(a.send(map[string]any{"op": "read", "uri": docURI}))); fmt.Sprint(m["text"]) == "" {
		t.Fatalf("reading %s through the gate: %v", docURI, m)
	}
	if m = a.wait(first(a.send(map[string]any{"op": "read", "uri": "demo://resource/dynamic/text/7"}))); !strings.Contains(fmt.Sprint(m["text"]), "7") {
		t.Fatalf("reading a templated resource through the gate: %v", m)
	}
	if m = a.wait(first(a.send(map[string]any{"op": "prompts"}))); !strings.Contains(fmt.Sprint(m["prompts"]), "simple-prompt") {
		t.Fatalf("prompts through the gate: %v", m)
	}
	if m = a.wait(first(a.send(map[string]any{"op": "prompt", "name": "simple-prompt"}))); !strings.Contains(fmt.Sprint(m["text"]), "simple prompt") {
		t.Fatalf("a prompt through the gate: %v", m)
	}

	// An allowed call reaches the server and leaves a pending and an
	// outcome receipt.
	a1 := filepath.Join(root, "allowed", "a.txt")
	if isErr, text := a.call("write_file", map[string]any{"path": a1, "content": "hello"}); isErr {
		t.Fatalf("allowed write: %s", text)
	}
	if b, err := os.ReadFile(a1); err != nil || string(b) != "hello" {
		t.Fatalf("the allowed write did not happen: %v %q", err, b)
	}
	if isErr, text := a.call("read_text_file", map[string]any{"path": a1}); isErr || !strings.Contains(text, "hello") {
		t.Fatalf("allowed read: %s", text)
	}
	if isErr, text := a.call("list_allowed_directories", nil); isErr || !strings.Contains(text, root) {
		t.Fatalf("passthrough: %s", text)
	}

	// A tool that asks the agent's model (sampling) while it runs: the
	// gate carries the upstream's request to the agent and back.
	if isErr, text := a.call("trigger-sampling-request", map[string]any{"prompt": "what is 2+2"}); isErr || !strings.Contains(text, "sampled by the agent") || !strings.Contains(text, "what is 2+2") {
		t.Fatalf("sampling through the gate: %v %s", isErr, text)
	}

	// Out of scope: another path, another tool. Nothing happens upstream.
	other := filepath.Join(root, "other", "b.txt")
	if isErr, text := a.call("write_file", map[string]any{"path": other, "content": "no"}); !isErr || !strings.HasPrefix(text, "out_of_scope: ") {
		t.Fatalf("write to another path: %v %s", isErr, text)
	}
	newDir := filepath.Join(root, "allowed", "newdir")
	if isErr, text := a.call("create_directory", map[string]any{"path": newDir}); !isErr || !strings.HasPrefix(text, "unmapped_tool: ") {
		t.Fatalf("another tool: %v %s", isErr, text)
	}
	if isErr, text := a.call("get-sum", map[string]any{"a": 1, "b": 2}); isErr || !strings.Contains(text, "3") {
		t.Fatalf("get-sum: %v %s", isErr, text)
	}
	// A number the JavaScript server would read as another one.
	if isErr, text := a.call("get-sum", map[string]any{"a": 9007199254740993, "b": 0}); !isErr || !strings.HasPrefix(text, "bad_arguments: ") {
		t.Fatalf("get-sum beyond 2^53: %v %s", isErr, text)
	}

	// Two paths: a move out of the grant is refused on its destination
	// and nothing moves; a move inside it runs.
	mv := filepath.Join(root, "allowed", "mv.txt")
	if err := os.WriteFile(mv, []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	if isErr, text := a.call("move_file", map[string]any{"source": mv, "destination": filepath.Join(root, "other", "mv.txt")}); !isErr || !strings.HasPrefix(text, "out_of_scope: target "+fsTarget+"/other/mv.txt") {
		t.Fatalf("a move out of the grant: %v %s", isErr, text)
	}
	if _, err := os.Stat(mv); err != nil {
		t.Fatalf("the refused move moved the file: %v", err)
	}
	if isErr, text := a.call("move_file", map[string]any{"source": mv, "destination": filepath.Join(root, "allowed", "mv2.txt")}); isErr {
		t.Fatalf("a move inside the grant: %s", text)
	}
	// A symbolic link inside the granted folder to a file outside it:
	// the gate resolves the path, so the target is the file touched, and
	// the ledger refuses it. A relative path is refused before.
	secret := filepath.Join(root, "other", "secret.txt")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "allowed", "link.txt")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if isErr, text := a.call("read_text_file", map[string]any{"path": link}); !isErr || !strings.HasPrefix(text, "out_of_scope: ") || strings.Contains(text, "secret\n") {
		t.Fatalf("a read through a symbolic link out of the grant: %v %s", isErr, text)
	}
	if isErr, text := a.call("write_file", map[string]any{"path": link, "content": "overwritten"}); !isErr || !strings.HasPrefix(text, "out_of_scope: ") {
		t.Fatalf("a write through a symbolic link out of the grant: %v %s", isErr, text)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Fatal("the write through the link reached the file outside the grant")
	}
	if isErr, text := a.call("read_text_file", map[string]any{"path": "allowed/a.txt"}); !isErr || !strings.HasPrefix(text, "bad_arguments: ") || !strings.Contains(text, "absolute path") {
		t.Fatalf("a relative path: %v %s", isErr, text)
	}
	for _, p := range []string{other, newDir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s exists: a refused call had an effect", p)
		}
	}

	// The ledger down: nothing is forwarded. Then it comes back.
	addr := lg.HTTP.Listener.Addr().String()
	lg.HTTP.CloseClientConnections()
	lg.HTTP.Close()
	down := filepath.Join(root, "allowed", "down.txt")
	if isErr, text := a.call("write_file", map[string]any{"path": down, "content": "x"}); !isErr || !strings.HasPrefix(text, "ledger_unavailable: ") {
		t.Fatalf("ledger down: %v %s", isErr, text)
	}
	if _, err := os.Stat(down); !os.IsNotExist(err) {
		t.Fatal("a call was forwarded while the ledger was down")
	}
	restartLedger(t, lg, addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		isErr, text := a.call("echo", map[string]any{"message": "back"})
		if !isErr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate did not recover after the ledger restarted: %s", text)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A STOP during a slow call cancels it; progress reached the agent.
	ans, prog := a.send(map[string]any{"op": "call", "tool": "trigger-long-running-operation",
		"args": map[string]any{"duration": 60, "steps": 120}, "progress": true})
	select {
	case <-prog:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress notification reached the agent")
	}
	stopAt := time.Now()
	stop, err := owner.Stop(ctx, client.StopSpec{Workflow: "wf_e2e", Reason: "halt the long operation"})
	if err != nil {
		t.Fatal(err)
	}
	m = a.wait(ans)
	if m["isError"] != true || !strings.HasPrefix(fmt.Sprint(m["text"]), "workflow_stopped: ") || !strings.Contains(fmt.Sprint(m["text"]), "halt the long operation") {
		t.Fatalf("the stopped call: %v", m)
	}
	if d := time.Since(stopAt); d > 20*time.Second {
		t.Fatalf("the STOP took %s to end the call", d)
	}
	// Under the STOP, calls are denied; after the RESUME they pass.
	if isErr, text := a.call("echo", map[string]any{"message": "x"}); !isErr || !strings.HasPrefix(text, "workflow_stopped: ") {
		t.Fatalf("a call under the STOP: %v %s", isErr, text)
	}
	if _, err := owner.Append(ctx, &statement.ResumeDoc{ResumeID: "resume_e2e", Workflow: "wf_e2e", StopRef: stop.Statement.ID()}); err != nil {
		t.Fatal(err)
	}

	// Over budget: two writes are allowed; one is spent.
	c1, c2 := filepath.Join(root, "allowed", "c.txt"), filepath.Join(root, "allowed", "d.txt")
	if isErr, text := a.call("write_file", map[string]any{"path": c1, "content": "c"}); isErr {
		t.Fatalf("second write: %s", text)
	}
	if isErr, text := a.call("write_file", map[string]any{"path": c2, "content": "d"}); !isErr || !strings.HasPrefix(text, "limit_exceeded: ") {
		t.Fatalf("over budget: %v %s", isErr, text)
	}
	if _, err := os.Stat(c2); !os.IsNotExist(err) {
		t.Fatal("the over-budget write happened")
	}
	a.wait(first(a.send(map[string]any{"op": "close"})))

	// The same gate serving streamable HTTP on loopback, to a TypeScript
	// agent connecting by URL.
	gport := startOnFreePort(t, "custody gate --http", func(port string) *exec.Cmd {
		return exec.Command(bin, "gate", "--ledger", lg.URL, "--log-key", vkeyFile, "--key", keyFile,
			"--grant", grant, "--config", cfgFile, "--http", "127.0.0.1:"+port,
			"--", "node", filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root)
	})
	ha := startAgentArgs(t, dir, []string{"--url", "http://127.0.0.1:" + gport + "/"})
	if isErr, text := ha.call("read_text_file", map[string]any{"path": a1}); isErr || !strings.Contains(text, "hello") {
		t.Fatalf("a call over the gate's HTTP transport: %s", text)
	}
	if isErr, text := ha.call("read_text_file", map[string]any{"path": other}); !isErr || !strings.HasPrefix(text, "out_of_scope: ") {
		t.Fatalf("out of scope over HTTP: %v %s", isErr, text)
	}
	ha.wait(first(ha.send(map[string]any{"op": "close"})))

	// The receipts: every forwarded call has a pending then an outcome;
	// custody verify accepts the workflow's bundle.
	var pendings, outcomes int
	var last uint64
	size := lg.Ledger.Head().Size
	for i := uint64(0); i < size; i++ {
		e, err := lg.Ledger.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := e.Statement.(*statement.ReceiptDoc); ok {
			last = i
			if r.Result == statement.ResultPending {
				pendings++
			} else {
				outcomes++
				if r.Target == fsTarget+"/allowed/a.txt" && r.SideEffects["tool"] == "write_file" && (r.Result != statement.ResultSuccess || len(r.EvidenceRefs) != 1) {
					t.Errorf("outcome of the first write: %+v", r)
				}
				// The upstream by the name it gives itself, not npx/node.
				if r.SideEffects["tool"] == "write_file" && r.SideEffects["server"] != "secure-filesystem-server" {
					t.Errorf("the upstream recorded as %q", r.SideEffects["server"])
				}
			}
		}
	}
	if pendings < 5 || pendings != outcomes {
		t.Fatalf("%d pending and %d outcome receipts", pendings, outcomes)
	}
	b, err := lg.Ledger.Prove(last, true)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(work, "wf_e2e.bundle.json")
	if err := os.WriteFile(bundle, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "verify", bundle, "--log-key", vkeyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("custody verify: %v\n%s", err, out)
	}
	t.Logf("custody verify: %s", firstLine(string(out)))
}

func first(a, _ chan map[string]any) chan map[string]any { return a }

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
