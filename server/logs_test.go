package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Several logs behind one listener: each under /logs/NAME/ with every
// path of a single-log server, the client working from that base URL,
// the default log at / as well, metrics labelled by log.
func TestLogsRouting(t *testing.T) {
	ctx := context.Background()
	a := servertest.Start(t, server.Options{})
	b := servertest.Start(t, server.Options{})
	reg := prometheus.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for_ := func(name string, lg *servertest.Log) *server.Server {
		return server.New(lg.Ledger, server.Options{Logger: quiet, Registry: reg,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"log": name}, reg)})
	}
	sa, sb := for_("a", a), for_("team-b", b)
	hs := httptest.NewServer(server.NewLogs(map[string]*server.Server{"a": sa, "team-b": sb}, nil, reg).Handler())
	defer hs.Close()

	// An append and reads through /logs/a, checked against a's key.
	ca, err := client.New(hs.URL+"/logs/a", a.VKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := servertest.Key(t)
	r, err := client.NewRuntime(ca, a.AdminKey, "admin", nil).Append(ctx, &statement.PrincipalDoc{PrincipalID: "p_alice",
		Op: statement.OpEnroll, Name: "user:alice", PublicKey: sign.EncodePublicKey(pub)})
	if err != nil || !r.Accepted() || r.Index != 1 {
		t.Fatalf("appending to log a through /logs/a: %+v, %v", r, err)
	}
	if e, err := ca.Entry(ctx, 1); err != nil || e.Index != 1 {
		t.Fatalf("reading log a's entry 1 through /logs/a: %v", err)
	}
	if a.Ledger.Head().Size != 2 || b.Ledger.Head().Size != 1 {
		t.Fatalf("sizes: a %d, team-b %d; want 2, 1", a.Ledger.Head().Size, b.Ledger.Head().Size)
	}
	cb, err := client.New(hs.URL+"/logs/team-b", b.VKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp, _, err := cb.Head(ctx); err != nil || cp.Size != 1 {
		t.Fatalf("log team-b's head through /logs/team-b: %+v, %v", cp, err)
	}
	// A's key does not verify what /logs/team-b serves.
	if c, err := client.New(hs.URL+"/logs/team-b", a.VKey, nil); err == nil {
		if _, _, err := c.Head(ctx); err == nil {
			t.Fatal("log team-b's checkpoint verified under log a's key")
		}
	}
	if code, body := get(t, hs.URL+"/logs/a/checkpoint"); code != 200 || !strings.Contains(body, "\n2\n") {
		t.Fatalf("/logs/a/checkpoint: %d %q", code, body)
	}
	if code, _ := get(t, hs.URL+"/logs/team-b/tile/0/000.p/1"); code != 200 {
		t.Fatalf("/logs/team-b/tile/0/000.p/1: %d", code)
	}

	if code, body := get(t, hs.URL+"/logs/c/checkpoint"); code != 404 || !strings.Contains(body, `no log named \"c\" (it serves a, team-b)`) {
		t.Fatalf("an unknown log: %d %s", code, body)
	}
	if code, body := get(t, hs.URL+"/checkpoint"); code != 404 || !strings.Contains(body, "serves the logs a, team-b, each under /logs/NAME/") {
		t.Fatalf("/checkpoint without a default log: %d %s", code, body)
	}
	if code, body := get(t, hs.URL+"/readyz"); code != 200 || !strings.Contains(body, "log a leader") || !strings.Contains(body, "log team-b leader") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if code, body := get(t, hs.URL+"/logs/team-b/readyz"); code != 200 || !strings.HasPrefix(body, "ready\n") {
		t.Fatalf("/logs/team-b/readyz: %d %q", code, body)
	}
	_, metrics := get(t, hs.URL+"/metrics")
	for _, want := range []string{`custody_tree_size{log="a"} 2`, `custody_tree_size{log="team-b"} 1`, `custody_appends_total{log="a",verdict="accepted"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// With a default log: the single-log paths at /, and /logs/default/.
	reg2 := prometheus.NewRegistry()
	def := server.New(b.Ledger, server.Options{Logger: quiet, Registry: reg2,
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"log": "default"}, reg2)})
	na := server.New(a.Ledger, server.Options{Logger: quiet, Registry: reg2,
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"log": "a"}, reg2)})
	hs2 := httptest.NewServer(server.NewLogs(map[string]*server.Server{"a": na}, def, reg2).Handler())
	defer hs2.Close()
	_, root := get(t, hs2.URL+"/checkpoint")
	_, viaDefault := get(t, hs2.URL+"/logs/default/checkpoint")
	_, direct := get(t, b.URL+"/checkpoint")
	if root != direct || viaDefault != direct {
		t.Fatalf("the default log's checkpoint: at / %q, at /logs/default/ %q; want %q", root, viaDefault, direct)
	}
	if code, body := get(t, hs2.URL+"/logs/a/checkpoint"); code != 200 || !strings.Contains(body, "\n2\n") {
		t.Fatalf("/logs/a/checkpoint beside a default log: %d %q", code, body)
	}
}
