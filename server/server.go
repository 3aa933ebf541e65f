// Package server serves a custody ledger over HTTP: appends that are
// answered only once durable and under a signed checkpoint, reads and
// proofs, bundles, a workflow's entries as server-sent events, the log as
// C2SP tlog-tiles, health and Prometheus metrics. The wire documents are
// in package api; package client is the Go client.
//
// # Promises
//
//   - POST /v1/entries answers 200 or 403 only after the ledger committed
//     the decision (fsynced) and published a checkpoint that includes it;
//     the answer carries the leaf, the checkpoint and the inclusion proof.
//     Any other answer means nothing was acknowledged.
//   - Appends in flight are capped (Options.MaxInFlight); past the cap the
//     server answers 503 with Retry-After at once and queues nothing.
//   - Serve shuts down gracefully: it stops accepting connections, ends
//     event streams, and waits for every in-flight append to be answered.
//     It never closes the ledger; its caller does, after Serve returns.
//
// It does not authenticate callers: every write is a signed envelope the
// ledger judges, and every read is public (the log is a transparency log).
// Put it behind TLS (Serve can do TLS itself) and a rate-limiting proxy
// when it faces the internet.
package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/custodylog/custody/console"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/witness"
	"github.com/custodylog/custody/witness/cosign"
)

// DefaultMemoryLimit is the soft limit on the Go heap custody serve runs
// under unless told otherwise (runtime/debug.SetMemoryLimit): without
// one, the collector lets the heap grow to twice what is live, and what is
// live peaks while Badger compacts. The big-log benchmark measures under
// the same limit.
const DefaultMemoryLimit = 384 << 20

// Options tune a Server. The zero value is sensible.
type Options struct {
	// Console serves the console (package console) at /console/; it is off
	// by default. ConsoleOrigin, its web origin as console.CheckOrigin
	// returns it, is then the only browser origin allowed to change state
	// (console.Guard).
	Console       bool
	ConsoleOrigin string
	// ConsoleRPID is the WebAuthn relying party id of the console's
	// passkey registration and sign-in (default: ConsoleOrigin's host);
	// ConsoleSession how long a sign-in lasts (default
	// console.DefaultSession). See console.Auth.
	ConsoleRPID    string
	ConsoleSession time.Duration
	// MaxInFlight caps concurrent appends (default 1024). The ledger
	// batches what is in flight into one commit, so the cap bounds memory
	// and latency, not throughput.
	MaxInFlight int
	// MaxReading caps append bodies being read at once (default 4 ×
	// MaxInFlight); each is at most 128 KiB, so this bounds their memory.
	// A body is read before its append takes a MaxInFlight slot, so slow
	// senders never hold the slots honest appends need.
	MaxReading int
	// MaxReadingPerAddr caps the append bodies one client (an IPv4
	// address, an IPv6 /64) may have being read at once, across every log
	// of the process (default MaxReading/64, at least 4): slow bodies from
	// one client cannot take the slots everyone shares. While a client
	// holds all of its own, Serve holds its new connections unread (at
	// most MaxReading of them) until one of its bodies is done, or for the
	// header timeout (conns.go).
	MaxReadingPerAddr int
	// BodyTimeout bounds reading one append's body (default 5s).
	BodyTimeout time.Duration
	// MaxStreams caps open event streams (default 1024); past it a new
	// stream is answered 503 with Retry-After.
	MaxStreams int
	// RetryAfter is the Retry-After of a 503 (default 1s).
	RetryAfter time.Duration
	// KeepAlive is the interval of comments on an idle event stream
	// (default 15s), so proxies keep it open and clients notice a dead one.
	KeepAlive time.Duration
	// MaxStreamsPerAddr caps the event streams one client (an IPv4
	// address, an IPv6 /64) may hold open, across every log of the
	// process (default 64; see readcap.go).
	MaxStreamsPerAddr int
	// MaxStreamsPerWorkflow caps the event streams open on one workflow
	// (default 128), besides the streams runtimes open for their own
	// steps (MaxStepStreams).
	MaxStreamsPerWorkflow int
	// MaxStepStreams caps the streams runtimes open for their own steps
	// (default 1024): a stream whose request is signed by the key that
	// logged the workflow's pending RECEIPT (api.HeaderStreamStep) is
	// counted here, not against MaxStreams or the per-client and
	// per-workflow caps, so that no other client can crowd it out; at
	// most two such streams per step.
	MaxStepStreams int
	// StreamOpensPerAddr is how many new event streams a second one
	// client address may open, after a first MaxStreamsPerAddr at once
	// (default 20; negative: no limit). Past it a new stream is answered
	// 503 with Retry-After. A runtime opens one stream per workflow and
	// another only to resume one.
	StreamOpensPerAddr float64
	// MaxHeavyReads bounds the bundle, workflow-page and stream catch-up
	// reads running at once (default: half the cores, at least one, so
	// the sequencer and the signature workers keep the rest);
	// HeavyReadWait is how long a request waits for one before it is
	// answered 503 (default 10s; a waiting request holds no memory).
	MaxHeavyReads int
	HeavyReadWait time.Duration
	// MaxAnswerBytes bounds the bytes of bundles and workflow pages being
	// sent at once (default 64 MiB; one answer alone always goes): past
	// it a new one is answered 503. A heavy read gives its token back
	// once its answer is built, so a client that does not read holds
	// memory within this bound, never a token (readcap.go).
	MaxAnswerBytes int
	// StreamWriteTimeout bounds one write to an event stream (default
	// 10s): a client that has not taken what was sent by then is cut.
	// StreamLag is how many events of a workflow the server keeps for
	// its streams (default 1024): a stream further behind is cut with an
	// event telling it to resume. StreamBuffer bounds the bytes of
	// events kept for all streams together (default 16 MiB): past it the
	// oldest go first. See fanout.go.
	StreamWriteTimeout time.Duration
	StreamLag          int
	StreamBuffer       int
	// PageSize bounds the entries of one GET /v1/workflows/{id} (default 1000).
	PageSize int
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Registry, if set, is where metrics are registered and what /metrics
	// serves; by default each Server has its own registry with the Go and
	// process collectors.
	Registry *prometheus.Registry
	// Registerer, if set, is where the server registers its metrics
	// instead of Registry, which /metrics still serves: several logs'
	// servers in one process register in one Registry, each through
	// prometheus.WrapRegistererWith and a label naming its log.
	Registerer prometheus.Registerer

	// WitnessPolicy, when set, names the witnesses the log sends each new
	// checkpoint to (C2SP tlog-witness) and the quorum of cosignatures it
	// wants. GET /checkpoint then serves the newest checkpoint with the
	// cosignatures gathered so far, and bundles and tlog-proofs are made
	// under the newest checkpoint that meets the quorum. Every witness the
	// quorum counts needs a URL.
	WitnessPolicy *witness.Policy
	// Witness tunes the witness client (timeouts, interval, logger); its
	// Registerer and Logger default to the server's.
	Witness cosign.Options
	// WitnessFinality acknowledges a pending RECEIPT only under a
	// checkpoint that meets the quorum, carrying its cosignatures; when
	// none does within WitnessTimeout (default 10s) the answer is 503
	// unwitnessed and nothing was acknowledged (the entry stays logged,
	// and the same submission sent again is answered once witnessed).
	// Other statements are answered as soon as they are durable.
	WitnessFinality bool
	WitnessTimeout  time.Duration
	// ApprovalWebhook, when set, is a URL the server POSTs each newly held
	// receipt to (DESIGN §7), signed with ApprovalWebhookSecret
	// (X-Custody-Signature: sha256=<HMAC-SHA256 of the body>), retried
	// with backoff, off the append path. Only the server that sequences
	// the log sends.
	ApprovalWebhook       string
	ApprovalWebhookSecret []byte
	// Leading, when set, says when this server leads the log (sequences
	// it): true when it starts leading, false when it stops. The witness
	// client runs only while it leads. Without it, it always leads (one
	// server on its data folder).
	Leading <-chan bool
}

func (o *Options) defaults() {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1024
	}
	if o.MaxReading <= 0 {
		o.MaxReading = 4 * o.MaxInFlight
	}
	if o.MaxReadingPerAddr <= 0 {
		o.MaxReadingPerAddr = max(4, o.MaxReading/64)
	}
	if o.MaxStreamsPerWorkflow <= 0 {
		o.MaxStreamsPerWorkflow = 128
	}
	if o.MaxStepStreams <= 0 {
		o.MaxStepStreams = 1024
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 5 * time.Second
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 1024
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 1000
	}
	if o.MaxStreamsPerAddr <= 0 {
		o.MaxStreamsPerAddr = 64
	}
	if o.StreamOpensPerAddr == 0 {
		o.StreamOpensPerAddr = 20
	}
	if o.StreamWriteTimeout <= 0 {
		o.StreamWriteTimeout = 10 * time.Second
	}
	if o.StreamLag <= 0 {
		o.StreamLag = 1024
	}
	if o.StreamBuffer <= 0 {
		o.StreamBuffer = 16 << 20
	}
	if o.MaxHeavyReads <= 0 {
		o.MaxHeavyReads = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if o.MaxAnswerBytes <= 0 {
		o.MaxAnswerBytes = 64 << 20
	}
	if o.HeavyReadWait <= 0 {
		o.HeavyReadWait = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.WitnessTimeout <= 0 {
		o.WitnessTimeout = 10 * time.Second
	}
}

// Server is the HTTP face of one open ledger.
type Server struct {
	l    *ledger.Ledger
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
	m    *metrics

	sem     chan struct{} // one token per append in flight
	reading chan struct{} // one token per append body being read
	streams chan struct{} // one token per open event stream
	heavy   chan struct{} // one token per heavy read (readcap.go)
	waiters chan struct{} // one token per request waiting for a witnessed checkpoint (witness.go)
	cl      *clients      // what each client holds, shared by the logs of a process (clients.go)
	steps   chan struct{} // one token per stream a runtime opened for its own step
	wfs     keyCount      // open streams per workflow (not counting step streams)
	events  eventCache    // encoded stream events, shared by streams
	hub     hub           // the workflows streams follow (fanout.go)
	answers answerBudget  // large answers being written (readcap.go)

	cos        *cosign.Cosigner // nil without a witness policy
	witnessErr error            // why the witness client could not start
	restoreErr error            // why the stored witnessed checkpoint was refused (witness.go)
	witnessing atomic.Bool      // the witness client runs (witness.go)

	mu       sync.Mutex
	draining bool          // guarded by mu: appends answer 503
	stopping chan struct{} // closed when event streams must end
	appends  sync.WaitGroup

	// listWaits holds one token per GET /v1/approvals waiting for its
	// list to change (approvals.go), at most MaxStreams.
	listWaits chan struct{}
}

// New returns a server for l. The caller keeps ownership of l.
func New(l *ledger.Ledger, opts Options) *Server {
	opts.defaults()
	s := &Server{l: l, opts: opts, log: opts.Logger, mux: http.NewServeMux(),
		sem: make(chan struct{}, opts.MaxInFlight), reading: make(chan struct{}, opts.MaxReading),
		streams: make(chan struct{}, opts.MaxStreams), stopping: make(chan struct{}),
		cl: &clients{}, steps: make(chan struct{}, opts.MaxStepStreams),
		heavy: make(chan struct{}, opts.MaxHeavyReads), waiters: make(chan struct{}, opts.MaxInFlight), events: eventCache{max: 4096}}
	s.hub = hub{s: s, maxBytes: opts.StreamBuffer, lag: opts.StreamLag}
	s.listWaits = make(chan struct{}, opts.MaxStreams)
	s.answers.max = opts.MaxAnswerBytes
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	}
	var regr prometheus.Registerer = reg
	if opts.Registerer != nil {
		regr = opts.Registerer
	}
	s.m = newMetrics(regr, s)
	if opts.WitnessPolicy != nil {
		wo := opts.Witness
		if wo.Registerer == nil {
			wo.Registerer = regr
		}
		if wo.Logger == nil {
			wo.Logger = s.log
		}
		if wo.Store == nil {
			wo.Store = l.Store()
		}
		s.cos, s.witnessErr = cosign.New(opts.WitnessPolicy, l, wo)
		if s.cos != nil {
			s.restoreWitnessed()
		}
	}
	s.routes(reg)
	if opts.ApprovalWebhook != "" {
		s.startWebhook()
	}
	return s
}

func (s *Server) routes(reg *prometheus.Registry) {
	m := s.mux
	m.HandleFunc("POST /v1/entries", s.postEntry)
	m.HandleFunc("POST /v1/entries/batch", s.postBatch)
	m.HandleFunc("GET /v1/entries/{index}", s.getEntry)
	// Ids may hold "/": clients escape it (%2F), and a wildcard matches one
	// escaped segment.
	m.HandleFunc("GET /v1/statements/{id}", s.getStatement)
	m.HandleFunc("GET /v1/proof/inclusion", s.getInclusion)
	m.HandleFunc("GET /v1/proof/consistency", s.getConsistency)
	m.HandleFunc("GET /v1/roots/{size}", s.getRoot)
	m.HandleFunc("GET /v1/bundle", s.getBundle)
	m.HandleFunc("GET /v1/bundle/{id}", s.getBundle)
	m.HandleFunc("GET /v1/workflows", s.getWorkflows)
	m.HandleFunc("GET /v1/workflows/{id}", s.getWorkflow)
	m.HandleFunc("GET /v1/workflows/{id}/replay", s.getReplay)
	m.HandleFunc("GET /v1/workflows/{id}/events", s.getEvents)
	m.HandleFunc("GET /v1/keys/{keyid}/seq", s.getKeySeq)
	m.HandleFunc("GET /v1/approvals", s.getApprovals)
	m.HandleFunc("GET /v1/approvals/{id}", s.getApproval)
	m.HandleFunc("GET /v1/log", s.getLog)
	m.HandleFunc("GET /checkpoint", s.getCheckpoint)
	m.HandleFunc("GET /v1/checkpoint/witnessed", s.getWitnessed)
	m.HandleFunc("GET /tile/{path...}", s.getTile)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeText(w, "ok\n") })
	m.HandleFunc("GET /readyz", s.ready)
	m.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if s.opts.Console {
		m.Handle(console.Prefix, console.Handler())
		s.consoleAuth(m)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	if s.opts.Console {
		return console.Guard(s.opts.ConsoleOrigin, s.mux)
	}
	return s.mux
}

// Drain makes new appends answer 503, waits until those in flight are
// answered, and stops the event streams' readers of the store. Serve calls it on shutdown; it is exported for servers a
// caller runs itself.
func (s *Server) Drain() {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		close(s.stopping)
	}
	s.mu.Unlock()
	s.appends.Wait()
	s.hub.close()
}

// ready answers 200 while the server takes appends.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "shutting down")
		return
	}
	if s.l.Head().Size == 0 {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the log has no GENESIS")
		return
	}
	// Every server of a log is ready for reads; the lines after the
	// first say which one sequences it.
	role := s.l.Role()
	switch {
	case !role.Shared:
		writeText(w, "ready\nrole leader (the only server of its data folder)\n")
	case role.Leader:
		writeText(w, fmt.Sprintf("ready\nrole leader\nepoch %d\nleader %s\n", role.Epoch, role.LeaderURL))
	case role.LeaderURL != "":
		w.Header().Set(api.HeaderLeader, role.LeaderURL)
		writeText(w, fmt.Sprintf("ready\nrole follower\nepoch %d\nleader %s\n", role.Epoch, role.LeaderURL))
	default:
		writeText(w, fmt.Sprintf("ready\nrole follower\nepoch %d\nleader none (the lease is free; a server takes it within its lease time)\n", role.Epoch))
	}
}

// writeJSON writes v with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b []byte
	var err error
	if out, isAnswer := v.(*api.AppendResponse); isAnswer {
		var ok bool
		size := 256 + base64.StdEncoding.EncodedLen(len(out.Leaf)) + len(out.Checkpoint) + 48*len(out.InclusionProof) + len(out.Reason)
		if b, ok = appendAnswer(make([]byte, 0, size), out); !ok {
			b, err = json.Marshal(v)
		}
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, reason string) {
	b, _ := json.Marshal(api.Error{ReasonCode: code, Reason: reason})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(s))
}

// notFoundOr maps ledger.ErrNotFound to 404 and anything else to 500.
func (s *Server) readError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ledger.ErrNotFound) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
		return
	}
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client went away (or the server is stopping) before the
		// read ended: not the server's failure, and nobody reads the answer.
		s.unavailable(w, api.CodeUnavailable, "the request ended before the read: "+err.Error())
		return
	}
	if errors.Is(err, storage.ErrDiskFull) {
		s.unavailable(w, api.CodeDiskFull, err.Error())
		return
	}
	if storeTrouble(err) {
		s.log.Warn("read failed: the store", "path", r.URL.Path, "err", err)
		s.unavailable(w, api.CodeUnavailable, err.Error())
		return
	}
	s.log.Error("read failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
}

// uintParam parses a decimal query parameter; ok is false (and the answer
// written) when it is malformed or, if required, missing.
func uintParam(w http.ResponseWriter, r *http.Request, name string, required bool) (v uint64, set, ok bool) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		if required {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "missing ?"+name+"=")
			return 0, false, false
		}
		return 0, false, true
	}
	v, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, name+" "+strconv.Quote(raw)+" is not a decimal integer")
		return 0, false, false
	}
	return v, true, true
}
