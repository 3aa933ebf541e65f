package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// EntryDoc turns a ledger entry into its wire form.
func EntryDoc(e *ledger.Entry) api.Entry {
	h := e.Statement.Head()
	return api.Entry{Index: e.Index, LoggedAt: statement.FormatLoggedAt(e.LoggedAt), Kind: string(h.Type),
		ID: e.Statement.ID(), Actor: h.Actor, KeyID: e.Envelope.KeyID, Seq: h.Seq, Workflow: e.Statement.WorkflowID(),
		PrevInWorkflow: e.Prev, TrustHead: e.TrustHead, LeafHash: merkle.LeafHash(e.Leaf).String(), Leaf: e.Leaf,
		Statement: json.RawMessage(e.Envelope.Payload)}
}

// hashStrings returns each hash in standard base64 (merkle.Hash.String),
// all encoded into one string that the results share: an answer's proof
// costs three allocations, not two per hash.
func hashStrings(hs []merkle.Hash) []string {
	if len(hs) == 0 {
		return []string{}
	}
	n := base64.StdEncoding.EncodedLen(merkle.HashSize)
	buf := make([]byte, n*len(hs))
	for i := range hs {
		base64.StdEncoding.Encode(buf[i*n:], hs[i][:])
	}
	all := string(buf)
	out := make([]string, len(hs))
	for i := range out {
		out[i] = all[i*n : (i+1)*n]
	}
	return out
}

func (s *Server) getEntry(w http.ResponseWriter, r *http.Request) {
	index, err := strconv.ParseUint(r.PathValue("index"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "index "+strconv.Quote(r.PathValue("index"))+" is not a decimal integer")
		return
	}
	e, err := s.l.Entry(index)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	// An entry never changes once logged.
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	writeJSON(w, http.StatusOK, EntryDoc(e))
}

func (s *Server) getStatement(w http.ResponseWriter, r *http.Request) {
	e, err := s.l.EntryByID(r.PathValue("id"))
	if err != nil {
		s.readError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, EntryDoc(e))
}

func (s *Server) getInclusion(w http.ResponseWriter, r *http.Request) {
	index, _, ok := uintParam(w, r, "index", true)
	if !ok {
		return
	}
	size, set, ok := uintParam(w, r, "size", false)
	if !ok {
		return
	}
	head := s.l.Head()
	if !set {
		size = head.Size
	}
	if size == 0 || size > head.Size || index >= size {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no inclusion proof for index "+strconv.FormatUint(index, 10)+
			" at size "+strconv.FormatUint(size, 10)+": the log has "+strconv.FormatUint(head.Size, 10)+" entries")
		return
	}
	proof, err := s.l.InclusionProof(index, size)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	leaf, err := s.l.LeafBytes(index)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	root, err := s.l.RootAt(size)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	out := api.Inclusion{Index: index, Size: size, LeafHash: merkle.LeafHash(leaf).String(), Root: root.String(), Proof: hashStrings(proof)}
	if size == head.Size {
		out.Checkpoint = string(head.Checkpoint)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getConsistency(w http.ResponseWriter, r *http.Request) {
	from, _, ok := uintParam(w, r, "from", true)
	if !ok {
		return
	}
	to, set, ok := uintParam(w, r, "to", false)
	if !ok {
		return
	}
	head := s.l.Head()
	if !set {
		to = head.Size
	}
	if from == 0 || from > to || to > head.Size {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no consistency proof from "+strconv.FormatUint(from, 10)+
			" to "+strconv.FormatUint(to, 10)+": need 0 < from <= to <= "+strconv.FormatUint(head.Size, 10))
		return
	}
	proof, err := s.l.ConsistencyProof(from, to)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	r1, err := s.l.RootAt(from)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	r2, err := s.l.RootAt(to)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Consistency{From: from, To: to, FromRoot: r1.String(), ToRoot: r2.String(), Proof: hashStrings(proof)})
}

func (s *Server) getRoot(w http.ResponseWriter, r *http.Request) {
	size, err := strconv.ParseUint(r.PathValue("size"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "size "+strconv.Quote(r.PathValue("size"))+" is not a decimal integer")
		return
	}
	if head := s.l.Head(); size > head.Size {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "size "+strconv.FormatUint(size, 10)+" is beyond the log's "+strconv.FormatUint(head.Size, 10)+" entries")
		return
	}
	root, err := s.l.RootAt(size)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	writeJSON(w, http.StatusOK, api.Root{Size: size, Root: root.String()})
}

// getBundle serves /v1/bundle/{id} and /v1/bundle?index=N: a
// custody-bundle/v1 (or with ?format=tlog-proof a C2SP tlog-proof).
func (s *Server) getBundle(w http.ResponseWriter, r *http.Request) {
	var index uint64
	if id := r.PathValue("id"); id != "" {
		e, err := s.l.EntryByID(id)
		if err != nil {
			s.readError(w, r, err)
			return
		}
		index = e.Index
	} else {
		var ok bool
		if index, _, ok = uintParam(w, r, "index", true); !ok {
			return
		}
	}
	q := r.URL.Query()
	switch q.Get("format") {
	case "", "bundle":
	case "tlog-proof":
		p, err := s.l.TLogProofAt(index, s.provingHead(index))
		if err != nil {
			s.readError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(p)
		return
	default:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "format "+strconv.Quote(q.Get("format"))+": use bundle or tlog-proof")
		return
	}
	release, ok := s.heavyRead(w, r)
	if !ok {
		return
	}
	var once sync.Once
	release = onlyOnce(&once, release)
	defer release()
	whole := false
	switch q.Get("workflow") {
	case "", "0", "false":
	case "1", "true":
		whole = true
	default:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "workflow must be 1 or 0")
		return
	}
	_, raw, ok := s.proveBundle(w, r, index, whole, s.provingHead(index))
	if !ok {
		return
	}
	s.writeLarge(w, release, "application/json", append(raw, '\n'))
}

// proveBundle builds the bundle of the entry at index (its whole workflow
// when whole) under head and its JSON, or answers the error and reports
// false: 413 for a bundle over the ledger's limit.
func (s *Server) proveBundle(w http.ResponseWriter, r *http.Request, index uint64, whole bool, head ledger.Head) (*verify.Bundle, []byte, bool) {
	b, err := s.l.ProveAt(index, whole, head)
	if errors.Is(err, ledger.ErrTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
		return nil, nil, false
	}
	if err != nil {
		s.readError(w, r, err)
		return nil, nil, false
	}
	raw, err := b.Marshal()
	if err != nil {
		s.readError(w, r, err)
		return nil, nil, false
	}
	return b, raw, true
}

// onlyOnce returns f, made to run at most once.
func onlyOnce(once *sync.Once, f func()) func() { return func() { once.Do(f) } }

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	wf := r.PathValue("id")
	after, set, ok := uintParam(w, r, "after", false)
	if !ok {
		return
	}
	_ = set // no ?after=: from the first entry (index 0 is GENESIS, never in a workflow)
	release, ok := s.heavyRead(w, r)
	if !ok {
		return
	}
	var once sync.Once
	release = onlyOnce(&once, release)
	defer release()
	idx, more, err := s.l.WorkflowRange(r.Context(), wf, after, s.opts.PageSize)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	out := api.Workflow{Workflow: wf, Entries: []api.Entry{}, More: more}
	for _, i := range idx {
		e, err := s.l.Entry(i)
		if err != nil {
			s.readError(w, r, err)
			return
		}
		out.Entries = append(out.Entries, EntryDoc(e))
	}
	b, err := json.Marshal(out)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	s.writeLarge(w, release, "application/json", append(b, '\n'))
}

func (s *Server) getKeySeq(w http.ResponseWriter, r *http.Request) {
	keyID := r.PathValue("keyid")
	if !isKeyID(keyID) {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "a key id is 64 lowercase hex digits")
		return
	}
	rec, err := s.l.KeyBinding(keyID)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	out := api.KeySeq{KeyID: keyID, NextSeq: 1}
	if rec != nil {
		out.NextSeq, out.Bound, out.Name, out.Role, out.Retired = rec.LastSeq+1, true, rec.Name, rec.Role, rec.Retired
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// isKeyID reports whether id is a key id: 64 lowercase hex digits.
func isKeyID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (s *Server) getLog(w http.ResponseWriter, r *http.Request) {
	h := s.currentCheckpoint()
	w.Header().Set("Cache-Control", "no-cache")
	writeJSON(w, http.StatusOK, api.Log{Origin: s.l.Origin(), VerifierKey: s.l.VerifierKey(), Size: h.Size, Root: h.Root.String(), Checkpoint: string(h.Checkpoint)})
}
