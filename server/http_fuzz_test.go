package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// The HTTP fuzz targets below run the server's handler in process
// (httptest) over one small log, built the same way every time: fixed
// keys (testlog actors), a fixed clock, and fixed ids, so that the
// envelopes in the seed corpus are valid against it and mutations reach
// past the signature check. The promises they hold the server to: it never
// panics, never answers 5xx except 503 (overloaded, by design), every
// error is an api.Error with a reason_code, a refusal (400, 413, 429, 503)
// logs nothing, and every 200 it gives verifies.

const (
	httpFuzzReceipts = 300 // enough for a full level-0 tile and entry bundle
	httpFuzzGrant    = "c_fuzz"
	httpFuzzWorkflow = "wf_fuzz"
)

// httpFuzzLog is the fuzz targets' log and server.
type httpFuzzLog struct {
	w       *testlog.World
	h       http.Handler
	alice   *testlog.Actor
	agent   *testlog.Actor
	confirm []byte // the CONFIRM's envelope, as submitted
}

func newHTTPFuzzLog(tb testing.TB) *httpFuzzLog {
	tb.Helper()
	w := testlog.NewWorld(tb, testlog.WorldOptions{})
	fl := &httpFuzzLog{w: w, alice: testlog.NewActor("user:alice"), agent: testlog.NewActor("agent:fuzz/a")}
	w.Enroll(fl.alice, "p_alice")
	c := w.Author.Confirm(fl.alice, httpFuzzGrant, testlog.NewGrant(fl.agent, httpFuzzWorkflow, []string{"t/*"}, []string{"act"}, nil,
		map[string]int64{"usd": 1 << 40}, 86400))
	_, raw, err := fl.alice.Sign(c)
	if err != nil {
		tb.Fatal(err)
	}
	fl.confirm = raw
	if res, err := w.L.Append(context.Background(), raw); err != nil || res.Verdict != authority.Accepted {
		tb.Fatalf("confirm: %v %+v", err, res)
	}
	// Receipts in one pipeline (ledger.Submit keeps a caller's order), so
	// that setting up costs a few commits, not hundreds.
	var waits []func() error
	for i := range httpFuzzReceipts {
		st := w.Author.Pending(fl.agent, fmt.Sprintf("r_%d", i), httpFuzzGrant, "step", "act", "t/x", map[string]int64{"usd": 1})
		_, raw, err := fl.agent.Sign(st)
		if err != nil {
			tb.Fatal(err)
		}
		p, err := w.L.Submit(context.Background(), raw)
		if err != nil {
			tb.Fatal(err)
		}
		waits = append(waits, func() error {
			res, err := p.Wait(context.Background())
			if err == nil && res.Verdict != authority.Accepted {
				err = fmt.Errorf("%s: %s", res.Code, res.Reason)
			}
			return err
		})
	}
	for _, wait := range waits {
		if err := wait(); err != nil {
			tb.Fatalf("setting up the fuzz log: %v", err)
		}
	}
	// A DENIAL in the workflow, and a STOP of one step.
	w.Deny(fl.agent, w.Author.Pending(fl.agent, "r_denied", httpFuzzGrant, "step", "act", "elsewhere/x", map[string]int64{"usd": 1}), authority.OutOfScope)
	w.Accept(fl.alice, w.Author.StopStep(fl.alice, "stop_1", httpFuzzWorkflow, "step/stopped", "fuzz"))
	fl.h = server.New(w.L, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()
	return fl
}

// serve runs one request through the handler; a panic fails the target.
func (fl *httpFuzzLog) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	fl.h.ServeHTTP(rec, req)
	return rec
}

// checkStatus holds every answer to the general promises.
func checkStatus(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	code := rec.Code
	if code >= 500 && code != http.StatusServiceUnavailable {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, code, rec.Body.Bytes())
	}
	// ServeMux answers the request target "*" (OPTIONS * and the like)
	// itself, with an empty 400, before any handler of ours.
	if code >= 400 && req.RequestURI != "*" {
		var e api.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.ReasonCode == "" || e.Reason == "" {
			t.Fatalf("%s %s: %d with a body that is not an api.Error: %q", req.Method, req.URL, code, rec.Body.Bytes())
		}
	}
}

// FuzzServerAppend posts arbitrary bodies to POST /v1/entries. Beyond the
// general promises: a refusal leaves the log as it was; a 200 or 403
// carries a checkpoint signed by the log key, an inclusion proof of the
// leaf at its index, the leaf the log holds there, and appends exactly one
// leaf unless it is a duplicate; a 200's leaf holds the submitted
// envelope, a 403's is a DENIAL.
func FuzzServerAppend(f *testing.F) {
	fuzzseed.Add(f)
	fl := newHTTPFuzzLog(f)
	vkey := fl.w.VerifierKey()
	f.Fuzz(func(t *testing.T, body []byte) {
		before := fl.w.L.Head().Size
		req := httptest.NewRequest(http.MethodPost, api.PathEntries, bytes.NewReader(body))
		rec := fl.serve(req)
		checkStatus(t, req, rec)
		after := fl.w.L.Head().Size
		switch rec.Code {
		case http.StatusOK, http.StatusForbidden:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable:
			if after != before {
				t.Fatalf("refused with %d, yet the log grew from %d to %d", rec.Code, before, after)
			}
			return
		default:
			t.Fatalf("POST /v1/entries answered %d: %s", rec.Code, rec.Body.Bytes())
		}
		var doc api.AppendResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%d with a body that is not an append response: %v", rec.Code, err)
		}
		if want := map[int]string{200: api.Accepted, 403: api.Denied}[rec.Code]; doc.Verdict != want {
			t.Fatalf("verdict %q with HTTP %d", doc.Verdict, rec.Code)
		}
		switch {
		case doc.Duplicate && after != before:
			t.Fatalf("a duplicate grew the log from %d to %d", before, after)
		case !doc.Duplicate && (after != before+1 || doc.Index != before):
			t.Fatalf("a new decision at index %d moved the log from %d to %d", doc.Index, before, after)
		}
		cp, err := merkle.OpenCheckpoint([]byte(doc.Checkpoint), fl.w.Origin, vkey)
		if err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
		proof := make([]merkle.Hash, len(doc.InclusionProof))
		for i, s := range doc.InclusionProof {
			if proof[i], err = merkle.ParseHash(s); err != nil {
				t.Fatal(err)
			}
		}
		if err := merkle.VerifyInclusion(doc.Index, cp.Size, merkle.LeafHash(doc.Leaf), proof, cp.Root); err != nil {
			t.Fatalf("inclusion of %d under %d: %v", doc.Index, cp.Size, err)
		}
		stored, err := fl.w.L.LeafBytes(doc.Index)
		if err != nil || !bytes.Equal(stored, doc.Leaf) {
			t.Fatalf("the answer's leaf is not the log's entry %d (%v)", doc.Index, err)
		}
		leaf, _, err := statement.ParseLeaf(doc.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		env, err := sign.ParseEnvelope(leaf.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code == http.StatusForbidden {
			if env.PayloadType != statement.Denial.PayloadType() || doc.ReasonCode == "" {
				t.Fatalf("a 403 whose leaf is a %s (code %q)", env.PayloadType, doc.ReasonCode)
			}
			return
		}
		own, err := sign.ParseEnvelope(body)
		if err != nil {
			t.Fatalf("accepted a body that does not parse as an envelope: %v", err)
		}
		if own.DedupHash() != env.DedupHash() {
			t.Fatalf("accepted, but entry %d holds another submission", doc.Index)
		}
	})
}

// httpFuzzEndpoints are the read endpoints FuzzServerQuery drives; a and
// b fill their path segment and query parameters (escaped as a client
// would).
var httpFuzzEndpoints = []func(a, b string) *url.URL{
	func(a, b string) *url.URL { return q(api.PathInclusion, "index", a, "size", b) },
	func(a, b string) *url.URL { return q(api.PathConsistency, "from", a, "to", b) },
	func(a, b string) *url.URL { return q(api.PathWorkflows+url.PathEscape(a), "after", b) },
	func(a, b string) *url.URL { return q(api.PathRoots + url.PathEscape(a)) },
	func(a, b string) *url.URL { return q("/v1/entries/" + url.PathEscape(a)) },
	func(a, b string) *url.URL { return q(api.PathStatements+url.PathEscape(a), "x", b) },
	func(a, b string) *url.URL { return q(api.PathBundle+"/"+url.PathEscape(a), "workflow", b) },
	func(a, b string) *url.URL { return q(api.PathBundle, "index", a, "format", b) },
	func(a, b string) *url.URL { return q(api.PathKeys + url.PathEscape(a) + "/seq") },
	func(a, b string) *url.URL { return &url.URL{Path: "/tile/" + a, RawQuery: url.QueryEscape(b)} },
	func(a, b string) *url.URL { return q(api.PathWorkflows+url.PathEscape(a)+"/events", "after", b) },
	func(a, b string) *url.URL {
		return q(strings.TrimSuffix(api.PathWorkflows, "/"), "before", a, "limit", b)
	},
	func(a, b string) *url.URL { return q(api.PathWorkflows+url.PathEscape(a)+"/replay", "x", b) },
}

// q builds a URL with path (already escaped) and the non-empty parameters.
func q(path string, kv ...string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	u.RawQuery = v.Encode()
	return u
}

// FuzzServerQuery drives the read endpoints with arbitrary path segments
// and query parameters: proofs (index, size, from, to), a workflow's
// entries (?after=), roots, entries, statements, bundles, key seqs, tile
// paths and event streams. Beyond the general promises, every 200 it
// gives verifies: proofs against the roots the log has, roots equal the
// log's, tiles and entry bundles are the log's bytes.
func FuzzServerQuery(f *testing.F) {
	fuzzseed.Add(f)
	fl := newHTTPFuzzLog(f)
	f.Fuzz(func(t *testing.T, endpoint uint8, a, b string) {
		u := httpFuzzEndpoints[int(endpoint)%len(httpFuzzEndpoints)](a, b)
		ctx, cancel := context.WithCancel(context.Background())
		if strings.HasSuffix(u.Path, "/events") {
			cancel() // a stream ends with its request: after its first round
		}
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://custody.test"+u.String(), nil)
		if err != nil {
			return // no client could send it
		}
		rec := fl.serve(req)
		checkStatus(t, req, rec)
		if rec.Code != http.StatusOK {
			return
		}
		checkRead(t, fl, req, rec.Body.Bytes())
	})
}

// checkRead verifies a 200 answer of a read endpoint against the log.
func checkRead(t *testing.T, fl *httpFuzzLog, req *http.Request, body []byte) {
	t.Helper()
	l := fl.w.L
	p := req.URL.Path
	switch {
	case p == api.PathInclusion:
		var in api.Inclusion
		mustJSON(t, body, &in)
		root := mustRoot(t, fl, in.Size)
		if in.Root != root.String() {
			t.Fatalf("inclusion answered root %s for size %d; the log has %s", in.Root, in.Size, root)
		}
		lh, _ := merkle.ParseHash(in.LeafHash)
		if err := merkle.VerifyInclusion(in.Index, in.Size, lh, hashes(t, in.Proof), root); err != nil {
			t.Fatalf("inclusion proof of %d in %d: %v", in.Index, in.Size, err)
		}
		leaf, err := l.LeafBytes(in.Index)
		if err != nil || merkle.LeafHash(leaf) != lh {
			t.Fatalf("inclusion of %d proves another leaf (%v)", in.Index, err)
		}
	case p == api.PathConsistency:
		var c api.Consistency
		mustJSON(t, body, &c)
		r1, r2 := mustRoot(t, fl, c.From), mustRoot(t, fl, c.To)
		if c.FromRoot != r1.String() || c.ToRoot != r2.String() {
			t.Fatalf("consistency %d..%d answered roots other than the log's", c.From, c.To)
		}
		if err := merkle.VerifyConsistency(c.From, c.To, hashes(t, c.Proof), r1, r2); err != nil {
			t.Fatalf("consistency proof %d..%d: %v", c.From, c.To, err)
		}
	case strings.HasPrefix(p, api.PathRoots):
		var r api.Root
		mustJSON(t, body, &r)
		if want := mustRoot(t, fl, r.Size); r.Root != want.String() {
			t.Fatalf("root of %d: answered %s, the log has %s", r.Size, r.Root, want)
		}
	case strings.HasPrefix(p, "/tile/"):
		ref, err := merkle.ParseTilePath(strings.TrimPrefix(p, "/"))
		if err != nil {
			t.Fatalf("served a tile for a path that does not parse: %v", err)
		}
		var want []byte
		if ref.Entries {
			want, err = l.EntryBundle(ref.Index, ref.Width)
		} else {
			want, err = l.Tile(ref.Level, ref.Index, ref.Width)
			if err == nil && len(body) != ref.Width*merkle.HashSize {
				t.Fatalf("tile %s: %d bytes for width %d", p, len(body), ref.Width)
			}
		}
		if err != nil || !bytes.Equal(body, want) {
			t.Fatalf("tile %s is not the log's (%v)", p, err)
		}
	case strings.HasSuffix(p, "/events"):
		if !bytes.HasPrefix(body, []byte(": watching ")) {
			t.Fatalf("event stream starts with %q", body[:min(len(body), 40)])
		}
	case p == strings.TrimSuffix(api.PathWorkflows, "/"):
		var list api.WorkflowList
		mustJSON(t, body, &list)
		if len(list.Workflows) > api.MaxWorkflowPage {
			t.Fatalf("a page of %d workflows", len(list.Workflows))
		}
		for i, w := range list.Workflows {
			if w.Position >= list.Total || (i > 0 && w.Position >= list.Workflows[i-1].Position) {
				t.Fatalf("workflow list out of order: %+v", list.Workflows)
			}
		}
	case strings.HasPrefix(p, api.PathWorkflows) && strings.HasSuffix(p, "/replay"):
		var rep server.WorkflowReplay
		mustJSON(t, body, &rep)
		if rep.Report == nil || !rep.Report.Verified {
			t.Fatalf("a replay that does not verify: %s", body[:min(len(body), 200)])
		}
	case strings.HasPrefix(p, api.PathWorkflows):
		var wf api.Workflow
		mustJSON(t, body, &wf)
		for i, e := range wf.Entries {
			if i > 0 && e.Index <= wf.Entries[i-1].Index {
				t.Fatalf("workflow entries out of order: %d after %d", e.Index, wf.Entries[i-1].Index)
			}
			checkEntryDoc(t, fl, &e)
		}
	case strings.HasPrefix(p, "/v1/entries/"), strings.HasPrefix(p, api.PathStatements):
		var e api.Entry
		mustJSON(t, body, &e)
		checkEntryDoc(t, fl, &e)
	case strings.HasPrefix(p, api.PathKeys):
		var ks api.KeySeq
		mustJSON(t, body, &ks)
		if len(ks.KeyID) != 64 || strings.Trim(ks.KeyID, "0123456789abcdef") != "" || ks.NextSeq == 0 {
			t.Fatalf("key seq answered for %q (next %d): a key id is 64 lowercase hex digits", ks.KeyID, ks.NextSeq)
		}
	case strings.HasPrefix(p, api.PathBundle):
		if req.URL.Query().Get("format") == "tlog-proof" {
			return
		}
		var v map[string]any
		mustJSON(t, body, &v)
	default:
		t.Fatalf("200 for %s, which no endpoint serves", p)
	}
}

func checkEntryDoc(t *testing.T, fl *httpFuzzLog, e *api.Entry) {
	t.Helper()
	leaf, err := fl.w.L.LeafBytes(e.Index)
	if err != nil || !bytes.Equal(leaf, e.Leaf) || merkle.LeafHash(leaf).String() != e.LeafHash {
		t.Fatalf("entry %d is not the log's (%v)", e.Index, err)
	}
}

func mustJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("a 200 whose body is not the document: %v: %q", err, body[:min(len(body), 200)])
	}
}

func mustRoot(t *testing.T, fl *httpFuzzLog, size uint64) merkle.Hash {
	t.Helper()
	r, err := fl.w.L.RootAt(size)
	if err != nil {
		t.Fatalf("root at %d: %v", size, err)
	}
	return r
}

func hashes(t *testing.T, in []string) []merkle.Hash {
	t.Helper()
	out := make([]merkle.Hash, len(in))
	for i, s := range in {
		h, err := merkle.ParseHash(s)
		if err != nil {
			t.Fatalf("proof hash %q: %v", s, err)
		}
		out[i] = h
	}
	return out
}

// httpFuzzMethods are the methods FuzzServerRequestURI sends.
var httpFuzzMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete, http.MethodOptions, "PUT"}

// FuzzServerRequestURI sends arbitrary request targets, as they would
// arrive on the wire (parsed by net/http), with one of a few methods, and
// holds the answers to the general promises. It reaches what the
// endpoint-shaped FuzzServerQuery cannot: the router (ServeMux) itself,
// escaped and unescaped separators, dot segments and odd queries.
func FuzzServerRequestURI(f *testing.F) {
	fuzzseed.Add(f)
	fl := newHTTPFuzzLog(f)
	f.Fuzz(func(t *testing.T, method uint8, target string) {
		m := httpFuzzMethods[int(method)%len(httpFuzzMethods)]
		raw := m + " " + target + " HTTP/1.1\r\nHost: custody.test\r\nContent-Length: 0\r\n\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http would have answered 400 before the handler
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // event streams end at once
		req = req.WithContext(ctx)
		rec := fl.serve(req)
		checkStatus(t, req, rec)
	})
}

// TestWriteHTTPFuzzSeeds writes the signed envelopes of the seed corpora
// of FuzzServerAppend (they depend on the fuzz log's fixed keys, clock and
// ids). Run it with CUSTODY_WRITE_FUZZ_SEEDS=1 after changing the log.
func TestWriteHTTPFuzzSeeds(t *testing.T) {
	if os.Getenv("CUSTODY_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("writes seed files: set CUSTODY_WRITE_FUZZ_SEEDS=1")
	}
	fl := newHTTPFuzzLog(t)
	au := fl.w.Author
	sign1 := func(a *testlog.Actor, st statement.Statement) []byte {
		_, raw, err := a.Sign(st)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	next := *fl.agent // seqs as the fuzz log leaves them
	pending := func(id, target string) []byte {
		a := next
		return sign1(&a, au.Pending(&a, id, httpFuzzGrant, "step", "act", target, map[string]int64{"usd": 1}))
	}
	valid := pending("r_fuzz_ok", "t/y")
	denied := pending("r_fuzz_denied", "elsewhere/y")
	badSig := bytes.Replace(valid, []byte(`"sig":"`), []byte(`"sig":"AAAA`), 1)
	badSig = append(badSig[:0:0], badSig...)
	a := next
	wrongLog := au.Pending(&a, "r_fuzz_wronglog", httpFuzzGrant, "step", "act", "t/y", map[string]int64{"usd": 1})
	wrongLog.Log = "elsewhere.example/log"
	p := *fl.alice
	stop := sign1(&p, au.StopStep(&p, "stop_fuzz", httpFuzzWorkflow, "other", "fuzz"))
	seeds := map[string][]byte{
		"valid_pending":   valid,
		"denied_scope":    denied,
		"duplicate":       fl.confirm,
		"bad_signature":   badSig,
		"wrong_log":       sign1(&a, wrongLog),
		"stop_step":       stop,
		"whitespace":      append([]byte(" \n"), append(bytes.ReplaceAll(valid, []byte(`,"`), []byte(`, "`)), '\n')...),
		"empty":           {},
		"empty_object":    []byte("{}"),
		"null":            []byte("null"),
		"dup_keys":        bytes.Replace(valid, []byte(`{"payload"`), []byte(`{"payload":"","payload"`), 1),
		"two_signatures":  bytes.Replace(valid, []byte(`}]}`), []byte(`},{"keyid":"00","sig":"AA=="}]}`), 1),
		"unknown_keyid":   bytes.Replace(valid, []byte(`"keyid":"`), []byte(`"keyid":"0000`), 1),
		"deep_nesting":    []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100)),
		"non_json":        []byte("payloadType=application/vnd.custody.receipt.v1+json"),
		"truncated":       valid[:len(valid)/2],
		"payload_type_dn": bytes.Replace(valid, []byte(".receipt."), []byte(".denial."), 1),
	}
	dir := filepath.Join(fuzzseed.Dir(), "FuzzServerAppend")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range seeds {
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(body)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The seeds the test log answers as intended.
	for name, want := range map[string]int{"valid_pending": 200, "denied_scope": 403, "duplicate": 200, "bad_signature": 400, "stop_step": 200} {
		rec := fl.serve(httptest.NewRequest(http.MethodPost, api.PathEntries, bytes.NewReader(seeds[name])))
		if rec.Code != want {
			t.Errorf("seed %s: %d %s, want %d", name, rec.Code, rec.Body.Bytes(), want)
		}
	}
}
