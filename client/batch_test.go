package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

// countingTransport counts the appends a client sends.
type countingTransport struct {
	appends, batches atomic.Int32
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		if strings.HasSuffix(req.URL.Path, "/batch") {
			c.batches.Add(1)
		} else {
			c.appends.Add(1)
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestConcurrentAppendsBatch: a runtime's concurrent appends share
// requests, and a denial inside a batch costs no other statement its
// decision: the ones after it are sent again with the right seq.
func TestConcurrentAppendsBatch(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	alice := lg.Principal("user:alice")
	a, grant := lg.Agent(alice, "agent:a", "wf_b", map[string]int64{"budget": 1000})
	ct := &countingTransport{}
	c, err := client.New(lg.URL, lg.VKey, &client.Options{HTTPClient: &http.Client{Transport: ct}})
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(c, lg.KeyOf(a), "agent:a", nil)
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		const n = 40
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				doc := servertest.Pending(grant, fmt.Sprintf("s%d_%d", round, i), map[string]int64{"budget": 1})
				if i%10 == 7 {
					doc.Target = "elsewhere/x" // out of scope: denied
				}
				_, errs[i] = rt.Receipt(ctx, doc)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			var de *client.DeniedError
			switch {
			case i%10 == 7:
				if !errors.As(err, &de) || de.Receipt.ReasonCode != "out_of_scope" {
					t.Errorf("round %d, %d: %v, want out_of_scope", round, i, err)
				}
			case err != nil:
				t.Errorf("round %d, %d: %v", round, i, err)
			}
		}
	}
	reqs := ct.appends.Load() + ct.batches.Load()
	t.Logf("120 statements in %d requests (%d batches)", reqs, ct.batches.Load())
	if ct.batches.Load() == 0 || reqs >= 120 {
		t.Fatalf("120 concurrent appends took %d requests, %d of them batches", reqs, ct.batches.Load())
	}
	// Every accepted receipt has its own seq, consecutive from 1.
	size := lg.Ledger.Head().Size
	seqs := map[uint64]bool{}
	for i := uint64(0); i < size; i++ {
		e, err := lg.Ledger.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := e.Statement.(*statement.ReceiptDoc); ok {
			if seqs[r.Seq] {
				t.Fatalf("seq %d twice", r.Seq)
			}
			seqs[r.Seq] = true
		}
	}
	for s := uint64(1); s <= 108; s++ {
		if !seqs[s] {
			t.Fatalf("seq %d missing (%d receipts)", s, len(seqs))
		}
	}
}

// TestAppendBatchAnswers: each envelope of a batch gets the answer it
// would have had alone.
func TestAppendBatchAnswers(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	alice := lg.Principal("user:alice")
	a, grant := lg.Agent(alice, "agent:a", "wf_b", map[string]int64{"budget": 10})
	priv := lg.KeyOf(a)
	seal := func(seq uint64, step string, reserve int64) []byte {
		doc := servertest.Pending(grant, step, map[string]int64{"budget": reserve})
		doc.ReceiptID, doc.Workflow = "receipt_"+step, "wf_b"
		h := doc.Head()
		h.Type, h.Timestamp, h.Log, h.Actor, h.Seq = statement.Receipt, statement.FormatTimestamp(time.Now()), lg.Ledger.Origin(), "agent:a", seq
		g, _ := lg.Ledger.EntryByID(grant)
		doc.ScopeHash = statement.GrantOf(g.Statement).ScopeHash
		_, raw, err := statement.Sign(priv, doc)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	envs := [][]byte{seal(1, "s1", 4), seal(2, "s2", 20), []byte(`{"not":"an envelope"}`), seal(2, "s3", 4)}
	recs, errs, err := lg.Client.AppendBatch(context.Background(), envs)
	if err != nil {
		t.Fatal(err)
	}
	var de *client.DeniedError
	var re *client.RefusedError
	if errs[0] != nil || !recs[0].Accepted() {
		t.Errorf("first: %v", errs[0])
	}
	if !errors.As(errs[1], &de) || de.Receipt.ReasonCode != "limit_exceeded" {
		t.Errorf("second: %v", errs[1])
	}
	if !errors.As(errs[2], &re) {
		t.Errorf("third: %v", errs[2])
	}
	if errs[3] != nil || recs[3].Index != recs[1].Index+1 {
		t.Errorf("fourth: %v", errs[3])
	}
}

// TestBatchBodies: a body that is not a batch of 1..MaxBatch envelopes is
// refused whole, and nothing is logged.
func TestBatchBodies(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	size := lg.Ledger.Head().Size
	many := `{"envelopes":[` + strings.Repeat(`{},`, 256) + `{}]}`
	for _, body := range []string{``, `{}`, `{"envelopes":[]}`, `[1,2]`, `{"envelopes":"x"}`, many} {
		resp, err := http.Post(lg.URL+"/v1/entries/batch", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%.40q: HTTP %d, want 400", body, resp.StatusCode)
		}
	}
	if lg.Ledger.Head().Size != size {
		t.Fatal("a refused batch logged something")
	}
}
