package client

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

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
	Verdict    string // api.Accepted or api.Denied
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
}

// Accepted reports whether the statement itself was logged.
func (r *Receipt) Accepted() bool { return r.Verdict == api.Accepted }

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
	own, perr := sign.ParseEnvelope(envelope)
	resp, err := c.post(ctx, api.PathEntries, envelope)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusForbidden:
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		he := httpError(resp).(*HTTPError)
		return nil, &RefusedError{Status: he.Status, ReasonCode: he.ReasonCode, Reason: he.Reason}
	default:
		return nil, httpError(resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("ledger server: reading the answer: %w", err)
	}
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
	r, err := c.verifyAnswer(ctx, &doc, own, resp.StatusCode)
	if err != nil {
		return nil, err
	}
	if !r.Accepted() {
		return r, &DeniedError{Receipt: r}
	}
	if c.opts.Policy != nil && isPendingReceipt(own) {
		if err := c.requireWitnessed(ctx, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// verifyAnswer checks an append answer: the checkpoint is signed by the
// log key, the leaf is included at Index under it, and the leaf holds the
// submitted envelope (accepted) or a log-signed DENIAL of it (denied).
func (c *Client) verifyAnswer(ctx context.Context, doc *api.AppendResponse, own *sign.Parsed, status int) (*Receipt, error) {
	switch {
	case doc.Verdict == api.Accepted && status == http.StatusOK:
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
	proof, err := parseHashes(doc.InclusionProof)
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
	if doc.Verdict == api.Accepted {
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
