package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
)

// TestLyingServerCaught puts a proxy that rewrites append answers in front
// of a real server. Each lie is caught: Append fails with ErrUnverified
// and Execute never runs the step.
func TestLyingServerCaught(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_x", nil)
	agentKey := lg.KeyOf(agent)

	lies := map[string]func(doc *api.AppendResponse){
		"checkpoint not signed by the log key": func(doc *api.AppendResponse) {
			i := strings.LastIndex(doc.Checkpoint, " ") + 5
			b := []byte(doc.Checkpoint)
			b[i] ^= 'A' ^ 'B'
			doc.Checkpoint = string(b)
		},
		"inclusion proof does not verify": func(doc *api.AppendResponse) {
			doc.InclusionProof[0] = strings.Repeat("A", 43) + "="
		},
		"index outside the checkpoint": func(doc *api.AppendResponse) { doc.Index += 1000 },
		"another entry's leaf, with its valid proof": func(doc *api.AppendResponse) {
			leaf, _ := lg.Ledger.LeafBytes(1)
			cp, _ := lg.Client.Inclusion(ctx, 1, 0)
			doc.Index, doc.Leaf, doc.Checkpoint, doc.InclusionProof = 1, leaf, cp.Checkpoint, cp.Proof
		},
		"a denial that is the accepted leaf": func(doc *api.AppendResponse) {
			idx := doc.Index
			doc.Verdict, doc.DenialIndex, doc.ReasonCode, doc.Reason = api.Denied, &idx, "limit_exceeded", "no"
		},
		"a leaf that is not JSON": func(doc *api.AppendResponse) { doc.Leaf = []byte("hello") },
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			proxy := lyingProxy(t, lg.URL, lie)
			c, err := client.New(proxy, lg.VKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			rt := client.NewRuntime(c, agentKey, "agent:a", nil)
			ran := false
			_, err = rt.Execute(ctx, client.Step{StepID: "s", Action: "act", Target: "t/x", Auth: grant},
				func(context.Context) (client.Outcome, error) { ran = true; return client.Outcome{}, nil })
			t.Log(err)
			if ran || !errors.Is(err, client.ErrUnverified) || !errors.Is(err, client.ErrNotExecuted) {
				t.Fatalf("ran %v, err %v", ran, err)
			}
		})
	}
	// An honest answer through the same proxy verifies.
	proxy := lyingProxy(t, lg.URL, func(*api.AppendResponse) {})
	c, _ := client.New(proxy, lg.VKey, nil)
	rt := client.NewRuntime(c, agentKey, "agent:a", nil)
	if _, err := rt.Receipt(ctx, servertest.Pending(grant, "honest", nil)); err != nil {
		t.Fatalf("honest proxy: %v", err)
	}
	// A client for another log's key rejects this log's answers.
	otherLog := servertest.Start(t, server.Options{})
	c, _ = client.New(lg.URL, otherLog.VKey, nil)
	if _, _, err := c.Head(ctx); err == nil {
		t.Fatal("a checkpoint of another log verified")
	}
	if _, err := c.Log(ctx); !errors.Is(err, client.ErrUnverified) {
		t.Fatalf("log of another key: %v", err)
	}
}

// lyingProxy forwards to target and rewrites append answers with lie.
func lyingProxy(t *testing.T, target string, lie func(*api.AppendResponse)) string {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var doc api.AppendResponse
		if err := json.Unmarshal(body, &doc); err != nil {
			return err
		}
		lie(&doc)
		if doc.Verdict == api.Denied {
			resp.StatusCode = http.StatusForbidden
		}
		body, _ = json.Marshal(doc)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}
