package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestGateLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8931": true, "[::1]:8931": true, "localhost:0": true,
		"0.0.0.0:8931": false, ":8931": false, "192.0.2.1:80": false, "example.com:80": false} {
		if err := loopbackAddr(addr); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

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
		if code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
