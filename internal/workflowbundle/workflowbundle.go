// Package workflowbundle fetches a workflow's bundle (all its entries and
// the trust chain they rest on, with proofs) and the verifier key to check
// it with, from a ledger, a custody server or a bundle file.
//
// It trusts none of them and checks nothing: a bundle is evidence for
// package replay (or verify) to verify, and a source only says where it
// came from. A ledger's key is the ledger's own; a server's is the key its
// client was given, or learnt on first use; a file's is the one the user
// gives.
package workflowbundle

import (
	"context"
	"fmt"
	"os"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/verify"
)

// Source yields a workflow's bundle and the verifier key to check it with.
type Source interface {
	// Bundle returns the bundle of workflow wf and the log's verifier
	// key. A file holds one bundle, whatever wf says.
	Bundle(ctx context.Context, wf string) (*verify.Bundle, string, error)
	Close() error
}

// Ledger reads workflows from a ledger (closed with the source).
func Ledger(l *ledger.Ledger) Source { return ledgerSource{l} }

type ledgerSource struct{ l *ledger.Ledger }

func (s ledgerSource) Bundle(_ context.Context, wf string) (*verify.Bundle, string, error) {
	idx, err := s.l.WorkflowIndexes(wf)
	if err != nil {
		return nil, "", err
	}
	b, err := s.l.Prove(idx[len(idx)-1], true)
	if err != nil {
		return nil, "", fmt.Errorf("building the bundle of workflow %q: %w", wf, err)
	}
	// The ledger's own key: the checkpoint it signed must verify under it.
	return b, s.l.VerifierKey(), nil
}

func (s ledgerSource) Close() error { return s.l.Close() }

// File is a bundle file, checked against vkey.
func File(path, vkey string) Source { return fileSource{path: path, vkey: vkey} }

// IsFile reports whether s is a bundle file (replay says so: a file may
// hold less than the whole workflow).
func IsFile(s Source) bool { _, ok := s.(fileSource); return ok }

type fileSource struct{ path, vkey string }

func (s fileSource) Bundle(_ context.Context, _ string) (*verify.Bundle, string, error) {
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, "", err
	}
	b, err := verify.ParseBundle(data)
	if err != nil {
		return nil, "", err
	}
	return b, s.vkey, nil
}

func (s fileSource) Close() error { return nil }

// Server reads workflows from a custody server through c, which checks
// every answer against its verifier key.
func Server(c *client.Client) Source { return serverSource{c} }

type serverSource struct{ c *client.Client }

func (r serverSource) Bundle(ctx context.Context, wf string) (*verify.Bundle, string, error) {
	entries, err := r.c.Workflow(ctx, wf, 0)
	if err != nil {
		return nil, "", fmt.Errorf("workflow %q: %w", wf, err)
	}
	if len(entries) == 0 {
		return nil, "", fmt.Errorf("workflow %q has no entries on %s", wf, r.c.VerifierKey())
	}
	b, err := r.c.BundleAt(ctx, entries[len(entries)-1].Index, true)
	if err != nil {
		return nil, "", err
	}
	return b, r.c.VerifierKey(), nil
}

func (r serverSource) Close() error { return nil }
