package server

import (
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

// getApprovals lists the receipts held now (DESIGN §7, Who sees what),
// optionally only those a given principal name may approve, or of one
// workflow.
func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) {
	approver, wf := r.URL.Query().Get("approver"), r.URL.Query().Get("workflow")
	for name, v := range map[string]string{"approver": approver, "workflow": wf} {
		if v != "" && scope.CheckIdentifier(v) != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, name+" "+strconv.Quote(v)+" is not an identifier")
			return
		}
	}
	out, err := HeldList(s.l, approver, wf)
	if err != nil {
		s.readError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// getApproval answers the state of one held receipt; with wait=MS it
// answers as soon as the receipt is no longer held, or after MS.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, _, ok := uintParam(w, r, "wait", false)
	if !ok {
		return
	}
	if wait > api.MaxApprovalWait {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "wait "+strconv.FormatUint(wait, 10)+" is above "+strconv.Itoa(api.MaxApprovalWait)+" ms")
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
