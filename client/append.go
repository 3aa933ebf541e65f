package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/witness"
)

// Receipt is a verified answer to an append: the entry (the statement, or
// the DENIAL of it) is at Index, durably, under Checkpoint, proven by
// Proof. Every field was checked against the log's verifier key.
type Receipt struct {
	Verdict    string // api.Accepted, api.Held or api.Denied
	Index      uint64
	ReasonCode string // denials
	Reason     string
	Duplicate  bool // decided before; nothing new was appended
	Notes      []string
	Leaf       []byte // the exact leaf bytes at Index
	Checkpoint merkle.Checkpoint
	// CheckpointText is the signed note.
	CheckpointText []byte
	Proof          []merkle.Hash
	// Statement is what was submitted (set by Runtime; nil from
	// Client.Append).
	Statement statement.Statement
	// Witnessed says which witnesses cosigned Checkpoint, when the client
	// has a witness policy and this is a pending RECEIPT.
	Witnessed *witness.Evaluation
	// ExpiresAt and Rules are set for a held receipt (DESIGN §7): the
	// deadline the server gave and the approval rules it waits for. They
	// are the server's word, for display; Runtime.Execute verifies the
	// approvals itself.
	ExpiresAt time.Time
	Rules     []api.HoldRule
}

// Accepted reports whether the statement itself was logged and accepted
// outright (a held receipt is logged but not accepted: see Held).
func (r *Receipt) Accepted() bool { return r.Verdict == api.Accepted }

// Held reports whether the statement is a pending receipt an approval
// rule holds: logged and charged, its step to run only once approved.
func (r *Receipt) Held() bool { return r.Verdict == api.Held }

// Logged reports whether the statement itself is in the log (accepted or
// held).
func (r *Receipt) Logged() bool { return r.Accepted() || r.Held() }

// HeldError is the error of an append of a pending receipt that an
// approval rule held (HTTP 202): the receipt is durably logged, and
// Receipt describes it, but its step must not run until people approve
// it. A caller that only checks the error never runs a held step.
type HeldError struct{ Receipt *Receipt }

func (e *HeldError) Error() string {
	var who []string
	for _, r := range e.Receipt.Rules {
		who = append(who, fmt.Sprintf("rule %s of %s: %d of %s", r.RuleID, r.Grant, r.Quorum, strings.Join(r.Approvers, ",")))
	}
	return fmt.Sprintf("held for approval at index %d until %s (%s)", e.Receipt.Index, e.Receipt.ExpiresAt.UTC().Format(time.RFC3339), strings.Join(who, "; "))
}

// DeniedError is the error of an append the ledger denied: the DENIAL is
// logged and verified, and Receipt describes it.
type DeniedError struct{ Receipt *Receipt }

func (e *DeniedError) Error() string {
	return fmt.Sprintf("denied: %s: %s (DENIAL at index %d)", e.Receipt.ReasonCode, e.Receipt.Reason, e.Receipt.Index)
}

// RefusedError is an append the ledger refused without logging it: a
// malformed envelope, an unknown key, a bad signature, too large, or
// rate-limited denials.
type RefusedError struct {
	Status     int
	ReasonCode string
	Reason     string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused: %s: %s (nothing was logged)", e.ReasonCode, e.Reason)
}

// maxAnswer bounds an append answer: a leaf (64 KiB, as base64), a
// checkpoint and a proof of at most 64 hashes.
const maxAnswer = 256 << 10

// Append submits one signed envelope and returns the verified answer
// once the decision is durable under a signed checkpoint.
//
// An accepted statement returns its receipt and a nil error. A denial
// returns the DENIAL's receipt AND a *DeniedError, so that a caller that
// only checks the error never proceeds on a denial. A refusal is a
// *RefusedError; an answer that does not verify wraps ErrUnverified; an
// unavailable server is an *HTTPError or a transport error. Only a nil
// error means the statement is in the log.
func (c *Client) Append(ctx context.Context, envelope []byte) (*Receipt, error) {
	resp, err := c.post(ctx, api.PathEntries, envelope)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusForbidden:
	default:
		return nil, answerError(resp.StatusCode, resp.Header.Get("Retry-After"), resp.Body)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("ledger server: reading the answer: %w", err)
	}
	return c.readAnswer(ctx, envelope, resp.StatusCode, body)
}

// answerError is the error of an answer that is not a decision: a
// refusal (400, 413, 429, and 409 withdrawn in a batch) or an *HTTPError.
func answerError(status int, retryAfter string, body io.Reader) error {
	resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(body)}
	if retryAfter != "" {
		resp.Header.Set("Retry-After", retryAfter)
	}
	he := httpError(resp).(*HTTPError)
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return &RefusedError{Status: he.Status, ReasonCode: he.ReasonCode, Reason: he.Reason}
	case http.StatusConflict:
		if he.ReasonCode == api.CodeWithdrawn { // only in a batch answer
			return &RefusedError{Status: he.Status, ReasonCode: he.ReasonCode, Reason: he.Reason}
		}
	}
	return he
}

// readAnswer verifies the body of a 200 or 403 answer to envelope.
func (c *Client) readAnswer(ctx context.Context, envelope []byte, status int, body []byte) (*Receipt, error) {
	own, perr := sign.ParseEnvelope(envelope)
	if len(body) > maxAnswer {
		return nil, unverified("the answer exceeds %d bytes", maxAnswer)
	}
	var doc api.AppendResponse
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, unverified("the answer is not an append response: %v", err)
	}
	if perr != nil {
		// The ledger logged something for an envelope we could not read:
		// there is nothing to check it against.
		return nil, unverified("the server logged a decision for an envelope that does not parse (%v)", perr)
	}
	r, err := c.verifyAnswer(ctx, &doc, own, status)
	if err != nil {
		return nil, err
	}
	if !r.Logged() {
		return r, &DeniedError{Receipt: r}
	}
	if c.opts.Policy != nil && isPendingReceipt(own) {
		if err := c.requireWitnessed(ctx, r); err != nil {
			return nil, err
		}
	}
	if r.Held() {
		return r, &HeldError{Receipt: r}
	}
	return r, nil
}

// ErrNoBatch is the error of AppendBatch against a server without the
// batch endpoint (it answered 404 or 405): nothing was submitted.
var ErrNoBatch = errors.New("client: the server has no batch endpoint")

// AppendBatch submits envelopes in one request; the ledger decides them
// in the order given, in as few commits as it can. Each answer is
// verified as Append's is, and the i-th receipt and error are what Append
// would have returned for envelopes[i]. A non-nil final error means the
// batch as a whole got no answer (nothing is known of any envelope); it
// is ErrNoBatch when the server has no batch endpoint.
func (c *Client) AppendBatch(ctx context.Context, envelopes [][]byte) ([]*Receipt, []error, error) {
	req := api.BatchRequest{Envelopes: make([]json.RawMessage, len(envelopes))}
	for i, e := range envelopes {
		req.Envelopes[i] = e
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.post(ctx, api.PathBatch, body)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return nil, nil, ErrNoBatch
	default:
		return nil, nil, httpError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(envelopes))*maxAnswer+1))
	if err != nil {
		return nil, nil, fmt.Errorf("ledger server: reading the batch answer: %w", err)
	}
	var doc api.BatchResponse
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, unverified("the answer is not a batch response: %v", err)
	}
	if len(doc.Answers) != len(envelopes) {
		return nil, nil, unverified("%d answers to a batch of %d", len(doc.Answers), len(envelopes))
	}
	recs, errs := make([]*Receipt, len(envelopes)), make([]error, len(envelopes))
	for i, a := range doc.Answers {
		switch a.Status {
		case http.StatusOK, http.StatusAccepted, http.StatusForbidden:
			recs[i], errs[i] = c.readAnswer(ctx, envelopes[i], a.Status, a.Body)
		default:
			errs[i] = answerError(a.Status, a.RetryAfter, bytes.NewReader(a.Body))
		}
	}
	return recs, errs, nil
}

// verifyAnswer checks an append answer: the checkpoint is signed by the
// log key, the leaf is included at Index under it, and the leaf holds the
// submitted envelope (accepted) or a log-signed DENIAL of it (denied).
func (c *Client) verifyAnswer(ctx context.Context, doc *api.AppendResponse, own *sign.Parsed, status int) (*Receipt, error) {
	switch {
	case doc.Verdict == api.Accepted && status == http.StatusOK:
	case doc.Verdict == api.Held && status == http.StatusAccepted:
		if !isPendingReceipt(own) {
			return nil, unverified("verdict held for a statement that is not a pending receipt")
		}
	case doc.Verdict == api.Denied && status == http.StatusForbidden:
	default:
		return nil, unverified("verdict %q with HTTP %d", doc.Verdict, status)
	}
	cp, err := c.openCheckpoint(doc.Checkpoint)
	if err != nil {
		return nil, err
	}
	if doc.Index >= cp.Size {
		return nil, unverified("index %d is not under the checkpoint of size %d", doc.Index, cp.Size)
	}
	proof, err := merkle.ParseHashes(doc.InclusionProof)
	if err != nil {
		return nil, unverified("inclusion proof: %v", err)
	}
	if err := merkle.VerifyInclusion(doc.Index, cp.Size, merkle.LeafHash(doc.Leaf), proof, cp.Root); err != nil {
		return nil, unverified("%v", err)
	}
	leaf, _, err := statement.ParseLeaf(doc.Leaf)
	if err != nil {
		return nil, unverified("leaf %d: %v", doc.Index, err)
	}
	env, err := sign.ParseEnvelope(leaf.Envelope)
	if err != nil {
		return nil, unverified("leaf %d: %v", doc.Index, err)
	}
	r := &Receipt{Verdict: doc.Verdict, Index: doc.Index, ReasonCode: doc.ReasonCode, Reason: doc.Reason,
		Duplicate: doc.Duplicate, Notes: doc.Notes, Leaf: doc.Leaf, Checkpoint: cp,
		CheckpointText: []byte(doc.Checkpoint), Proof: proof}
	if doc.Verdict == api.Held {
		exp, err := time.Parse(time.RFC3339Nano, doc.ExpiresAt)
		if err != nil {
			return nil, unverified("held receipt: expires_at %q: %v", doc.ExpiresAt, err)
		}
		r.ExpiresAt, r.Rules = exp, doc.Rules
	}
	if doc.Verdict == api.Accepted || doc.Verdict == api.Held {
		if env.DedupHash() != own.DedupHash() {
			return nil, unverified("leaf %d holds another envelope than the one submitted", doc.Index)
		}
		return r, nil
	}
	// A denial: the leaf is a DENIAL, signed by the log key, of exactly
	// this submission, with the code the answer gives.
	if doc.DenialIndex == nil || *doc.DenialIndex != doc.Index {
		return nil, unverified("a denial without its denial_index")
	}
	if env.PayloadType != statement.Denial.PayloadType() {
		return nil, unverified("leaf %d is a %s, not a DENIAL", doc.Index, env.PayloadType)
	}
	if err := c.verifyLogSigned(env); err != nil {
		if err := c.verifyDenialKey(ctx, doc); err != nil { // denialkey.go
			return nil, unverified("DENIAL %d is not signed by the log key: %v", doc.Index, err)
		}
	}
	st, err := statement.Parse(statement.Denial, env.Payload)
	if err != nil {
		return nil, unverified("DENIAL %d: %v", doc.Index, err)
	}
	d := st.(*statement.DenialDoc)
	canonical, err := own.Envelope.Canonical()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	if d.EnvelopeSHA256 != hex.EncodeToString(sum[:]) {
		return nil, unverified("DENIAL %d names another submission", doc.Index)
	}
	if d.ReasonCode != doc.ReasonCode || d.Reason != doc.Reason {
		return nil, unverified("DENIAL %d says %s, the answer %s", doc.Index, d.ReasonCode, doc.ReasonCode)
	}
	return r, nil
}

// AppendStatement signs st with priv and appends it. The statement must
// be complete (header filled, sealed); see Runtime for one that fills it.
func (c *Client) AppendStatement(ctx context.Context, priv ed25519.PrivateKey, st statement.Statement) (*Receipt, error) {
	_, raw, err := statement.Sign(priv, st)
	if err != nil {
		return nil, err
	}
	r, err := c.Append(ctx, raw)
	if r != nil {
		r.Statement = st
	}
	return r, err
}
