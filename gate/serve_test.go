package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8931": true, "[::1]:8931": true, "localhost:0": true,
		"0.0.0.0:8931": false, ":8931": false, "192.0.2.1:80": false, "example.com:80": false} {
		if err := LoopbackAddr(addr); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

func TestServeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "custody_gate_test_total"})
	reg.MustRegister(c)
	c.Inc()
	logs := &strings.Builder{}
	if _, err := ServeMetrics("0.0.0.0:0", reg, slog.New(slog.NewTextHandler(logs, nil))); err == nil {
		t.Fatal("metrics served on every interface")
	}
	stop, err := ServeMetrics("127.0.0.1:0", reg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, url, _ := strings.Cut(logs.String(), "url=")
	resp, err := http.Get(strings.TrimSpace(url))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "custody_gate_test_total 1") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestSessionEnd(t *testing.T) {
	for _, err := range []error{nil, context.Canceled, io.EOF, fmt.Errorf("read: %w", mcp.ErrConnectionClosed)} {
		if sessionEnd(err) != nil {
			t.Errorf("%v ends a session", err)
		}
	}
	if boom := errors.New("boom"); sessionEnd(boom) != boom {
		t.Error("another error is returned")
	}
}
