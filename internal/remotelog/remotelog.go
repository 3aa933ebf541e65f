// Package remotelog is a custody log served over HTTP, read and appended
// to through the same methods as a *ledger.Ledger (those the CLI's
// commands use), so that a command reads and writes the same whether it
// was given a data folder or a server. Every answer is verified by
// package client; a 404 carries the server's words and matches
// ledger.ErrNotFound; a refusal, a denial and a held receipt come back as
// the ledger would give them.
package remotelog

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/verify"
)

// Client returns a client of the server at url that checks answers
// against vkey, or the key the server names when vkey is empty (trust on
// first use), with up to conns idle connections kept.
func Client(ctx context.Context, url, vkey string, conns int) (*client.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 2*conns, 2*conns
	hc := &http.Client{Transport: t, Timeout: time.Minute}
	if vkey == "" {
		info, err := client.Discover(ctx, url, hc)
		if err != nil {
			return nil, fmt.Errorf("asking %s for its verifier key: %w", url, err)
		}
		vkey = info.VerifierKey
	}
	return client.New(url, vkey, &client.Options{HTTPClient: hc})
}

// Log is a log served over HTTP, with the methods of *ledger.Ledger the
// CLI's commands use. Every answer is verified by the client (checkpoints
// against the verifier key, proofs, leaves).
type Log struct {
	ctx  context.Context
	c    *client.Client
	head ledger.Head
}

// Open reads the server's head and returns the log; ctx is the context of
// every later read.
func Open(ctx context.Context, c *client.Client) (*Log, error) {
	cp, text, err := c.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("reaching the ledger at %s: %w", c.URL(), err)
	}
	return &Log{ctx: ctx, c: c, head: ledger.Head{Size: cp.Size, Root: cp.Root, Checkpoint: text}}, nil
}

func (r *Log) Origin() string      { return r.c.Origin() }
func (r *Log) VerifierKey() string { return r.c.VerifierKey() }
func (r *Log) Head() ledger.Head   { return r.head }
func (r *Log) Close() error        { return nil }

// Client is the verified client the log reads through.
func (r *Log) Client() *client.Client { return r.c }

// notFound is a 404 from the server: its message is the server's (the
// ledger's own words), and it matches ledger.ErrNotFound.
type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }
func (e *notFound) Unwrap() error { return ledger.ErrNotFound }

func remoteErr(err error) error {
	var he *client.HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound && he.Reason != "" {
		return &notFound{msg: he.Reason}
	}
	return err
}

func (r *Log) Append(ctx context.Context, envelope []byte) (*ledger.Result, error) {
	rec, err := r.c.Append(ctx, envelope)
	var denied *client.DeniedError
	var refused *client.RefusedError
	var held *client.HeldError
	switch {
	case errors.As(err, &held):
		rec = held.Receipt
	case errors.As(err, &refused):
		return nil, &authority.DecisionError{Verdict: authority.Refused, Code: authority.Code(refused.ReasonCode), Reason: refused.Reason}
	case errors.As(err, &denied):
		rec = denied.Receipt
	case err != nil:
		return nil, err
	}
	res := &ledger.Result{Verdict: authority.Accepted, Index: rec.Index, Duplicate: rec.Duplicate, Notes: rec.Notes,
		Head: ledger.Head{Size: rec.Checkpoint.Size, Root: rec.Checkpoint.Root, Checkpoint: rec.CheckpointText}, Proof: rec.Proof}
	if rec.Held() {
		res.Hold = &authority.HoldInfo{ExpiresAt: rec.ExpiresAt}
		for _, r := range rec.Rules {
			res.Hold.Rules = append(res.Hold.Rules, authority.HoldRule{Grant: r.Grant, RuleID: r.RuleID, Approvers: r.Approvers, Quorum: r.Quorum})
		}
	} else if !rec.Accepted() {
		res.Verdict, res.Code, res.Reason = authority.Denied, authority.Code(rec.ReasonCode), rec.Reason
	}
	if res.Head.Size > r.head.Size {
		r.head = res.Head
	}
	return res, nil
}

func (r *Log) Entry(index uint64) (*ledger.Entry, error) {
	e, err := r.c.Entry(r.ctx, index)
	if err != nil {
		return nil, remoteErr(err)
	}
	return ledger.DecodeEntry(e.Index, e.Leaf)
}

func (r *Log) EntryByID(id string) (*ledger.Entry, error) {
	e, err := r.c.Statement(r.ctx, id)
	if err != nil {
		return nil, remoteErr(err)
	}
	return ledger.DecodeEntry(e.Index, e.Leaf)
}

func (r *Log) LeafBytes(index uint64) ([]byte, error) {
	e, err := r.c.Entry(r.ctx, index)
	if err != nil {
		return nil, remoteErr(err)
	}
	return e.Leaf, nil
}

func (r *Log) KeyBinding(keyID string) (*authority.KeyRec, error) {
	ks, err := r.c.KeySeq(r.ctx, keyID)
	if err != nil || !ks.Bound {
		return nil, remoteErr(err)
	}
	return &authority.KeyRec{Role: ks.Role, Name: ks.Name, LastSeq: ks.NextSeq - 1, Retired: ks.Retired}, nil
}

func (r *Log) NextSeq(keyID string) (uint64, error) {
	ks, err := r.c.KeySeq(r.ctx, keyID)
	if err != nil {
		return 0, remoteErr(err)
	}
	return ks.NextSeq, nil
}

func (r *Log) InclusionProof(index, size uint64) ([]merkle.Hash, error) {
	p, err := r.c.Inclusion(r.ctx, index, size)
	if err != nil {
		return nil, remoteErr(err)
	}
	return merkle.ParseHashes(p.Proof)
}

func (r *Log) ConsistencyProof(size1, size2 uint64) ([]merkle.Hash, error) {
	if size1 == 0 {
		// The server has no proof from the empty tree either; say it as
		// the ledger does.
		return nil, fmt.Errorf("no consistency proof from %d to %d: need 0 < from <= to <= %d", size1, size2, r.head.Size)
	}
	p, err := r.c.Consistency(r.ctx, size1, size2)
	if err != nil {
		return nil, remoteErr(err)
	}
	return merkle.ParseHashes(p.Proof)
}

func (r *Log) RootAt(size uint64) (merkle.Hash, error) {
	h, err := r.c.RootAt(r.ctx, size)
	return h, remoteErr(err)
}

func (r *Log) Prove(subject uint64, wholeWorkflow bool) (*verify.Bundle, error) {
	b, err := r.c.BundleAt(r.ctx, subject, wholeWorkflow)
	return b, remoteErr(err)
}

func (r *Log) TLogProof(index uint64) ([]byte, error) {
	p, err := r.c.TLogProof(r.ctx, index)
	return p, remoteErr(err)
}
