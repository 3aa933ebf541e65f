package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/verify"
)

// GET /v1/workflows lists the workflows newest first with what the
// console shows of each (owner, agents, last activity, held, stopped,
// violations), a page at a time; GET /v1/workflows/{id}/replay answers
// the replay report with the bundle it was built from, which verifies
// offline.
func TestWorkflowListAndReplay(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	lg.Principal("user:bob")
	quiet, _ := lg.Agent(alice, "agent:quiet", "wf_quiet", nil)
	if _, err := quiet.Receipt(ctx, servertest.Pending(lg.ID("g"), "s0", nil)); err == nil {
		t.Fatal("a receipt under a grant that does not exist was accepted")
	}
	pub, priv := servertest.Key(t)
	grant := lg.ID("confirm")
	if _, err := alice.Confirm(ctx, client.Grant{ID: grant, Workflow: "wf_busy", Grantee: "agent:busy", GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"usd": 100}, TTL: 3600e9, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"act"}, Above: map[string]int64{"usd": 10},
			Approvers: []string{"user:bob"}, Quorum: 1, TTLSeconds: 600}}}); err != nil {
		t.Fatal(err)
	}
	busy := client.NewRuntime(lg.Client, priv, "agent:busy", nil)
	if _, err := busy.Receipt(ctx, servertest.Pending(grant, "s1", map[string]int64{"usd": 50})); err == nil {
		t.Fatal("the big receipt was not held")
	}
	if _, err := busy.Receipt(ctx, servertest.Pending(grant, "s2", map[string]int64{"usd": 5000})); err == nil {
		t.Fatal("a receipt over the limit was accepted")
	}
	stopped, _ := lg.Agent(alice, "agent:stopped", "wf_stopped", nil)
	_ = stopped
	if _, err := alice.Stop(ctx, client.StopSpec{Workflow: "wf_stopped", Takeover: "pause", Reason: "enough"}); err != nil {
		t.Fatal(err)
	}

	list := func(q string) (int, api.WorkflowList) {
		t.Helper()
		code, _, body := lg.Get("/v1/workflows" + q)
		var out api.WorkflowList
		if code == http.StatusOK {
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
		}
		return code, out
	}
	_, all := list("")
	if all.Total != 3 || len(all.Workflows) != 3 || all.NextBefore != 0 {
		t.Fatalf("the list: %+v", all)
	}
	by := map[string]api.WorkflowSummary{}
	for i, w := range all.Workflows {
		by[w.Workflow] = w
		if want := []string{"wf_stopped", "wf_busy", "wf_quiet"}[i]; w.Workflow != want {
			t.Fatalf("list[%d] is %s, want %s (newest first)", i, w.Workflow, want)
		}
	}
	if w := by["wf_busy"]; w.Owner != "user:alice" || len(w.Agents) != 1 || w.Agents[0] != "agent:busy" || w.Held != 1 ||
		w.Violations != 1 || w.Stopped || w.Entries != 3 || w.LastActivity == "" {
		t.Fatalf("wf_busy: %+v", w)
	}
	if w := by["wf_stopped"]; !w.Stopped || w.StopID == "" || w.Held != 0 || w.Violations != 0 {
		t.Fatalf("wf_stopped: %+v", w)
	}
	if w := by["wf_quiet"]; w.Violations != 0 || w.Entries != 1 {
		t.Fatalf("wf_quiet: %+v (its denied receipt named a grant that does not exist, so it is in no workflow)", w)
	}
	if _, p := list("?limit=2"); len(p.Workflows) != 2 || p.NextBefore != 1 {
		t.Fatalf("?limit=2: %+v", p)
	} else if _, rest := list(fmt.Sprintf("?limit=2&before=%d", p.NextBefore)); len(rest.Workflows) != 1 || rest.Workflows[0].Workflow != "wf_quiet" {
		t.Fatalf("the next page: %+v", rest)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?before=x"} {
		if code, _ := list(q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}

	code, _, body := lg.Get("/v1/workflows/wf_busy/replay")
	if code != http.StatusOK {
		t.Fatalf("replay: %d %s", code, body)
	}
	var rep server.WorkflowReplay
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Report.Verified || rep.Report.Workflow != "wf_busy" || len(rep.Report.Grants) != 1 || rep.Report.Owner != "user:alice" {
		t.Fatalf("the report: %+v", rep.Report)
	}
	var kinds []string
	for _, r := range rep.Report.Rows {
		if !r.Trust {
			kinds = append(kinds, r.Kind+"/"+r.Decision)
		}
	}
	if fmt.Sprint(kinds) != "[CONFIRM/accepted RECEIPT/accepted RECEIPT/denied]" {
		t.Fatalf("the timeline: %v", kinds)
	}
	b, err := verify.ParseBundle(rep.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyBundle(b, lg.VKey); err != nil || !v.Valid {
		t.Fatalf("the replay's bundle does not verify: %+v %v", v, err)
	}
	if code, _, _ := lg.Get("/v1/workflows/wf_none/replay"); code != http.StatusNotFound {
		t.Fatalf("replay of a workflow that does not exist: %d", code)
	}
}

// Under /logs/NAME/ each log lists its own workflows.
func TestWorkflowListPerLog(t *testing.T) {
	a := servertest.Start(t, server.Options{})
	b := servertest.Start(t, server.Options{})
	a.Agent(a.Principal("user:alice"), "agent:a", "wf_in_a", nil)
	b.Agent(b.Principal("user:bob"), "agent:b", "wf_in_b", nil)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	for_ := func(name string, lg *servertest.Log) *server.Server {
		return server.New(lg.Ledger, server.Options{Logger: quiet, Registry: reg,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"log": name}, reg)})
	}
	hs := httptest.NewServer(server.NewLogs(map[string]*server.Server{"a": for_("a", a), "b": for_("b", b)}, nil, reg).Handler())
	defer hs.Close()
	for name, want := range map[string]string{"a": "wf_in_a", "b": "wf_in_b"} {
		code, body := get(t, hs.URL+"/logs/"+name+"/v1/workflows")
		var list api.WorkflowList
		if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || list.Total != 1 || list.Workflows[0].Workflow != want {
			t.Fatalf("/logs/%s/v1/workflows: %d %s", name, code, body)
		}
		if code, body := get(t, hs.URL+"/logs/"+name+"/v1/workflows/"+want+"/replay"); code != http.StatusOK || !strings.Contains(body, `"verified":true`) {
			t.Fatalf("/logs/%s/v1/workflows/%s/replay: %d %.200s", name, want, code, body)
		}
	}
}

// BenchmarkWorkflowList is a page of 50 of GET /v1/workflows over 200
// workflows; BenchmarkWorkflowReplay is GET /v1/workflows/{id}/replay of
// a workflow of 201 entries (its bundle built, verified and replayed).
func BenchmarkWorkflowList(b *testing.B) {
	lg := servertest.Start(b, server.Options{})
	alice := lg.Principal("user:alice")
	for i := 0; i < 200; i++ {
		lg.Agent(alice, fmt.Sprintf("agent:%d", i), fmt.Sprintf("wf_%03d", i), nil)
	}
	for b.Loop() {
		if code, _, body := lg.Get("/v1/workflows?limit=50"); code != http.StatusOK {
			b.Fatalf("%d %s", code, body)
		}
	}
}

func BenchmarkWorkflowReplay(b *testing.B) {
	lg := servertest.Start(b, server.Options{})
	agent, grant := lg.Agent(lg.Principal("user:alice"), "agent:a", "wf_long", nil)
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		if _, err := agent.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("s%d", i), nil)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if code, _, body := lg.Get("/v1/workflows/wf_long/replay"); code != http.StatusOK {
			b.Fatalf("%d %.200s", code, body)
		}
	}
}
