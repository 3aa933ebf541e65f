package server_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (another "host").
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// openStream opens a workflow's stream from hc and returns it open (the
// caller closes it) or its status.
func openStream(t *testing.T, hc *http.Client, url string, header ...string) (*http.Response, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	r, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return nil, r.StatusCode
	}
	return r, r.StatusCode
}

// TestStepStreamNotCrowdedOut: every stream slot a client can take is
// taken (the runtime's own address at its cap on the runtime's workflow,
// the workflow at its cap, the server at MaxStreams, from other loopback
// "hosts"); Runtime.Execute still connects to its step's stream and runs
// the step, because its stream is signed by the key of its pending
// RECEIPT and takes capacity no other client can. A forged or replayed
// step header opens nothing beyond the two streams a step may have.
func TestStepStreamNotCrowdedOut(t *testing.T) {
	lg := servertest.Start(t, server.Options{MaxStreams: 6, MaxStreamsPerAddr: 3, MaxStreamsPerWorkflow: 4, StreamOpensPerAddr: -1})
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_crowd", nil)
	lg.Agent(alice, "agent:b", "wf_other", nil)
	agent.WatchTimeout = 3 * time.Second
	url := func(wf string) string { return lg.URL + "/v1/workflows/" + wf + "/events" }

	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	take := func(ip, wf string, want int) {
		r, code := openStream(t, clientFrom(ip), url(wf))
		if r != nil {
			held = append(held, r)
		}
		if code != want {
			t.Fatalf("a stream on %s from %s: %d, want %d", wf, ip, code, want)
		}
	}
	for i := 0; i < 3; i++ {
		take("127.0.0.1", "wf_crowd", http.StatusOK) // the runtime's own address, at its cap
	}
	take("127.0.0.1", "wf_other", http.StatusServiceUnavailable)
	take("127.0.0.2", "wf_crowd", http.StatusOK)
	take("127.0.0.3", "wf_crowd", http.StatusServiceUnavailable) // the workflow's cap
	take("127.0.0.3", "wf_other", http.StatusOK)
	take("127.0.0.4", "wf_other", http.StatusOK)                 // MaxStreams reached
	take("127.0.0.5", "wf_other", http.StatusServiceUnavailable) // the server's cap

	ran := false
	ex, err := agent.Execute(context.Background(), client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant},
		func(context.Context) (client.Outcome, error) { ran = true; return client.Outcome{}, nil })
	if err != nil || !ran || !ex.Ran {
		t.Fatalf("Execute with every other slot taken: ran %v, %v", ran, err)
	}

	// The step's header: forged (another key's signature, a wrong index)
	// is refused; the real one, replayed, opens at most two streams.
	step := ex.Pending.Index
	_, intruder := servertest.Key(t)
	forged := lg.Client.NewStepProof(intruder, "wf_crowd", step)
	hdr := func(p client.StepProof) string {
		return strconv.FormatUint(p.Index, 10) + " " + base64.StdEncoding.EncodeToString(p.Signature)
	}
	if _, code := openStream(t, clientFrom("127.0.0.6"), url("wf_crowd"), api.HeaderStreamStep, hdr(forged)); code != http.StatusForbidden {
		t.Errorf("a step header signed by another key: %d", code)
	}
	real := lg.Client.NewStepProof(lg.KeyOf(agent), "wf_crowd", step)
	if _, code := openStream(t, clientFrom("127.0.0.6"), url("wf_other"), api.HeaderStreamStep, hdr(real)); code != http.StatusForbidden {
		t.Errorf("a step header for another workflow: %d", code)
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable} {
		r, code := openStream(t, clientFrom("127.0.0.6"), url("wf_crowd"), api.HeaderStreamStep, hdr(real))
		if r != nil {
			held = append(held, r)
		}
		if code != want {
			t.Errorf("replayed step header, stream %d: %d, want %d", i+1, code, want)
		}
	}
}

// TestStreamBudgetAcrossLogs: a client's stream cap is one budget across
// the logs one process serves, not one per log.
func TestStreamBudgetAcrossLogs(t *testing.T) {
	a := servertest.Start(t, server.Options{})
	b := servertest.Start(t, server.Options{})
	a.Agent(a.Principal("user:alice"), "agent:a", "wf_a", nil)
	b.Agent(b.Principal("user:bob"), "agent:b", "wf_b", nil)
	reg := prometheus.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := func(name string) server.Options {
		return server.Options{Logger: quiet, Registry: reg, MaxStreamsPerAddr: 2, StreamOpensPerAddr: -1,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"log": name}, reg)}
	}
	hs := httptest.NewServer(server.NewLogs(map[string]*server.Server{
		"a": server.New(a.Ledger, opts("a")), "b": server.New(b.Ledger, opts("b"))}, nil, reg).Handler())
	defer hs.Close()
	hc := clientFrom("127.0.0.1")
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for i, c := range []struct {
		path string
		want int
	}{
		{"/logs/a/v1/workflows/wf_a/events", http.StatusOK},
		{"/logs/b/v1/workflows/wf_b/events", http.StatusOK},
		{"/logs/b/v1/workflows/wf_b/events", http.StatusServiceUnavailable},
		{"/logs/a/v1/workflows/wf_a/events", http.StatusServiceUnavailable},
	} {
		r, code := openStream(t, hc, hs.URL+c.path)
		if r != nil {
			held = append(held, r)
		}
		if code != c.want {
			t.Errorf("stream %d (%s): %d, want %d", i+1, c.path, code, c.want)
		}
	}
}
