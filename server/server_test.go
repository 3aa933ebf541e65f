package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// TestConcurrentAppends has many agents append at once over HTTP: every
// answer verifies (the client checks checkpoint, proof and leaf), no entry
// is lost or duplicated, and the log holds exactly what was acknowledged.
func TestConcurrentAppends(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	alice := lg.Principal("user:alice")
	const agents, each = 16, 20
	type ack struct {
		index uint64
		leaf  []byte
	}
	var (
		mu   sync.Mutex
		acks = map[uint64][]byte{}
		wg   sync.WaitGroup
	)
	errc := make(chan error, agents)
	for i := range agents {
		wf := fmt.Sprintf("wf_%d", i)
		agent, grant := lg.Agent(alice, fmt.Sprintf("agent:a%d", i), wf, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				r, err := agent.Receipt(context.Background(), servertest.Pending(grant, fmt.Sprintf("s%d", j), nil))
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				if _, dup := acks[r.Index]; dup {
					errc <- fmt.Errorf("index %d acknowledged twice", r.Index)
				}
				acks[r.Index] = r.Leaf
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if len(acks) != agents*each {
		t.Fatalf("%d acknowledgements, want %d", len(acks), agents*each)
	}
	for i, leaf := range acks {
		got, err := lg.Ledger.LeafBytes(i)
		if err != nil || !bytes.Equal(got, leaf) {
			t.Fatalf("entry %d: the log holds other bytes than acknowledged (%v)", i, err)
		}
	}
	// Each workflow holds its CONFIRM and its receipts, in order.
	for i := range agents {
		es, err := lg.Client.Workflow(context.Background(), fmt.Sprintf("wf_%d", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1+each {
			t.Fatalf("workflow %d: %d entries, want %d", i, len(es), 1+each)
		}
	}
	// 1 GENESIS + 1 PRINCIPAL + agents CONFIRMs + the receipts.
	if got, want := lg.Ledger.Head().Size, uint64(2+agents+agents*each); got != want {
		t.Fatalf("tree size %d, want %d", got, want)
	}
}

// TestDenialRoundTrip: a receipt outside the grant's scope is answered 403
// with its reason and the DENIAL's inclusion proof.
func TestDenialRoundTrip(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_1", map[string]int64{"budget": 10})
	p := servertest.Pending(grant, "s1", map[string]int64{"budget": 11})
	r, err := agent.Receipt(context.Background(), p)
	var de *client.DeniedError
	if !errors.As(err, &de) || r == nil || r.ReasonCode != "limit_exceeded" {
		t.Fatalf("got %v, %+v; want a limit_exceeded denial", err, r)
	}
	// The raw answer: 403 with the documented fields.
	p2 := servertest.Pending(grant, "s2", map[string]int64{"budget": 99})
	p2.ReceiptID, p2.Workflow = "r_raw", "wf_1"
	h := p2.Head()
	h.Type, h.Log, h.Actor, h.Seq = statement.Receipt, servertest.Origin, "agent:a", 1 // the denial consumed no seq
	h.Timestamp = r.Statement.Head().Timestamp
	p2.ScopeHash = r.Statement.(*statement.ReceiptDoc).ScopeHash
	_, raw, err := statement.Sign(lg.KeyOf(agent), p2)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(lg.URL+"/v1/entries", "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	json.NewDecoder(resp.Body).Decode(&doc)
	if resp.StatusCode != http.StatusForbidden || doc["reason_code"] != "limit_exceeded" || doc["reason"] == "" ||
		doc["denial_index"] == nil || doc["checkpoint"] == "" || doc["inclusion_proof"] == nil {
		t.Fatalf("HTTP %d %v", resp.StatusCode, doc)
	}
	// The denial is in the log, and counted.
	_, _, metrics := lg.Get("/metrics")
	if !strings.Contains(string(metrics), `custody_denials_total{reason_code="limit_exceeded"} 2`) {
		t.Fatalf("metrics do not count the denials:\n%s", grep(string(metrics), "custody_denials"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBadBodies: malformed, unsigned and oversized bodies are answered
// 4xx with a reason code, and the server keeps working.
func TestBadBodies(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	pub, priv := servertest.Key(t)
	unknown, err := sign.Sign(priv, "receipt", []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	unknownRaw, _ := unknown.Canonical()
	adminEnv := func() sign.Envelope {
		env, _, err := statement.Sign(lg.AdminKey, &statement.PrincipalDoc{Header: statement.Header{Type: statement.Principal,
			Timestamp: statement.FormatTimestamp(time.Now()), Log: servertest.Origin, Actor: "admin", Seq: 2},
			PrincipalID: "p_x", Op: statement.OpEnroll, Name: "user:x", PublicKey: sign.EncodePublicKey(pub)})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}()
	// Flip one bit of the signature.
	sig, _ := base64.StdEncoding.DecodeString(adminEnv.Signatures[0].Sig)
	sig[10] ^= 1
	adminEnv.Signatures[0].Sig = base64.StdEncoding.EncodeToString(sig)
	badSig, _ := adminEnv.Canonical()
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"not json", []byte("hello"), 400, "bad_envelope"},
		{"empty", nil, 400, "bad_envelope"},
		{"wrong shape", []byte(`{"payloadType":"x"}`), 400, "bad_envelope"},
		{"unknown key", unknownRaw, 400, "unknown_key"},
		{"bad signature", badSig, 400, "bad_signature"},
		{"too large", bytes.Repeat([]byte("a"), api.MaxBody+1), 413, "too_large"},
		{"too large for a leaf", []byte(`{"payloadType":"application/vnd.custody.receipt.v1+json","payload":"` + strings.Repeat("QUFB", 30000) + `","signatures":[{"keyid":"` + strings.Repeat("a", 64) + `","sig":"` + strings.Repeat("A", 86) + `=="}]}`), 413, "too_large"},
	} {
		resp, err := http.Post(lg.URL+"/v1/entries", "application/json", bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var doc api.Error
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != tc.status || doc.ReasonCode != tc.code || doc.Reason == "" {
			t.Errorf("%s: HTTP %d %+v; want %d %s", tc.name, resp.StatusCode, doc, tc.status, tc.code)
		}
	}
	if code, _, _ := lg.Get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _, _ := lg.Get("/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	if _, err := lg.Admin.Append(context.Background(), &statement.PrincipalDoc{PrincipalID: "p_ok", Op: statement.OpEnroll,
		Name: "user:ok", PublicKey: sign.EncodePublicKey(pub)}); err != nil {
		t.Fatalf("an append after the bad bodies: %v", err)
	}
	// Nothing refused was logged: GENESIS and the one PRINCIPAL.
	if size := lg.Ledger.Head().Size; size != 2 {
		t.Fatalf("size %d, want 2", size)
	}
}

// TestReads covers the read endpoints against the ledger's own answers.
func TestReads(t *testing.T) {
	lg := servertest.Start(t, server.Options{PageSize: 3})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf/slash", nil)
	var last *client.Receipt
	for i := range 5 {
		r, err := agent.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("s%d", i), nil))
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	c := lg.Client
	e, err := c.Entry(ctx, last.Index)
	if err != nil || e.Kind != "RECEIPT" || e.Workflow != "wf/slash" || !bytes.Equal(e.Leaf, last.Leaf) || e.PrevInWorkflow == nil {
		t.Fatalf("entry: %+v, %v", e, err)
	}
	byID, err := c.Statement(ctx, last.Statement.ID())
	if err != nil || byID.Index != last.Index {
		t.Fatalf("statement: %+v, %v", byID, err)
	}
	if _, err := c.Statement(ctx, "nope"); !client.NotFound(err) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := c.Entry(ctx, 999); !client.NotFound(err) {
		t.Fatalf("entry beyond the log: %v", err)
	}
	size := lg.Ledger.Head().Size
	if _, err := c.Inclusion(ctx, 3, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inclusion(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Consistency(ctx, 2, size); err != nil {
		t.Fatal(err)
	}
	root, err := c.RootAt(ctx, size)
	if err != nil || root != lg.Ledger.Head().Root {
		t.Fatalf("root: %v %v", root, err)
	}
	ks, err := c.KeySeq(ctx, sign.KeyID(agent.PublicKey()))
	if err != nil || ks.NextSeq != 6 || ks.Name != "agent:a" || ks.Role == "" || !ks.Bound {
		t.Fatalf("key seq: %+v %v", ks, err)
	}
	ks, err = c.KeySeq(ctx, strings.Repeat("0", 64))
	if err != nil || ks.NextSeq != 1 || ks.Bound {
		t.Fatalf("unknown key: %+v %v", ks, err)
	}
	// Paging through a workflow.
	es, err := c.Workflow(ctx, "wf/slash", 0)
	if err != nil || len(es) != 6 {
		t.Fatalf("workflow: %d entries, %v", len(es), err)
	}
	// Bundles verify offline.
	_, v, err := c.VerifyBundle(ctx, last.Statement.ID(), true)
	if err != nil || !v.Valid {
		t.Fatalf("bundle: %v %+v", err, v)
	}
	b, err := c.BundleAt(ctx, last.Index, false)
	if err != nil || b.Subject != last.Index {
		t.Fatalf("bundle at: %v", err)
	}
	if v, err := verify.VerifyBundle(b, lg.VKey); err != nil || !v.Valid {
		t.Fatalf("bundle at: %v %+v", err, v)
	}
	p, err := c.TLogProof(ctx, last.Index)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyTLogProof(p, lg.VKey); err != nil || !v.Valid {
		t.Fatalf("tlog-proof: %v %+v", err, v)
	}
	if _, err := c.Log(ctx); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/v1/entries/x":                         400,
		"/v1/proof/inclusion":                   400,
		"/v1/proof/inclusion?index=99":          404,
		"/v1/proof/consistency?from=0":          404,
		"/v1/bundle?index=1&format=zip":         400,
		"/v1/keys/short/seq":                    400,
		"/v1/nothing":                           404,
		"/v1/roots/100000":                      404,
		"/v1/workflows/none":                    404,
		"/v1/workflows/wf%2Fslash?after=100000": 200,
	} {
		if code, _, body := lg.Get(path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}

// TestCheckpointHeaders: the checkpoint is a signed note, never cached.
func TestCheckpointHeaders(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	code, h, body := lg.Get("/checkpoint")
	if code != 200 || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Cache-Control") != "no-cache" {
		t.Fatalf("checkpoint: %d %v", code, h)
	}
	cp, err := merkle.OpenCheckpoint(body, servertest.Origin, lg.VKey)
	if err != nil || cp.Size != 1 {
		t.Fatalf("checkpoint: %v %+v", err, cp)
	}
}
