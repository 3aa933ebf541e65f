package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// Reasons a held step does not run: an ApprovalError's Code, and the
// start of the error of the failure outcome Execute records for it.
const (
	ApprovalRejected  = "approval_rejected"
	ApprovalExpired   = "approval_expired"
	ApprovalClosed    = "approval_closed"
	ApprovalTimeout   = "approval_timeout"
	LedgerUnavailable = "ledger_unavailable"
	// ParamsMismatch: approved, but the call about to be made is not the
	// one whose params_sha256 the approvers saw.
	ParamsMismatch      = "params_mismatch"
	DefaultApprovalWait = 10 * time.Minute
)

// ApprovalError is why a held step will not run (DESIGN §7): rejected,
// expired, closed by a STOP, REVOKE or retirement, not approved within
// the wait, the ledger unreachable, or an approval that did not verify.
type ApprovalError struct {
	Code string // one of the Approval* constants or LedgerUnavailable
	Msg  string
}

func (e *ApprovalError) Error() string { return e.Code + ": " + e.Msg }

// ParamsSHA256 is the lowercase hex SHA-256 of the JCS (RFC 8785) of the
// exact call a pending receipt gates, such as a tool call's arguments
// (DESIGN §2): params must be JSON in the canonical profile (no floats,
// no duplicate keys).
func ParamsSHA256(params []byte) (string, error) {
	b, err := canon.Canonicalize(params)
	if err != nil {
		return "", fmt.Errorf("params: %w", err)
	}
	return ReceiptSHA256(b), nil
}

// AwaitOptions tune AwaitApproval.
type AwaitOptions struct {
	// Wait bounds how long to wait for people (default
	// DefaultApprovalWait); never past the receipt's deadline.
	Wait time.Duration
	// ParamsSHA256, when set, is recomputed from the call about to be
	// made; the step is refused if the held receipt names another hash.
	ParamsSHA256 string
	// Progress sees the server's advisory view each time it changes
	// (who has approved so far, the deadline), to show people.
	Progress func(api.ApprovalState)
}

// Approved is a verified approval: the bundle whose re-run decisions show
// the receipt approved and not closed, under a checkpoint the client
// verified.
type Approved struct {
	Receipt  *authority.PendingRec
	Deadline time.Time
	Bundle   *verify.Bundle
	Verdict  *verify.Verdict
}

// AwaitApproval waits until the held pending receipt receiptID is decided
// and returns nil error only when the runtime has itself verified that
// it was approved (DESIGN §7, Running an approved step): a bundle of the
// receipt's workflow, fetched fresh and verified against the log key,
// whose re-run decisions (the verifier's port of the ledger's decision
// function) show every matched rule met by valid APPROVALs, no STOP,
// REVOKE or retirement since the receipt was held, the deadline not
// passed on the runtime's clock, and params_sha256 equal to
// opts.ParamsSHA256 when that is set. The server's answers are used only
// to know when to look. Any other end is an *ApprovalError.
//
// It learns of the decision by long polls of GET
// /v1/approvals/{receipt_id}?wait=, which the server answers as soon as
// the APPROVAL (or STOP, REVOKE) commits.
func (r *Runtime) AwaitApproval(ctx context.Context, receiptID string, opts AwaitOptions) (*Approved, error) {
	wait := opts.Wait
	if wait <= 0 {
		wait = DefaultApprovalWait
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	end := now().Add(wait)
	var lastErr error
	var last *api.ApprovalState
	for {
		remaining := end.Sub(now())
		if remaining <= 0 {
			break
		}
		poll := min(remaining, 25*time.Second)
		st, err := r.c.ApprovalState(ctx, receiptID, int(max(poll/time.Millisecond, 1)))
		if err != nil {
			if ctx.Err() != nil {
				return nil, &ApprovalError{Code: ApprovalTimeout, Msg: fmt.Sprintf("receipt %s: %v", receiptID, ctx.Err())}
			}
			lastErr = err
			select {
			case <-time.After(min(time.Second, max(end.Sub(now()), 0))):
			case <-ctx.Done():
			}
			continue
		}
		lastErr = nil
		if last == nil || st.State != last.State || len(st.Approvals) != len(last.Approvals) {
			if opts.Progress != nil {
				opts.Progress(*st)
			}
		}
		last = st
		if exp, err := time.Parse(time.RFC3339Nano, st.ExpiresAt); err == nil && exp.Before(end) {
			end = exp.Add(time.Second) // past the deadline the answer is known: stop waiting soon after
		}
		if st.State != "held" {
			break
		}
	}
	// Whatever the server said, decide from a verified bundle. The
	// server may say "decided" a moment before its checkpoint includes
	// the APPROVAL: then look again, briefly.
	a, err := r.verifyApproval(ctx, receiptID, opts.ParamsSHA256)
	var ae *ApprovalError
	for try := 0; try < 50 && last != nil && last.State != "held" && errors.As(err, &ae) && ae.Code == "held" && ctx.Err() == nil; try++ {
		time.Sleep(20 * time.Millisecond)
		a, err = r.verifyApproval(ctx, receiptID, opts.ParamsSHA256)
	}
	if err == nil {
		return a, nil
	}
	if errors.As(err, &ae) && ae.Code == "held" {
		if lastErr != nil {
			return nil, &ApprovalError{Code: LedgerUnavailable, Msg: fmt.Sprintf("receipt %s still held when the wait ended, the ledger unreachable: %v", receiptID, lastErr)}
		}
		return nil, &ApprovalError{Code: ApprovalTimeout, Msg: fmt.Sprintf("receipt %s was not approved within %s", receiptID, wait)}
	}
	return nil, err
}

// verifyApproval fetches and verifies a fresh bundle of the receipt's
// workflow and reads the receipt's state from the re-run decisions.
func (r *Runtime) verifyApproval(ctx context.Context, receiptID, paramsSHA string) (*Approved, error) {
	b, err := r.c.Bundle(ctx, receiptID, true)
	if err != nil {
		return nil, &ApprovalError{Code: LedgerUnavailable, Msg: fmt.Sprintf("fetching the bundle of %s: %v", receiptID, err)}
	}
	v, e, err := verify.VerifyBundleState(b, r.c.VerifierKey())
	if err != nil || e == nil {
		detail := fmt.Sprint(err)
		if v != nil {
			if f := v.Failure(); f != nil {
				detail = f.Name + ": " + f.Detail
			}
		}
		return nil, &ApprovalError{Code: LedgerUnavailable, Msg: fmt.Sprintf("the bundle of %s does not verify (%s): not running on it", receiptID, detail)}
	}
	p := e.Pending(receiptID)
	if p == nil || p.Hold == nil {
		return nil, &ApprovalError{Code: LedgerUnavailable, Msg: fmt.Sprintf("the verified bundle of %s shows no held receipt", receiptID)}
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	at := now()
	deadline, _ := statement.ParseLoggedAt(p.Hold.Deadline)
	state, why := e.HoldState(p, at)
	switch state {
	case authority.HoldRejected:
		return nil, &ApprovalError{Code: ApprovalRejected, Msg: fmt.Sprintf("receipt %s %s", receiptID, why)}
	case authority.HoldExpired:
		return nil, &ApprovalError{Code: ApprovalExpired, Msg: fmt.Sprintf("receipt %s: %s", receiptID, why)}
	case authority.HoldClosed:
		return nil, &ApprovalError{Code: ApprovalClosed, Msg: fmt.Sprintf("receipt %s: %s", receiptID, why)}
	case authority.HoldHeld:
		return nil, &ApprovalError{Code: "held", Msg: receiptID}
	}
	if what, closed := e.ClosedSince(p); closed {
		return nil, &ApprovalError{Code: ApprovalClosed, Msg: fmt.Sprintf("receipt %s was approved, but since then %s", receiptID, what)}
	}
	if s := e.StopInForce(p.Workflow, p.Step); s != nil {
		return nil, &ApprovalError{Code: ApprovalClosed, Msg: fmt.Sprintf("receipt %s was approved, but STOP %s (index %d) is in force on its step", receiptID, s.ID, s.Index)}
	}
	if !at.Before(deadline) {
		return nil, &ApprovalError{Code: ApprovalExpired, Msg: fmt.Sprintf("receipt %s was approved, but its deadline %s has passed on this runtime's clock", receiptID, p.Hold.Deadline)}
	}
	if paramsSHA != "" {
		logged, err := receiptParams(b, p.Index)
		if err != nil {
			return nil, &ApprovalError{Code: LedgerUnavailable, Msg: fmt.Sprintf("receipt %s: %v", receiptID, err)}
		}
		if logged != paramsSHA {
			return nil, &ApprovalError{Code: ParamsMismatch, Msg: fmt.Sprintf("receipt %s was approved for params_sha256 %q, but the call about to be made hashes to %s: refusing to run other parameters than those approved", receiptID, logged, paramsSHA)}
		}
	}
	return &Approved{Receipt: p, Deadline: deadline, Bundle: b, Verdict: v}, nil
}

// receiptParams reads the params_sha256 of the receipt at index from a
// verified bundle.
func receiptParams(b *verify.Bundle, index uint64) (string, error) {
	for _, be := range b.Entries {
		if be.Index != index {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(be.Leaf)
		if err != nil {
			return "", err
		}
		leaf, _, err := statement.ParseLeaf(raw)
		if err != nil {
			return "", err
		}
		env, err := sign.ParseEnvelope(leaf.Envelope)
		if err != nil {
			return "", err
		}
		st, err := statement.Parse(statement.Receipt, env.Payload)
		if err != nil {
			return "", err
		}
		return st.(*statement.ReceiptDoc).ParamsSHA256, nil
	}
	return "", fmt.Errorf("the bundle lacks entry %d", index)
}
