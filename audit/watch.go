package audit

import (
	"context"
	"fmt"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/witness"
)

// Watch outcomes.
const (
	WatchFirst     = "first"     // no earlier checkpoint: this one is kept
	WatchUnchanged = "unchanged" // the same tree as before
	WatchGrew      = "grew"      // a consistent extension
	// Alerts: the log, or whoever serves it, is not append-only.
	WatchBadSignature = "bad_signature" // the served checkpoint does not verify
	WatchSplitView    = "split_view"    // same size, different root
	WatchRollback     = "rollback"      // smaller than before
	WatchInconsistent = "inconsistent"  // larger, but does not extend the old tree
	WatchBadTiles     = "bad_tiles"     // the served tiles do not hash to the checkpoint's root
)

// WatchResult is one look at a served log.
type WatchResult struct {
	Outcome string `json:"outcome"`
	Alert   bool   `json:"alert"`
	Detail  string `json:"detail"`
	OldSize uint64 `json:"old_size,omitempty"`
	OldRoot string `json:"old_root,omitempty"`
	Size    uint64 `json:"size"`
	Root    string `json:"root,omitempty"`
	// Checkpoint is the served checkpoint (signed note); Keep is what the
	// monitor should keep as its last checkpoint (nil: keep the old one).
	Checkpoint []byte `json:"-"`
	Keep       []byte `json:"-"`
}

// Watch fetches the checkpoint f serves, checks its signature with vkey,
// and checks it against old, the last checkpoint the monitor kept (nil for
// none): same size must mean same root, a smaller size is a rollback, and
// a larger one must extend old, which Watch proves itself with a
// consistency proof computed from the served tiles. On a first look it
// recomputes the root from the tiles. It returns an error only when it
// could not look (the network, an unreadable old checkpoint); what it saw
// is in the result, with Alert set for anything that breaks append-only.
func Watch(ctx context.Context, f Fetcher, vkey string, old []byte) (*WatchResult, error) {
	ks, err := merkle.ParseKeySet(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key: %v", ErrUnusable, err)
	}
	vkey, origin := ks.String(), ks.Origin()
	var o merkle.Checkpoint
	if old != nil {
		// The kept checkpoint may have been signed by a key retired since:
		// below, the served checkpoint must extend it (or equal it), which
		// is what a retired key's older checkpoints need (DESIGN §6).
		if o, _, err = ks.OpenRetired(old); err != nil {
			return nil, fmt.Errorf("the kept checkpoint does not verify (is the state file for another log?): %w", err)
		}
	}
	text, err := f.Fetch(ctx, "checkpoint")
	if err != nil {
		return nil, fmt.Errorf("fetching the checkpoint: %w", err)
	}
	res := &WatchResult{Checkpoint: text}
	if old != nil {
		res.OldSize, res.OldRoot = o.Size, o.Root.String()
	}
	n, err := merkle.OpenCheckpoint(text, origin, vkey)
	if err != nil {
		res.Outcome, res.Alert = WatchBadSignature, true
		res.Detail = fmt.Sprintf("the served checkpoint does not verify under the log key: %v", err)
		return res, nil
	}
	res.Size, res.Root = n.Size, n.Root.String()
	alert := func(outcome, format string, args ...any) (*WatchResult, error) {
		res.Outcome, res.Alert, res.Detail = outcome, true, fmt.Sprintf(format, args...)
		return res, nil
	}
	tiles := TileReader(ctx, f, n.Size)
	checkTiles := func() (bool, error) {
		if n.Size == 0 {
			return n.Root == merkle.EmptyRoot, nil
		}
		root, err := merkle.RootAt(tiles, n.Size)
		if err != nil {
			return false, fmt.Errorf("reading the served tiles: %w", err)
		}
		return root == n.Root, nil
	}
	switch {
	case old == nil:
		ok, err := checkTiles()
		if err != nil {
			return nil, err
		}
		if !ok {
			return alert(WatchBadTiles, "the served tiles do not hash to the root of the served checkpoint (size %d)", n.Size)
		}
		res.Outcome, res.Keep = WatchFirst, text
		res.Detail = fmt.Sprintf("first checkpoint kept: size %d, root %s (recomputed from the served tiles)", n.Size, n.Root)
	case n.Size < o.Size:
		return alert(WatchRollback, "ROLLBACK: the log now serves size %d (root %s), smaller than the size %d (root %s) it signed before",
			n.Size, n.Root, o.Size, o.Root)
	case n.Size == o.Size && n.Root != o.Root:
		return alert(WatchSplitView, "SPLIT VIEW: two signed checkpoints of size %d with different roots: %s kept, %s served",
			n.Size, o.Root, n.Root)
	case n.Size == o.Size:
		res.Outcome, res.Keep = WatchUnchanged, text
		res.Detail = fmt.Sprintf("unchanged: size %d, root %s", n.Size, n.Root)
	default:
		var proof []merkle.Hash
		if o.Size > 0 {
			if proof, err = merkle.ConsistencyProof(tiles, o.Size, n.Size); err != nil {
				return nil, fmt.Errorf("computing the consistency proof from the served tiles: %w", err)
			}
		}
		if err := merkle.VerifyConsistency(o.Size, n.Size, proof, o.Root, n.Root); err != nil {
			ok, terr := checkTiles()
			if terr == nil && !ok {
				return alert(WatchBadTiles, "the served tiles do not hash to the root of the served checkpoint (size %d); the extension from size %d cannot be proved",
					n.Size, o.Size)
			}
			return alert(WatchInconsistent, "INCONSISTENT: the signed checkpoint of size %d (root %s) does not extend the signed checkpoint of size %d (root %s) kept before: %v",
				n.Size, n.Root, o.Size, o.Root, err)
		}
		res.Outcome, res.Keep = WatchGrew, text
		res.Detail = fmt.Sprintf("grew from size %d to %d; consistency proved from the served tiles", o.Size, n.Size)
	}
	return res, nil
}

// WatchUnwitnessed is the outcome of a checkpoint that does not meet the
// monitor's witness policy: not a proof of misbehaviour (cosignatures may
// still be on their way), but not a checkpoint to keep either.
const WatchUnwitnessed = "unwitnessed"

// WatchWitnessed is Watch for a monitor with a witness policy (nil: none,
// as Watch). The newest checkpoint may not have gathered its cosignatures
// yet; a custody server also serves its newest witnessed one
// (WitnessedPath), which is then watched instead, with the same checks. A
// checkpoint that still does not meet the policy is WatchUnwitnessed and
// not kept. The evaluation is the policy's of the checkpoint watched (nil
// without a policy, or on an alert).
func WatchWitnessed(ctx context.Context, f Fetcher, vkey string, old []byte, policy *witness.Policy) (*WatchResult, *witness.Evaluation, error) {
	res, err := Watch(ctx, f, vkey, old)
	if err != nil || policy == nil || res.Alert {
		return res, nil, err
	}
	if !policy.Evaluate(res.Checkpoint).Satisfied {
		if wcp, err := f.Fetch(ctx, WitnessedPath); err == nil && policy.Evaluate(wcp).Satisfied {
			wf := FetcherFunc(func(ctx context.Context, path string) ([]byte, error) {
				if path == "checkpoint" {
					return wcp, nil
				}
				return f.Fetch(ctx, path)
			})
			if wres, err := Watch(ctx, wf, vkey, old); err == nil {
				res = wres
			}
		}
	}
	if res.Alert {
		return res, nil, nil
	}
	e := policy.Evaluate(res.Checkpoint)
	if !e.Satisfied {
		res.Outcome, res.Keep = WatchUnwitnessed, nil
		res.Detail = "the served checkpoint does not meet the witness policy: " + e.Describe()
	} else {
		res.Detail += "; " + e.Describe()
	}
	return res, &e, nil
}
