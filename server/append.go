package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
)

// postEntry submits one envelope and answers once the decision is durable
// under a signed checkpoint.
func (s *Server) postEntry(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		s.m.appends.WithLabelValues("unavailable").Inc()
		s.unavailable(w, api.CodeUnavailable, "the server is shutting down")
		return
	}
	s.appends.Add(1) // under mu, so Drain never waits on an append it did not see
	s.mu.Unlock()
	defer s.appends.Done()

	// A body declared over the cap is refused unread (body.go).
	if s.declaredTooLarge(w, r, start, "the body", api.MaxBody) {
		return
	}
	// Read the body first, under its own deadline and cap, so that a slow
	// sender never holds a slot an honest append needs.
	doneReading, refused := s.takeReading(w, r)
	if refused != "" {
		s.m.appends.WithLabelValues("overloaded").Inc()
		s.unavailable(w, api.CodeOverloaded, refused)
		return
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	body, err := readBody(w, r, api.MaxBody)
	doneReading()
	if err == nil {
		// Never queue without bound: when the cap is reached, say so at once.
		select {
		case s.sem <- struct{}{}:
		default:
			s.m.appends.WithLabelValues("overloaded").Inc()
			s.unavailable(w, api.CodeOverloaded, "too many appends in flight; retry later")
			return
		}
		defer func() { <-s.sem }()
		s.m.inFlight.Inc()
		defer s.m.inFlight.Dec()
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.holdTooLarge(r)
			s.refused(w, start, authority.TooLarge, "the body exceeds "+strconv.Itoa(api.MaxBody)+" bytes")
			return
		}
		s.m.appends.WithLabelValues("error").Inc()
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "reading the body: "+err.Error())
		return
	}
	res, err := s.l.Append(r.Context(), body)
	s.answerAppend(w, r, start, res, err)
}

// storeTrouble reports whether err is the store failing in a way that
// is not custody's own bug: the database away or refusing for want of
// resources, a lease that moved on, a commit of unknown outcome, or any
// PostgreSQL error outside the classes custody's own mistakes fall in
// (22 data exception, 23 integrity constraint, 42 syntax or access rule,
// 0A feature not supported). Nothing was acknowledged, and sending the
// same bytes again is safe, so it is answered 503 with Retry-After.
func storeTrouble(err error) bool {
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrCommitUnknown) {
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		switch c := se.SQLState(); {
		case len(c) < 2:
			return true
		case c[:2] == "22", c[:2] == "23", c[:2] == "42", c[:2] == "0A":
			return false
		default:
			return true
		}
	}
	return false
}

// answerAppend writes the answer to one submission, given the ledger's
// result: the decision, a refusal, or why nothing was acknowledged.
func (s *Server) answerAppend(w http.ResponseWriter, r *http.Request, start time.Time, res *ledger.Result, err error) {
	var de *authority.DecisionError
	switch {
	case errors.As(err, &de):
		s.refused(w, start, de.Code, de.Reason)
		return
	case errors.Is(err, ledger.ErrClosed):
		s.m.appends.WithLabelValues("unavailable").Inc()
		s.unavailable(w, api.CodeUnavailable, "the ledger is closed")
		return
	case errors.Is(err, ledger.ErrDiskFull):
		// Nothing was acknowledged, and the ledger resumes by itself once
		// space is freed: retryable.
		s.m.appends.WithLabelValues("unavailable").Inc()
		s.unavailable(w, api.CodeDiskFull, "nothing was acknowledged: "+err.Error())
		return
	case errors.Is(err, ledger.ErrNotLeader):
		s.m.appends.WithLabelValues("not_leader").Inc()
		var nl *ledger.NotLeaderError
		leader := ""
		if errors.As(err, &nl) {
			leader = nl.Leader
		}
		if leader != "" {
			w.Header().Set(api.HeaderLeader, leader)
		}
		w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
		writeJSON(w, http.StatusServiceUnavailable, api.Error{ReasonCode: api.CodeNotLeader,
			Reason: "nothing was acknowledged: " + err.Error(), Leader: leader})
		return
	case storeTrouble(err):
		// The database is away, or another server took over: fail closed.
		// Sending the same bytes again is safe (they are deduplicated).
		s.m.appends.WithLabelValues("unavailable").Inc()
		s.log.Warn("append not acknowledged", "err", err)
		s.unavailable(w, api.CodeUnavailable, "nothing was acknowledged: "+err.Error())
		return
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The caller went away; it gets no acknowledgement.
		s.m.appends.WithLabelValues("abandoned").Inc()
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the request ended before the decision: "+err.Error())
		return
	case err != nil:
		s.m.appends.WithLabelValues("error").Inc()
		s.log.Error("append failed", "err", err)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "nothing was acknowledged: "+err.Error())
		return
	}
	leaf := res.Leaf
	if leaf == nil {
		leaf, err = s.l.LeafBytes(res.Index)
	}
	if err != nil {
		s.m.appends.WithLabelValues("error").Inc()
		s.log.Error("reading an acknowledged leaf", "index", res.Index, "err", err)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "entry "+strconv.FormatUint(res.Index, 10)+" is durable, but reading it back failed: "+err.Error())
		return
	}
	out := api.AppendResponse{Verdict: api.Accepted, Index: res.Index, Duplicate: res.Duplicate, Notes: res.Notes,
		Leaf: leaf, Checkpoint: string(res.Head.Checkpoint), InclusionProof: hashStrings(res.Proof)}
	if s.cos != nil && s.opts.WitnessFinality && res.Verdict == authority.Accepted && gatesAStep(leaf) {
		cp, proof, err := s.witnessedAnswer(r.Context(), res)
		if err != nil {
			s.unwitnessed(w, start, res, err)
			return
		}
		out.Checkpoint, out.InclusionProof = cp, hashStrings(proof)
	}
	status := http.StatusOK
	if res.Verdict == authority.Accepted && res.Hold != nil {
		out.Verdict, out.ExpiresAt, out.Rules = api.Held, statement.FormatLoggedAt(res.Hold.ExpiresAt), holdRules(res.Hold.Rules)
		status = http.StatusAccepted
	}
	if res.Verdict != authority.Accepted {
		idx := res.Index
		out.Verdict, out.DenialIndex, out.ReasonCode, out.Reason = api.Denied, &idx, string(res.Code), res.Reason
		status = http.StatusForbidden
		s.m.denials.WithLabelValues(string(res.Code)).Inc()
	}
	s.m.answer(out.Verdict, time.Since(start).Seconds())
	s.logDecision(r, start, out.Verdict, out.ReasonCode, &res.Index, res.Duplicate)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, &out)
}

// refused answers a submission the ledger refused without logging it.
func (s *Server) refused(w http.ResponseWriter, start time.Time, code authority.Code, reason string) {
	s.log.Info("append", "verdict", "refused", "reason_code", string(code), "latency_ms", ms(time.Since(start)))
	s.m.appends.WithLabelValues("refused").Inc()
	s.m.refusals.WithLabelValues(string(code)).Inc()
	s.m.latency.WithLabelValues("refused").Observe(time.Since(start).Seconds())
	status := http.StatusBadRequest
	switch code {
	case authority.TooLarge:
		status = http.StatusRequestEntityTooLarge
	case authority.RateLimited:
		w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
		status = http.StatusTooManyRequests
	case authority.Withdrawn:
		status = http.StatusConflict // only in a batch: sign it again with the seq named
	}
	writeError(w, status, string(code), reason)
}

func (s *Server) unavailable(w http.ResponseWriter, code, reason string) {
	w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
	writeError(w, http.StatusServiceUnavailable, code, reason)
}

// logDecision writes the access log line of one append decision, at info:
// verdict, reason code, index and latency (an operator's first question
// about a denial is which entry and why).
//
// It is written before the answer, every time, as the handler writes it:
// one line per decision, with typed attributes, which the handler formats
// without boxing them (this runs once per append).
func (s *Server) logDecision(r *http.Request, start time.Time, verdict, code string, index *uint64, duplicate bool) {
	ctx := context.Background()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := [6]slog.Attr{slog.String("verdict", verdict), slog.Uint64("index", *index),
		slog.Float64("latency_ms", ms(time.Since(start))), slog.String("remote", r.RemoteAddr)}
	n := 4
	if code != "" {
		attrs[n] = slog.String("reason_code", code)
		n++
	}
	if duplicate {
		attrs[n] = slog.Bool("duplicate", true)
		n++
	}
	// The record is handed to the handler as LogAttrs would, without the
	// caller's program counter (runtime.Callers, a fifth of the line's
	// CPU): the line names no source file, and no logger of custody's
	// asks for one (AddSource).
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "append", 0)
	rec.AddAttrs(attrs[:n]...)
	_ = s.log.Handler().Handle(ctx, rec)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
