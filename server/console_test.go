package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/console"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// The console is off by default; with Options.Console it is served at
// /console/ and /logs/NAME/console/ with its security headers, and a
// browser on another origin cannot append, while the CLI and SDKs (no
// Origin header) still can.
func TestConsoleServedAndGuarded(t *testing.T) {
	ctx := context.Background()
	off := servertest.Start(t, server.Options{})
	if code, _ := get(t, off.URL+"/console/"); code != http.StatusNotFound {
		t.Fatalf("GET /console/ without the console: %d, want 404", code)
	}

	const origin = "http://localhost:8080"
	lg := servertest.Start(t, server.Options{Console: true, ConsoleOrigin: origin})
	resp, err := http.Get(lg.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != console.CSP ||
		!strings.Contains(string(page), `src="console.js"`) {
		t.Fatalf("GET /console/: %d %v %q", resp.StatusCode, resp.Header, page)
	}

	pub, _ := servertest.Key(t)
	env, _, err := statement.Sign(lg.AdminKey, &statement.PrincipalDoc{Header: statement.Header{Type: statement.Principal,
		Timestamp: statement.FormatTimestamp(time.Now()), Log: servertest.Origin, Actor: "admin", Seq: 2},
		PrincipalID: "p_alice", Op: statement.OpEnroll, Name: "user:alice", PublicKey: sign.EncodePublicKey(pub)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := env.Canonical()
	post := func(hdr string) int {
		req, _ := http.NewRequest("POST", lg.URL+"/v1/entries", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if hdr != "" {
			req.Header.Set("Origin", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("https://evil.example"); code != http.StatusForbidden {
		t.Fatalf("POST /v1/entries from another origin: %d, want 403", code)
	}
	if code := post(origin); code != 200 {
		t.Fatalf("POST /v1/entries from the console's origin: %d, want 200", code)
	}

	// Under /logs/NAME/ too.
	reg := prometheus.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	na := server.New(lg.Ledger, server.Options{Logger: quiet, Registry: reg, Console: true, ConsoleOrigin: origin,
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"log": "a"}, reg)})
	hs := httptest.NewServer(server.NewLogs(map[string]*server.Server{"a": na}, nil, reg).Handler())
	defer hs.Close()
	if code, js := get(t, hs.URL+"/logs/a/console/console.js"); code != 200 || !strings.Contains(js, "textContent") {
		t.Fatalf("GET /logs/a/console/console.js: %d", code)
	}
	c, err := client.New(hs.URL+"/logs/a", lg.VKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Entry(ctx, 1); err != nil {
		t.Fatalf("reading through /logs/a with the console on: %v", err)
	}
}
