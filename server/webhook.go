package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// WebhookEvent is the body of an approval webhook POST: a newly held
// receipt, the exact statement, its rules (who may approve, how many),
// its chain of grants and its deadline.
type WebhookEvent struct {
	Event   string          `json:"event"` // "held"
	Log     string          `json:"log"`
	Receipt api.HeldReceipt `json:"receipt"`
}

// Header names of the approval webhook.
const (
	HeaderSignature = "X-Custody-Signature" // sha256=<lowercase hex HMAC-SHA256 of the body>
	HeaderDelivery  = "X-Custody-Delivery"  // <log origin>/<receipt_id>: the same on every retry
)

// WebhookSignature is the X-Custody-Signature value of a body.
func WebhookSignature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhookQueue bounds deliveries waiting; past it the newest are dropped
// (logged): GET /v1/approvals stays the full list.
const webhookQueue = 1024

// webhookTries and the backoff between them (doubling from 1 s, at most 1 min).
const webhookTries = 8

// startWebhook follows the log's commits, finds the pending receipts that
// were held, and POSTs each once (with retries) from a goroutine of its
// own: an append never waits for a webhook.
func (s *Server) startWebhook() {
	queue := make(chan WebhookEvent, webhookQueue)
	commits, stop := s.l.Watch()
	go func() {
		defer stop()
		for {
			select {
			case <-s.stopping:
				close(queue)
				return
			case c := <-commits:
				if lead, _ := s.l.Leading(); !lead {
					continue
				}
				for i := c.From; i < c.Size; i++ {
					ev, ok := s.heldEvent(i)
					if !ok {
						continue
					}
					select {
					case queue <- ev:
					default:
						s.log.Warn("approval webhook queue full: dropping a held receipt's notice", "receipt_id", ev.Receipt.ReceiptID)
					}
				}
			}
		}
	}()
	go func() {
		hc := &http.Client{Timeout: 10 * time.Second}
		for ev := range queue {
			s.deliver(hc, ev)
		}
	}()
}

// heldEvent reads entry i and returns its webhook event when it is a
// receipt an approval rule held.
func (s *Server) heldEvent(i uint64) (WebhookEvent, bool) {
	e, err := s.l.Entry(i)
	if err != nil {
		return WebhookEvent{}, false
	}
	r, ok := e.Statement.(*statement.ReceiptDoc)
	if !ok || !r.IsPending() {
		return WebhookEvent{}, false
	}
	h, err := s.l.HeldReceipt(r.ReceiptID, time.Now())
	if err != nil || h.Pending.Index != i {
		return WebhookEvent{}, false
	}
	return WebhookEvent{Event: "held", Log: s.l.Origin(), Receipt: HeldDoc(h)}, true
}

// deliver POSTs one event until a 2xx answer, retrying with backoff.
func (s *Server) deliver(hc *http.Client, ev WebhookEvent) {
	body, err := json.Marshal(ev)
	if err != nil {
		return
	}
	sig := WebhookSignature(s.opts.ApprovalWebhookSecret, body)
	retry := backoff.Backoff{First: time.Second, Max: time.Minute}
	for try := 1; try <= webhookTries; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.ApprovalWebhook, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderSignature, sig)
		req.Header.Set(HeaderDelivery, ev.Log+"/"+ev.Receipt.ReceiptID)
		resp, err := hc.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode/100 == 2 {
			return
		}
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		s.log.Warn("approval webhook not delivered", "receipt_id", ev.Receipt.ReceiptID, "try", try, "status", status, "err", err)
		select {
		case <-time.After(retry.Next()):
		case <-s.stopping:
			return
		}
	}
}
