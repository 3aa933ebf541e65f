package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/verify"
)

// Head fetches and verifies the latest checkpoint.
func (c *Client) Head(ctx context.Context) (merkle.Checkpoint, []byte, error) {
	text, err := c.get(ctx, api.PathCheckpoint, 64<<10)
	if err != nil {
		return merkle.Checkpoint{}, nil, err
	}
	cp, err := c.openCheckpoint(string(text))
	return cp, text, err
}

// Log fetches the server's description of the log and checks that it is
// the log this client verifies against.
func (c *Client) Log(ctx context.Context) (*api.Log, error) {
	var out api.Log
	if err := c.getJSON(ctx, api.PathLog, &out); err != nil {
		return nil, err
	}
	if out.Origin != c.origin || !c.signsWithKnownKey(out.VerifierKey) {
		return nil, unverified("the server serves log %s (key %s), not %s", out.Origin, out.VerifierKey, c.vkey)
	}
	return &out, nil
}

// Entry fetches the entry at index. The leaf's form is checked (its hash
// is recomputed and its fields read from it), not its inclusion: use
// Inclusion or a bundle for that.
func (c *Client) Entry(ctx context.Context, index uint64) (*api.Entry, error) {
	var e api.Entry
	if err := c.getJSON(ctx, "/v1/entries/"+strconv.FormatUint(index, 10), &e); err != nil {
		return nil, err
	}
	return &e, checkEntry(&e, &index)
}

// Statement fetches the entry of a statement (or DENIAL) id.
func (c *Client) Statement(ctx context.Context, id string) (*api.Entry, error) {
	var e api.Entry
	if err := c.getJSON(ctx, api.PathStatements+url.PathEscape(id), &e); err != nil {
		return nil, err
	}
	return &e, checkEntry(&e, nil)
}

// checkEntry checks that an entry's leaf hash is its leaf's.
func checkEntry(e *api.Entry, index *uint64) error {
	if index != nil && e.Index != *index {
		return unverified("asked for entry %d, got %d", *index, e.Index)
	}
	if merkle.LeafHash(e.Leaf).String() != e.LeafHash {
		return unverified("entry %d: leaf_hash is not the hash of its leaf", e.Index)
	}
	return nil
}

// Inclusion fetches an inclusion proof of index in the tree of size (0:
// the latest) and verifies it against the root the server gives and, for
// the latest size, against the signed checkpoint. For an older size,
// the root is only as good as a consistency proof to a checkpoint makes it.
func (c *Client) Inclusion(ctx context.Context, index, size uint64) (*api.Inclusion, error) {
	q := "?index=" + strconv.FormatUint(index, 10)
	if size > 0 {
		q += "&size=" + strconv.FormatUint(size, 10)
	}
	var out api.Inclusion
	if err := c.getJSON(ctx, api.PathInclusion+q, &out); err != nil {
		return nil, err
	}
	proof, err := merkle.ParseHashes(out.Proof)
	if err != nil {
		return nil, unverified("inclusion proof: %v", err)
	}
	leafHash, err1 := merkle.ParseHash(out.LeafHash)
	root, err2 := merkle.ParseHash(out.Root)
	if err1 != nil || err2 != nil {
		return nil, unverified("inclusion proof: malformed hashes")
	}
	if out.Checkpoint != "" {
		cp, err := c.openCheckpoint(out.Checkpoint)
		if err != nil {
			return nil, err
		}
		if cp.Size != out.Size || cp.Root != root {
			return nil, unverified("the proof's root is not the checkpoint's")
		}
	}
	if err := merkle.VerifyInclusion(out.Index, out.Size, leafHash, proof, root); err != nil {
		return nil, unverified("%v", err)
	}
	return &out, nil
}

// Consistency fetches a consistency proof between two tree sizes (to 0:
// the latest) and verifies it against the roots the server gives.
func (c *Client) Consistency(ctx context.Context, from, to uint64) (*api.Consistency, error) {
	q := "?from=" + strconv.FormatUint(from, 10)
	if to > 0 {
		q += "&to=" + strconv.FormatUint(to, 10)
	}
	var out api.Consistency
	if err := c.getJSON(ctx, api.PathConsistency+q, &out); err != nil {
		return nil, err
	}
	proof, err := merkle.ParseHashes(out.Proof)
	if err != nil {
		return nil, unverified("consistency proof: %v", err)
	}
	r1, err1 := merkle.ParseHash(out.FromRoot)
	r2, err2 := merkle.ParseHash(out.ToRoot)
	if err1 != nil || err2 != nil {
		return nil, unverified("consistency proof: malformed roots")
	}
	if err := merkle.VerifyConsistency(out.From, out.To, proof, r1, r2); err != nil {
		return nil, unverified("%v", err)
	}
	return &out, nil
}

// RootAt fetches the root of the tree of size.
func (c *Client) RootAt(ctx context.Context, size uint64) (merkle.Hash, error) {
	var out api.Root
	if err := c.getJSON(ctx, api.PathRoots+strconv.FormatUint(size, 10), &out); err != nil {
		return merkle.Hash{}, err
	}
	return merkle.ParseHash(out.Root)
}

// Bundle fetches the bundle of a statement id (with wholeWorkflow, up to
// the workflow's latest entry). It is not verified: see VerifyBundle.
func (c *Client) Bundle(ctx context.Context, id string, wholeWorkflow bool) (*verify.Bundle, error) {
	return c.bundle(ctx, "/v1/bundle/"+url.PathEscape(id), wholeWorkflow)
}

// BundleAt is Bundle for the entry at index.
func (c *Client) BundleAt(ctx context.Context, index uint64, wholeWorkflow bool) (*verify.Bundle, error) {
	return c.bundle(ctx, "/v1/bundle?index="+strconv.FormatUint(index, 10), wholeWorkflow)
}

func (c *Client) bundle(ctx context.Context, path string, whole bool) (*verify.Bundle, error) {
	if whole {
		if strings.Contains(path, "?") {
			path += "&workflow=1"
		} else {
			path += "?workflow=1"
		}
	}
	raw, err := c.get(ctx, path, maxDoc)
	if err != nil {
		return nil, err
	}
	return verify.ParseBundle(raw)
}

// TLogProof fetches the C2SP tlog-proof of the entry at index.
func (c *Client) TLogProof(ctx context.Context, index uint64) ([]byte, error) {
	return c.get(ctx, "/v1/bundle?format=tlog-proof&index="+strconv.FormatUint(index, 10), 1<<20)
}

// VerifyBundle fetches the bundle of a statement id and verifies it
// offline against the log key: checkpoint, inclusion, signatures, and the
// ledger's decisions re-run. A bundle that fails verification is returned
// with its verdict and an error wrapping ErrUnverified.
func (c *Client) VerifyBundle(ctx context.Context, id string, wholeWorkflow bool) (*verify.Bundle, *verify.Verdict, error) {
	b, err := c.Bundle(ctx, id, wholeWorkflow)
	if err != nil {
		return nil, nil, err
	}
	v, err := verify.VerifyBundle(b, c.vkey)
	if err != nil {
		return b, nil, err
	}
	if !v.Valid {
		f := v.Failure()
		detail := "invalid"
		if f != nil {
			detail = f.Name + ": " + f.Detail
		}
		return b, v, unverified("bundle of %s: %s", id, detail)
	}
	return b, v, nil
}

// Workflow fetches a workflow's entries in log order, after index after
// (0: all), following pages.
func (c *Client) Workflow(ctx context.Context, id string, after uint64) ([]api.Entry, error) {
	var all []api.Entry
	for page := 0; page < 1_000_000; page++ {
		var w api.Workflow
		if err := c.getJSON(ctx, api.PathWorkflows+url.PathEscape(id)+"?after="+strconv.FormatUint(after, 10), &w); err != nil {
			return nil, err
		}
		for i := range w.Entries {
			if w.Entries[i].Index <= after {
				return nil, unverified("workflow %s: entries out of order", id)
			}
			if err := checkEntry(&w.Entries[i], nil); err != nil {
				return nil, err
			}
			after = w.Entries[i].Index
		}
		all = append(all, w.Entries...)
		if !w.More || len(w.Entries) == 0 {
			return all, nil
		}
	}
	return nil, fmt.Errorf("workflow %s: too many pages", id)
}

// KeySeq fetches what the log binds to the key with this id and the seq
// its next statement must carry.
func (c *Client) KeySeq(ctx context.Context, keyID string) (*api.KeySeq, error) {
	var out api.KeySeq
	if err := c.getJSON(ctx, api.PathKeys+url.PathEscape(keyID)+"/seq", &out); err != nil {
		return nil, err
	}
	if out.KeyID != keyID || out.NextSeq == 0 {
		return nil, unverified("key %s: malformed answer", keyID)
	}
	return &out, nil
}

// NextSeq is KeySeq for a public key, returning only the next seq.
func (c *Client) NextSeq(ctx context.Context, pub []byte) (uint64, error) {
	ks, err := c.KeySeq(ctx, sign.KeyID(pub))
	if err != nil {
		return 0, err
	}
	return ks.NextSeq, nil
}
