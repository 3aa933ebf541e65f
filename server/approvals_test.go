package server_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

// heldSetup confirms an agent in wf_appr whose purchases above 10 usd
// need one of bob and carol, and returns the agent, its grant and bob.
func heldSetup(t *testing.T, lg *servertest.Log) (agent *client.Runtime, grant string, bob, carol *client.Runtime) {
	agent, grant, bob, carol, _ = heldSetupKey(t, lg)
	return
}

func heldSetupKey(t *testing.T, lg *servertest.Log) (agent *client.Runtime, grant string, bob, carol *client.Runtime, agentKey ed25519.PrivateKey) {
	alice := lg.Principal("user:alice")
	bob, carol = lg.Principal("user:bob"), lg.Principal("user:carol")
	pub, priv := servertest.Key(t)
	grant = lg.ID("confirm")
	_, err := alice.Confirm(context.Background(), client.Grant{ID: grant, Workflow: "wf_appr", Grantee: "agent:buyer", GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"usd": 1000}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"act"}, Above: map[string]int64{"usd": 10},
			Approvers: []string{"user:bob", "user:carol"}, Quorum: 1, TTLSeconds: 600}}})
	if err != nil {
		t.Fatal(err)
	}
	return client.NewRuntime(lg.Client, priv, "agent:buyer", nil), grant, bob, carol, priv
}

// TestHeldReceipt: a pending receipt a rule holds is answered 202 held
// (the verified answer is a *HeldError, never a nil error), listed at GET
// /v1/approvals (and under /logs/default/), and its state moves to
// approved when an approver's APPROVAL lands, which a waiting long poll
// learns at once.
func TestHeldReceipt(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	agent, grant, bob, _ := heldSetup(t, lg)
	ctx := context.Background()

	small := servertest.Pending(grant, "s1", map[string]int64{"usd": 5})
	if _, err := agent.Receipt(ctx, small); err != nil {
		t.Fatalf("a receipt no rule matches: %v", err)
	}
	big := servertest.Pending(grant, "s2", map[string]int64{"usd": 50})
	big.ReceiptID = "r_big"
	rec, err := agent.Receipt(ctx, big)
	var held *client.HeldError
	if !errors.As(err, &held) || rec == nil || !rec.Held() || rec.Accepted() {
		t.Fatalf("held receipt: rec %+v, err %v; want a *HeldError", rec, err)
	}
	if len(rec.Rules) != 1 || rec.Rules[0].RuleID != "big" || rec.Rules[0].Grant != grant || rec.ExpiresAt.IsZero() {
		t.Errorf("held answer: rules %+v, expires_at %s", rec.Rules, rec.ExpiresAt)
	}

	for _, path := range []string{"/v1/approvals", "/logs/default/v1/approvals?approver=user:bob", "/v1/approvals?workflow=wf_appr"} {
		status, _, body := lg.Get(path)
		var list api.HeldList
		if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
			if status == http.StatusNotFound && path[:6] == "/logs/" {
				continue // a server of one log has no /logs/ prefix
			}
			t.Fatalf("%s: %d %s", path, status, body)
		}
		if len(list.Held) != 1 || list.Held[0].ReceiptID != "r_big" || list.Held[0].Reserve["usd"] != 50 ||
			len(list.Held[0].Chain) != 1 || list.Held[0].Chain[0] != grant || list.Held[0].Actor != "agent:buyer" {
			t.Errorf("%s: %s", path, body)
		}
	}
	if status, _, body := lg.Get("/v1/approvals?approver=user:dave"); status != http.StatusOK || string(body) != "{\"held\":[]}\n" && string(body) != "{\"held\":[]}" {
		t.Errorf("a stranger's list: %d %s", status, body)
	}

	st, err := lg.Client.ApprovalState(ctx, "r_big", 0)
	if err != nil || st.State != "held" {
		t.Fatalf("state: %+v %v", st, err)
	}
	type answer struct {
		st  *api.ApprovalState
		err error
	}
	waited := make(chan answer, 1)
	go func() {
		st, err := lg.Client.ApprovalState(ctx, "r_big", 30000)
		waited <- answer{st, err}
	}()
	time.Sleep(50 * time.Millisecond) // let the long poll start (the test passes either way)
	if _, err := bob.Approve(ctx, "r_big", false, ""); err != nil {
		t.Fatalf("bob approves: %v", err)
	}
	a := <-waited
	if a.err != nil || a.st.State != "approved" || len(a.st.Approvals) != 1 || a.st.Approvals[0].Actor != "user:bob" {
		t.Fatalf("after the approval: %+v %v", a.st, a.err)
	}
	if status, _, body := lg.Get("/v1/approvals"); status != http.StatusOK || len(body) > 14 {
		t.Errorf("an approved receipt is still listed: %s", body)
	}
	// A second approval is not_held; a denied APPROVAL is a *DeniedError.
	var denied *client.DeniedError
	if _, err := bob.Approve(ctx, "r_big", false, ""); !errors.As(err, &denied) || denied.Receipt.ReasonCode != "not_held" {
		t.Errorf("a second approval: %v", err)
	}
	// The outcome is recorded as usual.
	out := &statement.ReceiptDoc{Workflow: "wf_appr", StepID: "s2", Action: "act", Target: "t/x", AuthorizationRef: grant,
		Result: statement.ResultSuccess, PendingRef: "r_big", Consumed: map[string]int64{"usd": 50}}
	if _, err := agent.Receipt(ctx, out); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := lg.Get("/v1/approvals/" + "r_nope"); status != http.StatusNotFound {
		t.Errorf("an unknown receipt: %d", status)
	}
}

// TestHeldInBatch: a batch holding a held receipt and later statements of
// the same key: the held one is answered 202 and takes its seq, and the
// statements after it are decided, not withdrawn.
func TestHeldInBatch(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	agent, grant, _, _, key := heldSetupKey(t, lg)
	ctx := context.Background()
	var envs [][]byte
	next, err := lg.Client.NextSeq(ctx, agent.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	for i, usd := range []int64{50, 1, 2} {
		p := servertest.Pending(grant, "b"+string(rune('0'+i)), map[string]int64{"usd": usd})
		p.ReceiptID = lg.ID("r")
		p.Workflow = "wf_appr"
		p.Header = statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(time.Now()), Log: servertest.Origin,
			Actor: "agent:buyer", Seq: next + uint64(i)}
		g, _ := lg.Ledger.EntryByID(grant)
		p.ScopeHash = statement.GrantOf(g.Statement).ScopeHash
		_, raw, err := statement.Sign(key, p)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, raw)
	}
	recs, errs, err := lg.Client.AppendBatch(ctx, envs)
	if err != nil {
		t.Fatal(err)
	}
	var held *client.HeldError
	if !errors.As(errs[0], &held) || !recs[0].Held() {
		t.Errorf("first: %v", errs[0])
	}
	for i := 1; i < 3; i++ {
		if errs[i] != nil || !recs[i].Accepted() {
			t.Errorf("statement %d after the held one: %v", i, errs[i])
		}
	}
}

// GET /v1/approvals?wait=MS with If-None-Match naming the list answers
// as soon as a held receipt commits, with the new list and its ETag; with
// nothing new it answers 304 after MS.
func TestApprovalsListWaits(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	agent, grant, _, _ := heldSetup(t, lg)
	ctx := context.Background()
	get := func(etag string, wait int) (*http.Response, api.HeldList) {
		t.Helper()
		req, _ := http.NewRequest("GET", lg.URL+"/v1/approvals?approver=user:bob&wait="+strconv.Itoa(wait), nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list api.HeldList
		if resp.StatusCode == 200 {
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				t.Fatal(err)
			}
		}
		return resp, list
	}
	resp, list := get("", 0)
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || len(list.Held) != 0 || etag == "" {
		t.Fatalf("the empty list: %d %+v %q", resp.StatusCode, list, etag)
	}
	start := time.Now()
	if resp, _ := get(etag, 300); resp.StatusCode != http.StatusNotModified || resp.Header.Get("ETag") != etag || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("nothing new: %d %q after %v", resp.StatusCode, resp.Header.Get("ETag"), time.Since(start))
	}

	type answer struct {
		resp *http.Response
		list api.HeldList
	}
	got := make(chan answer, 1)
	go func() { r, l := get(etag, 30000); got <- answer{r, l} }()
	time.Sleep(100 * time.Millisecond) // the long poll is waiting
	big := servertest.Pending(grant, "s2", map[string]int64{"usd": 50})
	big.ReceiptID = "r_wait"
	if _, err := agent.Receipt(ctx, big); err == nil {
		t.Fatal("not held")
	}
	select {
	case a := <-got:
		if a.resp.StatusCode != 200 || len(a.list.Held) != 1 || a.list.Held[0].ReceiptID != "r_wait" || a.resp.Header.Get("ETag") == etag {
			t.Fatalf("after the held receipt: %d %+v", a.resp.StatusCode, a.list)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll did not answer the held receipt")
	}
	if resp, _ := get(etag, api.MaxApprovalWait+1); resp.StatusCode != 400 {
		t.Errorf("a wait above the bound: %d", resp.StatusCode)
	}
}
