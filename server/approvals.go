package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// holdRules is the wire form of a held receipt's rules.
func holdRules(rules []authority.HoldRule) []api.HoldRule {
	out := make([]api.HoldRule, len(rules))
	for i, r := range rules {
		out[i] = api.HoldRule{Grant: r.Grant, RuleID: r.RuleID, Approvers: r.Approvers, Quorum: r.Quorum, ApprovedBy: r.ApprovedBy}
	}
	return out
}

// maxHeldAnswer bounds how many held receipts one listing answers.
const maxHeldAnswer = 1000

// HeldDoc is the wire form of a held receipt.
func HeldDoc(h *ledger.Held) api.HeldReceipt {
	p, r := h.Pending, h.Entry.Statement.(*statement.ReceiptDoc)
	return api.HeldReceipt{ReceiptID: p.ID, Index: p.Index, WorkflowID: p.Workflow, StepID: p.Step, Action: p.Action,
		Target: p.Target, Reserve: p.Reserve, ParamsSHA256: r.ParamsSHA256, ReceiptSHA256: p.Hold.SHA256, Actor: r.Actor,
		ExpiresAt: p.Hold.Deadline, Rules: holdRules(p.Hold.Rules), Chain: h.Chain, Statement: h.Entry.Envelope.Payload}
}

// getApprovals lists the receipts held now (DESIGN §7, Who sees what),
// optionally only those a given principal name may approve, or of one
// workflow. The answer's ETag names the list; with wait=MS and
// If-None-Match naming the list the caller has, it answers as soon as
// the list differs (a commit, or a hold's deadline), or 304 Not Modified
// after MS: a page shows a held receipt as soon as it commits, without
// polling (console).
func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) {
	approver, wf := r.URL.Query().Get("approver"), r.URL.Query().Get("workflow")
	for name, v := range map[string]string{"approver": approver, "workflow": wf} {
		if v != "" && scope.CheckIdentifier(v) != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, name+" "+strconv.Quote(v)+" is not an identifier")
			return
		}
	}
	wait, ok := waitParam(w, r)
	if !ok {
		return
	}
	known := r.Header.Get("If-None-Match")
	var commits <-chan ledger.Commit
	if wait > 0 && known != "" {
		// Subscribed before the first read: no commit falls in between.
		select {
		case s.listWaits <- struct{}{}:
			defer func() { <-s.listWaits }()
			ch, stop := s.l.Watch()
			defer stop()
			commits = ch
		default: // too many waiting: answer now, the caller asks again
		}
	}
	body, tag, next, err := s.heldList(approver, wf)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	if commits != nil && tag == known {
		end := time.NewTimer(time.Duration(wait) * time.Millisecond)
		defer end.Stop()
		expiry := time.NewTimer(time.Hour)
		defer expiry.Stop()
	waiting:
		for tag == known {
			expiry.Stop()
			var expired <-chan time.Time
			if !next.IsZero() {
				expiry.Reset(time.Until(next) + time.Millisecond)
				expired = expiry.C
			}
			select {
			case <-commits:
			case <-expired:
			case <-end.C:
				break waiting
			case <-r.Context().Done():
				return
			}
			if body, tag, next, err = s.heldList(approver, wf); err != nil {
				s.readError(w, r, err)
				return
			}
		}
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("ETag", tag)
	if tag == known {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// HeldList lists the receipts l holds for approval now (at most 1,000),
// only those approver may approve when it is not "", and only of
// workflow wf when it is not "": what GET /v1/approvals answers.
func HeldList(l *ledger.Ledger, approver, wf string) (*api.HeldList, error) {
	held, err := l.HeldReceipts(time.Now(), maxHeldAnswer, func(p *authority.PendingRec) bool {
		if wf != "" && p.Workflow != wf {
			return false
		}
		if approver == "" {
			return true
		}
		for _, rule := range p.Hold.Rules {
			if scope.Covers(rule.Approvers, approver) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	out := &api.HeldList{Held: []api.HeldReceipt{}}
	for i := range held {
		out.Held = append(out.Held, HeldDoc(&held[i]))
	}
	return out, nil
}

// heldList is the body of GET /v1/approvals, its ETag (a hash of the
// body) and the earliest deadline of the receipts it lists (zero for
// none).
func (s *Server) heldList(approver, wf string) (body []byte, etag string, next time.Time, err error) {
	out, err := HeldList(s.l, approver, wf)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	for _, h := range out.Held {
		if d, err := statement.ParseLoggedAt(h.ExpiresAt); err == nil && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	return b, `"` + hex.EncodeToString(sum[:16]) + `"`, next, nil
}

// getApproval answers the state of one held receipt; with wait=MS it
// answers as soon as the receipt is no longer held, or after MS.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, ok := waitParam(w, r)
	if !ok {
		return
	}
	h, err := s.l.HeldReceipt(id, time.Now())
	if errors.Is(err, ledger.ErrNotHeld) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
		return
	}
	if err != nil {
		s.readError(w, r, err)
		return
	}
	if wait > 0 && h.State == authority.HoldHeld {
		ch, stop := s.l.WatchWorkflow(h.Pending.Workflow)
		defer stop()
		end := time.NewTimer(time.Duration(wait) * time.Millisecond)
		defer end.Stop()
		deadline, _ := statement.ParseLoggedAt(h.Pending.Hold.Deadline)
		expiry := time.NewTimer(time.Until(deadline) + time.Millisecond)
		defer expiry.Stop()
	loop:
		for h.State == authority.HoldHeld {
			select {
			case <-ch:
			case <-expiry.C:
			case <-end.C:
				break loop
			case <-r.Context().Done():
				return
			}
			if h, err = s.l.HeldReceipt(id, time.Now()); err != nil {
				s.readError(w, r, err)
				return
			}
		}
	}
	out := api.ApprovalState{ReceiptID: h.Pending.ID, Index: h.Pending.Index, State: h.State,
		ExpiresAt: h.Pending.Hold.Deadline, Reason: h.Why}
	if len(h.Pending.Hold.Answered) > 0 {
		as, err := s.l.Approvals(h.Pending.Workflow, h.Pending.ID, h.Pending.Index)
		if err != nil {
			s.readError(w, r, err)
			return
		}
		for _, e := range as {
			a := e.Statement.(*statement.ApprovalDoc)
			out.Approvals = append(out.Approvals, api.ApprovalItem{Index: e.Index, ApprovalID: a.ApprovalID, Actor: a.Actor, Decision: a.Decision})
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// waitParam reads the approvals' wait=MS parameter (0 when absent), or
// answers 400 for one that is not a number or is above
// api.MaxApprovalWait.
func waitParam(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	wait, _, ok := uintParam(w, r, "wait", false)
	if !ok {
		return 0, false
	}
	if wait > api.MaxApprovalWait {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "wait "+strconv.FormatUint(wait, 10)+" is above "+strconv.Itoa(api.MaxApprovalWait)+" ms")
		return 0, false
	}
	return wait, true
}
