package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server/api"
)

// postBatch submits several envelopes in one request, in the order given,
// and answers once every decision is durable. The ledger sequences them
// in that order (Ledger.Submit from one goroutine), so a runtime can send
// its statements with consecutive seqs and have them decided in one
// batch instead of one round trip each. Each answer is exactly what
// POST /v1/entries would have answered for that envelope alone: its
// status and its JSON body.
//
// One answer exists only in a batch: a statement whose seq is too high
// only because earlier statements of its key in the batch were not
// accepted is withdrawn, not decided (409, withdrawn; ledger.Batch), so
// that one denial costs the statements after it no seq_mismatch DENIAL.
//
// The batch takes one in-flight slot, whatever its length.
func (s *Server) postBatch(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		s.unavailable(w, api.CodeUnavailable, "the server is shutting down")
		return
	}
	s.appends.Add(1)
	s.mu.Unlock()
	defer s.appends.Done()

	select {
	case s.reading <- struct{}{}:
	default:
		s.m.appends.WithLabelValues("overloaded").Inc()
		s.unavailable(w, api.CodeOverloaded, "too many appends being received; retry later")
		return
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	var req api.BatchRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, api.MaxBatchBody))
	err := dec.Decode(&req)
	<-s.reading
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.refused(w, start, authority.TooLarge, "the batch exceeds "+strconv.Itoa(api.MaxBatchBody)+" bytes")
			return
		}
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "the body is not a batch ({\"envelopes\":[...]}): "+err.Error())
		return
	}
	if n := len(req.Envelopes); n == 0 || n > api.MaxBatch {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "a batch holds 1 to "+strconv.Itoa(api.MaxBatch)+" envelopes, not "+strconv.Itoa(n))
		return
	}
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

	// Queue them all, in order, then wait for each decision.
	pending := make([]*ledger.Pending, len(req.Envelopes))
	errs := make([]error, len(req.Envelopes))
	var batch ledger.Batch
	for i, env := range req.Envelopes {
		if len(env) > api.MaxBody {
			errs[i] = &authority.DecisionError{Verdict: authority.Refused, Code: authority.TooLarge,
				Reason: "the envelope exceeds " + strconv.Itoa(api.MaxBody) + " bytes"}
			continue
		}
		pending[i], errs[i] = s.l.SubmitBatched(r.Context(), &batch, env)
	}
	out := api.BatchResponse{Answers: make([]api.BatchAnswer, len(req.Envelopes))}
	for i := range req.Envelopes {
		var res *ledger.Result
		err := errs[i]
		if err == nil {
			res, err = pending[i].Wait(r.Context())
		}
		rec := &recorder{header: http.Header{}}
		s.answerAppend(rec, r, start, res, err)
		out.Answers[i] = api.BatchAnswer{Status: rec.status, Body: json.RawMessage(bytes.TrimSpace(rec.body.Bytes()))}
		if ra := rec.header.Get("Retry-After"); ra != "" {
			out.Answers[i].RetryAfter = ra
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// recorder keeps one answer of a batch.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
