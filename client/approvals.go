package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"

	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// PendingPayload fetches a pending receipt by id and returns its
// statement and its exact payload bytes, read from the leaf (whose hash
// is checked): what an APPROVAL's receipt_sha256 names.
func (c *Client) PendingPayload(ctx context.Context, receiptID string) (*statement.ReceiptDoc, []byte, uint64, error) {
	e, err := c.Statement(ctx, receiptID)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("receipt %s: %w", receiptID, err)
	}
	leaf, _, err := statement.ParseLeaf(e.Leaf)
	if err != nil {
		return nil, nil, 0, unverified("receipt %s: leaf: %v", receiptID, err)
	}
	env, err := sign.ParseEnvelope(leaf.Envelope)
	if err != nil {
		return nil, nil, 0, unverified("receipt %s: envelope: %v", receiptID, err)
	}
	if env.PayloadType != statement.Receipt.PayloadType() {
		return nil, nil, 0, fmt.Errorf("%s is a %s, not a RECEIPT", receiptID, e.Kind)
	}
	st, err := statement.Parse(statement.Receipt, env.Payload)
	if err != nil {
		return nil, nil, 0, unverified("receipt %s: %v", receiptID, err)
	}
	r := st.(*statement.ReceiptDoc)
	if r.ReceiptID != receiptID || !r.IsPending() {
		return nil, nil, 0, fmt.Errorf("%s is not a pending receipt", receiptID)
	}
	return r, env.Payload, e.Index, nil
}

// ReceiptSHA256 is the lowercase hex SHA-256 of a receipt's payload
// bytes, as an APPROVAL names it.
func ReceiptSHA256(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

// Approve appends an APPROVAL (the runtime's key must be an enrolled
// principal's that a rule names): approve, or with reject set, reject the
// held pending receipt receiptID. It approves the exact bytes of the
// receipt it fetched (receipt_sha256), so a server that showed other
// bytes gets approval_mismatch. The statement goes alone (never batched).
func (r *Runtime) Approve(ctx context.Context, receiptID string, reject bool, reason string) (*Receipt, error) {
	rc, payload, _, err := r.c.PendingPayload(ctx, receiptID)
	if err != nil {
		return nil, err
	}
	decision := statement.DecisionApprove
	if reject {
		decision = statement.DecisionReject
	}
	doc := &statement.ApprovalDoc{ApprovalID: NewID("approval"), Workflow: rc.Workflow, ReceiptRef: receiptID,
		ReceiptSHA256: ReceiptSHA256(payload), Decision: decision, Reason: reason}
	return r.Append(Alone(ctx), doc)
}

// Approvals lists the receipts held now ("" for any approver or
// workflow): the server's advisory view (DESIGN §7).
func (c *Client) Approvals(ctx context.Context, approver, workflow string) (*api.HeldList, error) {
	q := url.Values{}
	if approver != "" {
		q.Set("approver", approver)
	}
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	path := api.PathApprovals
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.HeldList
	if err := c.getJSON(ctx, path, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ApprovalState asks the server the state of a held receipt; with wait >
// 0 (milliseconds, at most api.MaxApprovalWait) the server answers as soon
// as it is no longer held. Advisory only: never run a step on it.
func (c *Client) ApprovalState(ctx context.Context, receiptID string, waitMS int) (*api.ApprovalState, error) {
	path := api.PathApprovals + "/" + url.PathEscape(receiptID)
	if waitMS > 0 {
		path += "?wait=" + strconv.Itoa(waitMS)
	}
	var out api.ApprovalState
	if err := c.getJSON(ctx, path, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
