package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

func (l *reader) Prove(subject uint64, wholeWorkflow bool) (*verify.Bundle, error) {
	return l.ProveAt(subject, wholeWorkflow, l.Head())
}

func (l *reader) ProveAt(subject uint64, wholeWorkflow bool, head Head) (*verify.Bundle, error) {
	if head.Size > l.Head().Size {
		return nil, fmt.Errorf("a head of size %d is past the log's %d", head.Size, l.Head().Size)
	}
	if subject >= head.Size {
		return nil, fmt.Errorf("entry %d: %w (the log has %d entries)", subject, ErrNotFound, head.Size)
	}
	e, err := l.Entry(subject)
	if err != nil {
		return nil, err
	}
	var indexes []uint64
	var trustTop uint64
	var leaves map[uint64][]byte
	switch {
	case e.Kind() == "GENESIS" || e.Kind() == "PRINCIPAL":
		trustTop = subject
	case e.Statement.WorkflowID() == "":
		indexes, trustTop = []uint64{subject}, e.TrustHead
	default:
		// From the workflow index, at most MaxBundleEntries of them.
		wfID := e.Statement.WorkflowID()
		wf, more, err := l.WorkflowRange(context.Background(), wfID, 0, bundleCap)
		if err != nil {
			return nil, err
		}
		for _, i := range wf {
			if i > subject && !wholeWorkflow {
				more = false
				break
			}
			indexes = append(indexes, i)
		}
		if more {
			return nil, &BundleTooLargeError{Subject: subject, Workflow: wfID, Whole: wholeWorkflow}
		}
		if !slices.Contains(indexes, subject) {
			return nil, fmt.Errorf("entry %d is not on the back-link chain of workflow %q", subject, e.Statement.WorkflowID())
		}
		// The trust chain up to the newest trust head any included entry
		// used (each leaf read once: kept for the bundle).
		leaves = make(map[uint64][]byte, len(indexes))
		for _, i := range indexes {
			raw, err := l.LeafBytes(i)
			if err != nil {
				return nil, err
			}
			leaf, _, err := statement.ParseLeaf(raw)
			if err != nil {
				return nil, err
			}
			leaves[i] = raw
			trustTop = max(trustTop, leaf.TrustHead)
		}
	}
	trust, err := l.TrustIndexes(trustTop)
	if err != nil {
		return nil, err
	}
	all := append(trust, indexes...)
	slices.Sort(all)
	all = slices.Compact(all)
	for len(all) > 0 && all[len(all)-1] >= head.Size {
		all = all[:len(all)-1] // a later leaf of the workflow
	}
	b := &verify.Bundle{Format: verify.BundleFormat, Origin: l.origin, Checkpoint: string(head.Checkpoint), Subject: subject}
	for _, i := range all {
		leaf, ok := leaves[i]
		if !ok {
			var err error
			if leaf, err = l.LeafBytes(i); err != nil {
				return nil, err
			}
		}
		proof, err := l.prover.InclusionProof(i, head.Size)
		if err != nil {
			return nil, fmt.Errorf("inclusion proof for entry %d: %w", i, err)
		}
		b.Entries = append(b.Entries, verify.NewBundleEntry(i, leaf, proof))
	}
	return b, nil
}

// MaxBundleEntries is the most workflow entries one bundle holds: a bundle
// is built in memory (about 2.5 KiB an entry with its proof), so this
// bounds what one request can make the server hold.
const MaxBundleEntries = 16384

// bundleCap is MaxBundleEntries, smaller in tests.
var bundleCap = MaxBundleEntries

// ErrTooLarge is wrapped by BundleTooLargeError.
var ErrTooLarge = errors.New("too large")

// BundleTooLargeError is Prove's error for a bundle of more than
// MaxBundleEntries workflow entries; its sentence says how to get the
// workflow in parts.
type BundleTooLargeError struct {
	Subject  uint64
	Workflow string
	Whole    bool
}

func (e *BundleTooLargeError) Error() string {
	what := fmt.Sprintf("the bundle of entry %d", e.Subject)
	if e.Whole {
		what = fmt.Sprintf("the bundle of workflow %q", e.Workflow)
	}
	return fmt.Sprintf("%s would hold more than %d workflow entries, the most one bundle holds: read the workflow in pages (GET /v1/workflows/{id}?after=N, each page's last index as the next N; `custody get` reads single entries) and check each entry with its inclusion proof (GET /v1/proof/inclusion?index=N), or ask for the bundle of an earlier entry of the workflow",
		what, bundleCap)
}

func (e *BundleTooLargeError) Unwrap() error { return ErrTooLarge }

// MaxTLogProofLeaf is the largest leaf a tlog-proof can carry: the common
// reader (transparency-dev/formats) reads lines of at most 64 KiB, and the
// leaf travels base64-encoded on the "extra " line.
const MaxTLogProofLeaf = (64<<10 - len("extra ") - 1) / 4 * 3

func (l *reader) TLogProof(index uint64) ([]byte, error) {
	return l.TLogProofAt(index, l.Head())
}

func (l *reader) TLogProofAt(index uint64, head Head) ([]byte, error) {
	if head.Size > l.Head().Size {
		return nil, fmt.Errorf("a head of size %d is past the log's %d", head.Size, l.Head().Size)
	}
	leaf, err := l.LeafBytes(index)
	if err != nil {
		return nil, err
	}
	if index >= head.Size {
		return nil, fmt.Errorf("entry %d: %w (the checkpoint has %d entries)", index, ErrNotFound, head.Size)
	}
	if len(leaf) > MaxTLogProofLeaf {
		return nil, fmt.Errorf("entry %d is %d bytes; a tlog-proof carrying it would have a line longer than tlog-proof readers accept (leaves up to %d bytes): use a bundle", index, len(leaf), MaxTLogProofLeaf)
	}
	proof, err := l.prover.InclusionProof(index, head.Size)
	if err != nil {
		return nil, err
	}
	return verify.NewTLogProof(index, leaf, proof, head.Checkpoint), nil
}
