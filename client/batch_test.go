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
// decision nor a seq_mismatch DENIAL: the ones after it are withdrawn and
// sent again with the right seq.
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
	mismatches := func() (n int) {
		size := lg.Ledger.Head().Size
		for i := uint64(0); i < size; i++ {
			e, err := lg.Ledger.Entry(i)
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := e.Statement.(*statement.DenialDoc); ok && d.ReasonCode == "seq_mismatch" {
				n++
			}
		}
		return n
	}
	const n = 40
	good := 0
	run := func(name string, bad func(i int) bool, ctxOf func(i int) context.Context) {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				doc := servertest.Pending(grant, fmt.Sprintf("%s_%d", name, i), map[string]int64{"budget": 1})
				if bad(i) {
					doc.Target = "elsewhere/x" // out of scope: denied
				}
				_, errs[i] = rt.Receipt(ctxOf(i), doc)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			var de *client.DeniedError
			switch {
			case bad(i):
				if !errors.As(err, &de) || de.Receipt.ReasonCode != "out_of_scope" {
					t.Errorf("%s %d: %v, want out_of_scope", name, i, err)
				}
			case err != nil:
				t.Errorf("%s %d: %v", name, i, err)
			default:
				good++
			}
		}
	}
	bg := func(int) context.Context { return context.Background() }

	// All accepted: far fewer requests than statements.
	run("good", func(int) bool { return false }, bg)
	reqs := ct.appends.Load() + ct.batches.Load()
	t.Logf("%d statements in %d requests (%d batches)", n, reqs, ct.batches.Load())
	if ct.batches.Load() == 0 || reqs > n/2 {
		t.Fatalf("%d concurrent appends took %d requests, %d of them batches", n, reqs, ct.batches.Load())
	}
	// Denials inside batches: every other statement still gets its own
	// decision, and none is denied seq_mismatch (the ledger withdraws the
	// statements after a denied one, and the runtime signs them again).
	run("mixed", func(i int) bool { return i%10 == 7 }, bg)
	if m := mismatches(); m != 0 {
		t.Errorf("%d seq_mismatch DENIALs after denials inside batches", m)
	}
	// Denials sent Alone: no statement is denied seq_mismatch.
	before := mismatches()
	run("alone", func(i int) bool { return i%10 == 7 }, func(i int) context.Context {
		if i%10 == 7 {
			return client.Alone(context.Background())
		}
		return context.Background()
	})
	if m := mismatches() - before; m != 0 {
		t.Errorf("%d seq_mismatch DENIALs with the doubtful statements sent alone", m)
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
	for s := uint64(1); s <= uint64(good); s++ {
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
