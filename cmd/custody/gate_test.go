package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/gate"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
)

// TestGateUsage: missing flags, a bad configuration and a non-loopback
// --http are usage errors (exit 2) that name the input.
func TestGateUsage(t *testing.T) {
	cfg := t.TempDir() + "/gate.json"
	if err := os.WriteFile(cfg, []byte(`{"tools":{"w":{"capability":"fs write","target":"fs/{path}"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gate", "--ledger", "http://127.0.0.1:1"}, "--log-key is required"},
		{[]string{"gate", "--ledger", "http://127.0.0.1:1", "--log-key", "k", "--key", "k", "--grant", "g", "--config", cfg}, "no upstream"},
		{[]string{"gate", "--ledger", "http://127.0.0.1:1", "--log-key", "k", "--key", "k", "--grant", "g", "--config", cfg, "--http", "0.0.0.0:1", "--", "true"}, "loopback"},
		{[]string{"gate", "--ledger", "http://127.0.0.1:1", "--log-key", "k", "--key", "k", "--grant", "g", "--config", cfg, "--", "true"}, `tool "w": capability`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"custody"}, c.args...), &out, &errb)
		if code != clikit.ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestGateUnavailableAnswers: a gate that cannot start (a relative
// --config the host resolves elsewhere, a ledger down, a grant that is
// not the key's) still completes the MCP handshake on stdio and answers
// each call with what is wrong and how to fix it; before, the host saw
// only "Connection closed". It exits with the error once the host hangs
// up.
func TestGateUnavailableAnswers(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	owner := lg.Principal("user:alice")
	pub, priv := servertest.Key(t)
	if _, err := owner.Confirm(context.Background(), client.Grant{ID: "confirm_g", Workflow: "wf_g", Grantee: "agent:g", GranteeKey: pub,
		Targets: []string{"fs/*"}, Capabilities: []string{"fs.write"}, TTL: time.Hour, Revocable: true}); err != nil {
		t.Fatal(err)
	}
	_, other := servertest.Key(t)
	dir := t.TempDir()
	cfg, key, otherKey, vkey := filepath.Join(dir, "gate.json"), filepath.Join(dir, "agent.pem"), filepath.Join(dir, "other.pem"), filepath.Join(dir, "log.vkey")
	os.WriteFile(cfg, []byte(`{"tools":{"w":{"capability":"fs.write","target":"fs/{path}"}}}`), 0o644)
	os.WriteFile(vkey, []byte(lg.VKey+"\n"), 0o644)
	if err := sign.WritePrivateKeyFile(key, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := sign.WritePrivateKeyFile(otherKey, other, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		wants []string
		up    []string
	}{
		{"upstream fails", []string{"--ledger", lg.URL, "--key", key, "--grant", "confirm_g", "--config", cfg}, clikit.ExitFail,
			[]string{"connecting to upstream sh", "/no/such/folder does not exist", "check the upstream command after --"}, []string{"sh", "-c", "echo Error: /no/such/folder does not exist >&2; exit 1"}},
		{"relative config", []string{"--ledger", lg.URL, "--key", key, "--grant", "confirm_g", "--config", "no/such/gate.json"}, clikit.ExitUsage,
			[]string{"no/such/gate.json", "the path is relative", "give the absolute path"}, nil},
		{"ledger down", []string{"--ledger", "http://127.0.0.1:1", "--key", key, "--grant", "confirm_g", "--config", cfg}, clikit.ExitUnavailable,
			[]string{"reading grant confirm_g", "is running (custody serve)"}, nil},
		{"wrong grant", []string{"--ledger", lg.URL, "--key", otherKey, "--grant", "confirm_g", "--config", cfg}, clikit.ExitFail,
			[]string{"is not the grantee of confirm_g", "give --key the grantee's key"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			var errb syncWriter
			up := c.up
			if up == nil {
				up = []string{"true"}
			}
			args := append(append(append([]string{"custody", "gate", "--log-key", vkey}, c.args...), "--"), up...)
			code := make(chan int, 1)
			go func() { code <- runIO(context.Background(), args, inR, outW, &errb); outW.Close() }()
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 1<<20)
			ask := func(line string) map[string]any {
				t.Helper()
				if _, err := io.WriteString(inW, line+"\n"); err != nil {
					t.Fatal(err)
				}
				if !sc.Scan() {
					t.Fatalf("no answer to %s; stderr: %s", line, errb.String())
				}
				var m map[string]any
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
			m := ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`)
			if m["result"] == nil {
				t.Fatalf("initialize: %v", m)
			}
			io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			m = ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"w","arguments":{"path":"/x"}}}`)
			text := fmt.Sprint(m["result"])
			for _, w := range append([]string{"gate_unavailable: custody gate could not start"}, c.wants...) {
				if !strings.Contains(text, w) {
					t.Errorf("tools/call answer lacks %q: %s", w, text)
				}
			}
			m = ask(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
			if e, ok := m["error"].(map[string]any); !ok || !strings.Contains(fmt.Sprint(e["message"]), c.wants[0]) {
				t.Errorf("tools/list answer: %v", m)
			}
			inW.Close()
			if got := <-code; got != c.code {
				t.Errorf("exit %d, want %d; stderr: %s", got, c.code, errb.String())
			}
			if !strings.Contains(errb.String(), c.wants[0]) {
				t.Errorf("stderr lacks %q: %s", c.wants[0], errb.String())
			}
		})
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncWriter) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestReadmeGateConfig: the README's gate configuration parses, and maps
// every argument of the tools it names (the filesystem server's).
func TestReadmeGateConfig(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "cat > gate.json <<'JSON'\n")
	cfgText, _, ok2 := strings.Cut(rest, "\nJSON\n")
	if !ok || !ok2 {
		t.Fatal("README: no gate.json block")
	}
	cfg, err := gate.ParseConfig([]byte(cfgText))
	if err != nil {
		t.Fatalf("the README's gate.json: %v", err)
	}
	for tool, args := range map[string][]string{"write_file": {"path", "content"}, "edit_file": {"path", "edits", "dryRun"},
		"move_file": {"source", "destination"}, "read_text_file": {"path", "head", "tail"}, "list_directory": {"path"}} {
		for _, a := range args {
			if r := cfg.Tools[tool]; r == nil || !r.Declared(a) {
				t.Errorf("README gate.json: %s.%s is not declared", tool, a)
			}
		}
	}
	if !strings.Contains(string(data), `"--config", "/home/`) {
		t.Error("README: the host configuration does not use absolute paths")
	}
}
