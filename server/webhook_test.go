package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestApprovalWebhook: a newly held receipt is POSTed to the webhook on
// loopback, with the exact statement, its rules, who may approve and
// expires_at, signed X-Custody-Signature: sha256=<HMAC-SHA256 of the
// body>; a failed delivery is retried, and a receipt no rule holds is
// never sent.
func TestApprovalWebhook(t *testing.T) {
	secret := []byte("0123456789abcdef-webhook-secret")
	type got struct {
		sig, delivery string
		body          []byte
	}
	var calls atomic.Int32
	received := make(chan got, 8)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first try fails: it must be retried
			return
		}
		received <- got{r.Header.Get(server.HeaderSignature), r.Header.Get(server.HeaderDelivery), body}
	}))
	defer hook.Close()
	lg := servertest.Start(t, server.Options{ApprovalWebhook: hook.URL, ApprovalWebhookSecret: secret})
	agent, grant, _, _ := heldSetup(t, lg)
	ctx := context.Background()
	if _, err := agent.Receipt(ctx, servertest.Pending(grant, "s0", map[string]int64{"usd": 1})); err != nil {
		t.Fatal(err)
	}
	p := servertest.Pending(grant, "s1", map[string]int64{"usd": 99})
	p.ReceiptID = "r_hook"
	var held *client.HeldError
	if _, err := agent.Receipt(ctx, p); !errors.As(err, &held) {
		t.Fatalf("not held: %v", err)
	}
	var g got
	select {
	case g = <-received:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook delivery within 30 s")
	}
	if g.sig != server.WebhookSignature(secret, g.body) || g.sig[:7] != "sha256=" {
		t.Errorf("signature %q does not match the body", g.sig)
	}
	if server.WebhookSignature([]byte("another secret"), g.body) == g.sig {
		t.Error("the signature does not depend on the secret")
	}
	var ev server.WebhookEvent
	if err := json.Unmarshal(g.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Event != "held" || ev.Log != servertest.Origin || ev.Receipt.ReceiptID != "r_hook" || ev.Receipt.ExpiresAt == "" ||
		len(ev.Receipt.Rules) != 1 || ev.Receipt.Rules[0].Approvers[0] != "user:bob" || len(ev.Receipt.Statement) == 0 ||
		g.delivery != servertest.Origin+"/r_hook" {
		t.Errorf("event %s (delivery %q)", g.body, g.delivery)
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls, want 2 (one failed, one retried)", calls.Load())
	}
	select {
	case g := <-received:
		t.Errorf("a second delivery: %s", g.body)
	case <-time.After(200 * time.Millisecond):
	}
}
