package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// ErrNotWitnessed wraps the error of a pending RECEIPT that the log
// accepted but that no checkpoint meeting Options.Policy covered in time.
// The entry is logged; a runtime must not act on it (Execute does not).
var ErrNotWitnessed = errors.New("client: the entry is not witnessed")

// isPendingReceipt reports whether an envelope is a pending RECEIPT: the
// statement a runtime acts on.
func isPendingReceipt(env *sign.Parsed) bool {
	if env == nil || env.PayloadType != statement.Receipt.PayloadType() {
		return false
	}
	var doc struct {
		Result string `json:"result"`
	}
	return json.Unmarshal(env.Payload, &doc) == nil && doc.Result == statement.ResultPending
}

// requireWitnessed makes sure r stands under a checkpoint that meets the
// policy: the answer's own (a server in witness finality mode sends one),
// or the newest witnessed checkpoint the server has, waited for up to
// Options.WitnessWait, with the leaf's inclusion proof under it. Every
// piece is checked: the log's signature, the cosignatures, the proof.
// The server is asked to wait itself until a checkpoint that includes the
// entry is witnessed (?size=&wait=), so the answer comes the moment the
// quorum is met; a server that does not wait is asked again with backoff.
func (c *Client) requireWitnessed(ctx context.Context, r *Receipt) error {
	p := c.opts.Policy
	if ev := p.Evaluate(r.CheckpointText); ev.Satisfied {
		r.Witnessed = &ev
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.WitnessWait)
	defer cancel()
	wait := backoff.Backoff{First: 20 * time.Millisecond, Max: 500 * time.Millisecond}
	var last error
	for {
		left := c.opts.WitnessWait
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		err := c.witnessedUnder(ctx, r, left)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrUnverified) {
			return err
		}
		last = err
		if !wait.Wait(ctx) {
			return fmt.Errorf("%w: entry %d is logged, but no checkpoint that includes it met the witness quorum (%s) within %s: %v",
				ErrNotWitnessed, r.Index, p, c.opts.WitnessWait, last)
		}
	}
}

// witnessedUnder tries once to put r under the server's newest witnessed
// checkpoint, which the server waits for, up to wait, until it includes r.
func (c *Client) witnessedUnder(ctx context.Context, r *Receipt, wait time.Duration) error {
	path := fmt.Sprintf("%s?size=%d&wait=%d", api.PathWitnessed, r.Index+1, max(wait.Milliseconds(), 0))
	body, err := c.get(ctx, path, 64<<10)
	if err != nil {
		var he *HTTPError
		if errors.As(err, &he) && he.Status == http.StatusNotFound {
			return errors.New("no witnessed checkpoint yet")
		}
		return err
	}
	cp, err := c.openCheckpoint(string(body))
	if err != nil {
		return err
	}
	ev := c.opts.Policy.Evaluate(body)
	if !ev.Satisfied {
		return unverified("the server's witnessed checkpoint does not meet the policy: %s", ev.Describe())
	}
	if cp.Size <= r.Index {
		return fmt.Errorf("the newest witnessed checkpoint has %d entries", cp.Size)
	}
	var inc api.Inclusion
	if err := c.getJSON(ctx, fmt.Sprintf("%s?index=%d&size=%d", api.PathInclusion, r.Index, cp.Size), &inc); err != nil {
		return err
	}
	proof, err := merkle.ParseHashes(inc.Proof)
	if err != nil {
		return unverified("inclusion proof: %v", err)
	}
	if err := merkle.VerifyInclusion(r.Index, cp.Size, merkle.LeafHash(r.Leaf), proof, cp.Root); err != nil {
		return unverified("inclusion under the witnessed checkpoint: %v", err)
	}
	r.Checkpoint, r.CheckpointText, r.Proof, r.Witnessed = cp, body, proof, &ev
	return nil
}
