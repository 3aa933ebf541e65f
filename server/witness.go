package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/witness/cosign"
)

// RunWitnesses feeds each new checkpoint to the witnesses of
// Options.WitnessPolicy until ctx ends, while this server leads the log
// (Options.Leading; always, without it). Serve runs it; a caller serving
// Handler itself runs it too. It returns at once without a policy.
func (s *Server) RunWitnesses(ctx context.Context) error {
	if s.witnessErr != nil {
		return s.witnessErr
	}
	if s.cos == nil {
		return nil
	}
	commits, stop := s.l.Watch()
	defer stop()
	publish := func(h ledger.Head) {
		if h.Checkpoint != nil {
			s.cos.Publish(cosign.Checkpoint{Size: h.Size, Root: h.Root, Text: h.Checkpoint})
		}
	}
	publish(s.l.Head())

	leading := s.opts.Leading
	var cancel context.CancelFunc
	var done chan struct{}
	startRun := func() {
		if cancel != nil {
			return
		}
		var rctx context.Context
		rctx, cancel = context.WithCancel(ctx)
		done = make(chan struct{})
		go func() { defer close(done); s.cos.Run(rctx) }()
		s.witnessing.Store(true)
		s.log.Info("witnesses: sending checkpoints", "policy", s.cos.Policy().String())
	}
	stopRun := func() {
		if cancel == nil {
			return
		}
		cancel()
		<-done
		cancel = nil
		s.witnessing.Store(false)
	}
	defer stopRun()
	if leading == nil {
		startRun()
	}
	for {
		select {
		case c := <-commits:
			publish(c.Head)
		case lead, ok := <-leading:
			switch {
			case !ok:
				// The signal's source ended (its context did): keep the
				// current role until ctx ends, so that appends draining
				// at shutdown still get their cosignatures.
				leading = nil
			case lead:
				publish(s.l.Head())
				startRun()
			default:
				s.log.Info("witnesses: not the leader, not sending checkpoints")
				stopRun()
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// restoreWitnessed serves again the witnessed checkpoint an earlier run
// kept in the store (cosign.Restore), if it is a checkpoint this log
// signed of its own tree and its cosignatures meet the policy; otherwise
// it says why at ERROR and starts without it (WitnessRestoreError).
func (s *Server) restoreWitnessed() {
	w, ok, err := s.cos.Restore(s.logSigned)
	switch {
	case err != nil:
		s.restoreErr = err
		s.log.Error("witnesses: "+err.Error()+"; serving checkpoints without cosignatures until the witnesses cosign again", "store", s.l.Dir())
	case ok:
		s.log.Info("witnesses: serving the witnessed checkpoint kept in the store", "size", w.Size, "cosigned_by", len(w.Evaluation.Signed))
	}
}

// Witnessing reports whether this server sends its checkpoints to the
// witnesses now: while it leads the log (Options.Leading), and never
// once RunWitnesses has stopped the client.
func (s *Server) Witnessing() bool { return s.witnessing.Load() }

// WitnessRestoreError is why the witnessed checkpoint kept in the store
// was refused at start (nil if it was served, or there was none).
func (s *Server) WitnessRestoreError() error { return s.restoreErr }

// logSigned checks a checkpoint kept in the store against the log: its
// signature is by one of the log's checkpoint keys (a retired one only for
// the head it is pinned to), and its root is the log's at its size.
func (s *Server) logSigned(text []byte) (cosign.Checkpoint, error) {
	c, err := merkle.OpenCheckpoint(text, s.l.Origin(), s.l.VerifierKey())
	if err != nil {
		return cosign.Checkpoint{}, fmt.Errorf("it is not a checkpoint signed by this log's key: %w", err)
	}
	if size := s.l.Head().Size; c.Size > size {
		return cosign.Checkpoint{}, fmt.Errorf("it is of size %d, beyond the log's %d entries: not this log's history", c.Size, size)
	}
	root, err := s.l.RootAt(c.Size)
	if err != nil {
		return cosign.Checkpoint{}, fmt.Errorf("the log's root at its size %d cannot be read: %w", c.Size, err)
	}
	if root != c.Root {
		return cosign.Checkpoint{}, fmt.Errorf("its root at size %d is %s, the log's is %s: not this log's history", c.Size, c.Root, root)
	}
	return cosign.Checkpoint{Size: c.Size, Root: c.Root, Text: text}, nil
}

// currentCheckpoint is what GET /checkpoint serves: the newest checkpoint,
// with the witness cosignatures gathered for it so far.
func (s *Server) currentCheckpoint() ledger.Head {
	h := s.l.Head()
	if s.cos != nil {
		if size, text := s.cos.Latest(); size == h.Size && text != nil {
			h.Checkpoint = text
		}
	}
	return h
}

// provingHead is the head bundles and tlog-proofs of index are made
// against: the newest checkpoint that meets the witness quorum when it
// includes index, else the newest checkpoint with what cosignatures it has.
func (s *Server) provingHead(index uint64) ledger.Head {
	if s.cos != nil {
		if w, ok := s.cos.Best(); ok && index < w.Size {
			return ledger.Head{Size: w.Size, Root: w.Root, Checkpoint: w.Cosigned}
		}
	}
	return s.currentCheckpoint()
}

// getWitnessed serves the newest checkpoint that meets the witness quorum.
// With ?size=N it first waits, up to ?wait=MS milliseconds (at most, and
// by default, Options.WitnessTimeout), until one of at least N entries
// does: a client waiting for its entry to be witnessed gets the answer the
// moment the quorum is met, instead of polling (client.requireWitnessed).
func (s *Server) getWitnessed(w http.ResponseWriter, r *http.Request) {
	if s.cos == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "this log has no witness policy")
		return
	}
	if v := r.URL.Query().Get("size"); v != "" {
		size, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "size="+v+" is not a tree size")
			return
		}
		wait := s.opts.WitnessTimeout
		if v := r.URL.Query().Get("wait"); v != "" {
			ms, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				writeError(w, http.StatusBadRequest, api.CodeBadRequest, "wait="+v+" is not a number of milliseconds")
				return
			}
			wait = min(wait, time.Duration(ms)*time.Millisecond)
		}
		s.awaitWitnessed(r.Context(), size, wait)
	}
	best, ok := s.cos.Best()
	if !ok {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no checkpoint has met the witness quorum ("+s.cos.Policy().String()+") yet")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Length", strconv.Itoa(len(best.Cosigned)))
	w.Write(best.Cosigned)
}

// awaitWitnessed waits, up to wait, until a checkpoint of at least size
// entries meets the quorum, or the server stops. Waiters are bounded (one
// per append the server may have in flight); past that it does not wait.
func (s *Server) awaitWitnessed(ctx context.Context, size uint64, wait time.Duration) {
	select {
	case s.waiters <- struct{}{}:
		defer func() { <-s.waiters }()
	default:
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	s.cos.Wait(ctx, size) // an error: not witnessed in time; answer what there is
}

// gatesAStep reports whether a logged leaf is a pending RECEIPT: the
// statement a runtime acts on, which finality mode answers only once
// witnessed.
func gatesAStep(leaf []byte) bool {
	l, _, err := statement.ParseLeaf(leaf)
	if err != nil {
		return false
	}
	env, err := sign.ParseEnvelope(l.Envelope)
	if err != nil || env.PayloadType != statement.Receipt.PayloadType() {
		return false
	}
	var doc struct {
		Result string `json:"result"`
	}
	return json.Unmarshal(env.Payload, &doc) == nil && doc.Result == statement.ResultPending
}

// witnessedAnswer waits (up to Options.WitnessTimeout) for a checkpoint
// that includes res.Index and meets the witness quorum, and returns it with
// the inclusion proof of res.Index under it.
func (s *Server) witnessedAnswer(ctx context.Context, res *ledger.Result) (string, []merkle.Hash, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.WitnessTimeout)
	defer cancel()
	wd, err := s.cos.Wait(ctx, res.Index+1)
	if err != nil {
		return "", nil, err
	}
	if wd.Size == res.Head.Size && res.Proof != nil {
		return string(wd.Cosigned), res.Proof, nil
	}
	proof, err := s.l.InclusionProof(res.Index, wd.Size)
	if err != nil {
		return "", nil, fmt.Errorf("inclusion proof of %d at the witnessed size %d: %w", res.Index, wd.Size, err)
	}
	return string(wd.Cosigned), proof, nil
}

// unwitnessed answers a pending RECEIPT that is logged but not witnessed
// in time: 503, and the runtime must not act.
func (s *Server) unwitnessed(w http.ResponseWriter, start time.Time, res *ledger.Result, err error) {
	s.m.appends.WithLabelValues("unwitnessed").Inc()
	s.m.latency.WithLabelValues("unwitnessed").Observe(time.Since(start).Seconds())
	s.log.Warn("witness finality: a pending receipt was not witnessed in time", "index", res.Index, "timeout", s.opts.WitnessTimeout, "err", err)
	s.unavailable(w, api.CodeUnwitnessed, fmt.Sprintf("entry %d is logged, but no checkpoint that includes it met the witness quorum (%s) within %s: "+
		"the step must not run yet; send the same submission again to get its decision once witnessed", res.Index, s.cos.Policy(), s.opts.WitnessTimeout))
}

// WitnessStats returns the witness client's counters (zero without a
// witness policy).
func (s *Server) WitnessStats() cosign.Stats {
	if s.cos == nil {
		return cosign.Stats{}
	}
	return s.cos.Stats()
}
