package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestWitnessedWait: GET /v1/checkpoint/witnessed?size=N waits until a
// checkpoint of at least N entries is witnessed and answers it at once;
// with no such checkpoint it answers the newest witnessed one when the
// wait ends.
func TestWitnessedWait(t *testing.T) {
	wl := startWitnessed(t, server.Options{})
	wl.Principal("user:alice")
	witnessedSize := func(body []byte) uint64 {
		c, err := merkle.OpenCheckpoint(body, servertest.Origin, wl.VKey)
		if err != nil || !wl.policy.Evaluate(body).Satisfied {
			t.Fatalf("not a witnessed checkpoint of the log (%v):\n%s", err, body)
		}
		return c.Size
	}
	size := wl.Ledger.Head().Size
	status, _, body := wl.Get(fmt.Sprintf("/v1/checkpoint/witnessed?size=%d&wait=20000", size))
	if status != http.StatusOK || witnessedSize(body) < size {
		t.Fatalf("waiting for size %d: %d\n%s", size, status, body)
	}
	// A size the log has not reached: answered when the wait ends.
	start := time.Now()
	status, _, body = wl.Get(fmt.Sprintf("/v1/checkpoint/witnessed?size=%d&wait=300", size+1))
	if took := time.Since(start); status != http.StatusOK || witnessedSize(body) != size || took < 300*time.Millisecond {
		t.Fatalf("waiting for size %d: %d after %s\n%s", size+1, status, took, body)
	}
	// It is answered as soon as the log grows and the entry is witnessed.
	got := make(chan []byte, 1)
	go func() {
		_, _, body := wl.Get(fmt.Sprintf("/v1/checkpoint/witnessed?size=%d&wait=20000", size+1))
		got <- body
	}()
	time.Sleep(50 * time.Millisecond)
	wl.Principal("user:bob")
	select {
	case body := <-got:
		if witnessedSize(body) < size+1 {
			t.Fatalf("answered before size %d was witnessed:\n%s", size+1, body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer after the log grew and was witnessed")
	}
	for _, bad := range []string{"size=x", "size=1&wait=-1"} {
		if status, _, _ := wl.Get("/v1/checkpoint/witnessed?" + bad); status != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", bad, status)
		}
	}
}

// BenchmarkPendingUnderPolicy: one runtime writes pending receipts one at
// a time to a server in default mode (no witness finality) with a 2-of-3
// quorum of real witnesses, its client without a policy (unwitnessed) and
// with one (witnessed: each pending receipt is answered only under a
// checkpoint the quorum cosigned, which the client waits for).
func BenchmarkPendingUnderPolicy(b *testing.B) {
	wl := startWitnessed(b, server.Options{})
	alice := wl.Principal("user:alice")
	agent, grant := wl.Agent(alice, "agent:a", "wf_bench", nil)
	for _, mode := range []string{"unwitnessed", "witnessed"} {
		b.Run(mode, func(b *testing.B) {
			opts := &client.Options{}
			if mode == "witnessed" {
				opts.Policy = wl.policy
			}
			c, err := client.New(wl.URL, wl.VKey, opts)
			if err != nil {
				b.Fatal(err)
			}
			rt := client.NewRuntime(c, wl.KeyOf(agent), "agent:a", nil)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				rec, err := rt.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("%s_%d", mode, i), nil))
				if err != nil {
					b.Fatal(err)
				}
				if mode == "witnessed" && (rec.Witnessed == nil || !rec.Witnessed.Satisfied) {
					b.Fatal("a pending receipt under a policy was answered unwitnessed")
				}
			}
		})
	}
}
