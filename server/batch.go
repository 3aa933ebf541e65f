package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	if s.declaredTooLarge(w, r, start, "the batch", api.MaxBatchBody) {
		return
	}
	doneReading, refused := s.takeReading(w, r)
	if refused != "" {
		s.m.appends.WithLabelValues("overloaded").Inc()
		s.unavailable(w, api.CodeOverloaded, refused)
		return
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	req, err := decodeBatch(http.MaxBytesReader(w, r.Body, api.MaxBatchBody))
	doneReading()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			closeUnread(w)
			s.holdTooLarge(r)
			s.refused(w, start, authority.TooLarge, "the batch exceeds "+strconv.Itoa(api.MaxBatchBody)+" bytes")
			return
		}
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "the body is not a batch (exactly {\"envelopes\":[...]}): "+err.Error())
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

// decodeBatch reads a batch request: one JSON object whose only member is
// "envelopes" (spelled exactly so, once), and nothing after it. A wrapper
// with another member, the member twice, or trailing data is refused:
// what a server accepts is what a reader of the request understands, with
// no room for two readers to disagree (DESIGN §2 holds statements to the
// same rule).
func decodeBatch(body io.Reader) (api.BatchRequest, error) {
	var req api.BatchRequest
	dec := json.NewDecoder(body)
	if tok, err := dec.Token(); err != nil {
		return req, err
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return req, fmt.Errorf("a batch is a JSON object, not %v", tok)
	}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, err
		}
		key, _ := tok.(string)
		switch {
		case key != "envelopes":
			return req, fmt.Errorf("unknown member %q (a batch holds only \"envelopes\")", key)
		case seen:
			return req, errors.New(`member "envelopes" given twice`)
		}
		seen = true
		if err := dec.Decode(&req.Envelopes); err != nil {
			return req, fmt.Errorf("envelopes: %w", err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return req, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("data after the batch object")
	}
	if !seen {
		return req, errors.New(`no member "envelopes"`)
	}
	return req, nil
}
