package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/custodylog/custody/replay"
	"github.com/custodylog/custody/server/api"
)

// getWorkflows serves GET /v1/workflows?before=N&limit=L: a page of the
// log's workflows, newest first (ledger.WorkflowList: O(limit) record
// reads and a bounded walk of the held receipts, whatever the log's
// size), under a heavy-read token like the other reads that do more than
// one lookup.
func (s *Server) getWorkflows(w http.ResponseWriter, r *http.Request) {
	before, _, ok := uintParam(w, r, "before", false)
	if !ok {
		return
	}
	limit, set, ok := uintParam(w, r, "limit", false)
	if !ok {
		return
	}
	if !set {
		limit = api.DefaultWorkflowPage
	}
	if limit == 0 || limit > api.MaxWorkflowPage {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "limit "+strconv.FormatUint(limit, 10)+" is not 1.."+strconv.Itoa(api.MaxWorkflowPage))
		return
	}
	release, ok := s.heavyRead(w, r)
	if !ok {
		return
	}
	defer release()
	list, total, err := s.l.WorkflowList(r.Context(), before, int(limit), time.Now())
	if err != nil {
		s.readError(w, r, err)
		return
	}
	out := api.WorkflowList{Workflows: []api.WorkflowSummary{}, Total: total}
	for _, wl := range list {
		ws := api.WorkflowSummary{Workflow: wl.Workflow, Position: wl.Position, Owner: wl.Owner, OwnerKeyID: wl.OwnerKey,
			Agents: wl.Agents, MoreAgents: wl.MoreAgents, Entries: wl.Entries, FirstIndex: wl.First, LastIndex: wl.Last,
			LastActivity: wl.LastAt, Held: wl.Held, StepStops: wl.StepStops, Violations: wl.Denials}
		if ws.Agents == nil {
			ws.Agents = []string{}
		}
		if wl.Stop != nil {
			ws.Stopped, ws.StopID = true, wl.Stop.ID
		}
		out.Workflows = append(out.Workflows, ws)
	}
	if n := len(list); n > 0 && list[n-1].Position > 0 {
		out.NextBefore = list[n-1].Position
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// WorkflowReplay is the answer of GET /v1/workflows/{id}/replay: the
// workflow's bundle (custody-bundle/v1, whole workflow, under the proving
// checkpoint) and the replay report the server built from it (package
// replay: the timeline, the delegation tree, STOPs, pending receipts and
// what needs attention). A client that trusts the server for neither
// verifies Bundle itself (the console does, in the browser) and checks
// that what it shows of Report is in it.
type WorkflowReplay struct {
	Report *replay.Report  `json:"report"`
	Bundle json.RawMessage `json:"bundle"`
}

// getReplay serves GET /v1/workflows/{id}/replay, a heavy read: the
// bundle holds at most ledger.MaxBundleEntries entries (a longer workflow
// is answered 413, as its bundle is).
func (s *Server) getReplay(w http.ResponseWriter, r *http.Request) {
	wf := r.PathValue("id")
	release, ok := s.heavyRead(w, r)
	if !ok {
		return
	}
	var once sync.Once
	release = onlyOnce(&once, release)
	defer release()
	idx, _, err := s.l.WorkflowRange(r.Context(), wf, 0, 1)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	if len(idx) == 0 {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "workflow "+strconv.Quote(wf)+" has no entries")
		return
	}
	rec := s.l.StateView().Workflow(wf)
	if rec == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "workflow "+strconv.Quote(wf)+" is not in the committed state")
		return
	}
	head := s.provingHead(rec.Last)
	last := rec.Last
	if last >= head.Size {
		// The proving head (a witnessed one) is behind the workflow's
		// latest leaf: replay what it covers.
		before, err := s.lastBefore(r, wf, head.Size)
		if err != nil {
			s.readError(w, r, err)
			return
		}
		last = before
	}
	b, raw, ok := s.proveBundle(w, r, last, true, head)
	if !ok {
		return
	}
	rep, err := replay.Build(b, s.l.VerifierKey(), replay.Options{})
	if err != nil {
		s.readError(w, r, err)
		return
	}
	out, err := json.Marshal(WorkflowReplay{Report: rep, Bundle: raw})
	if err != nil {
		s.readError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.writeLarge(w, release, "application/json", append(out, '\n'))
}

// lastBefore is the index of wf's latest leaf below size.
func (s *Server) lastBefore(r *http.Request, wf string, size uint64) (uint64, error) {
	var last uint64
	for after := uint64(0); ; {
		idx, more, err := s.l.WorkflowRange(r.Context(), wf, after, s.opts.PageSize)
		if err != nil {
			return 0, err
		}
		for _, i := range idx {
			if i >= size {
				return last, nil
			}
			last = i
		}
		if !more {
			return last, nil
		}
		after = idx[len(idx)-1]
	}
}
