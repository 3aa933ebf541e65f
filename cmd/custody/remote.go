package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/verify"
)

// logStore is what the authoring and reading commands need of a log: the
// ledger in a data folder (*ledger.Ledger), or a server reached with
// --ledger (remoteLedger), so that each command reads the same either way.
type logStore interface {
	Origin() string
	VerifierKey() string
	Head() ledger.Head
	Append(ctx context.Context, envelope []byte) (*ledger.Result, error)
	Entry(index uint64) (*ledger.Entry, error)
	EntryByID(id string) (*ledger.Entry, error)
	LeafBytes(index uint64) ([]byte, error)
	KeyBinding(keyID string) (*authority.KeyRec, error)
	NextSeq(keyID string) (uint64, error)
	InclusionProof(index, size uint64) ([]merkle.Hash, error)
	ConsistencyProof(size1, size2 uint64) ([]merkle.Hash, error)
	RootAt(size uint64) (merkle.Hash, error)
	Prove(subject uint64, wholeWorkflow bool) (*verify.Bundle, error)
	TLogProof(index uint64) ([]byte, error)
	Close() error
}

var _ logStore = (*ledger.Ledger)(nil)

// remoteFlags are the flags that point a command at a server instead of a
// data folder.
func remoteFlags() []cli.Flag {
	return []cli.Flag{
		locFlag(locLedger, ""),
		logKeyFlag("with --ledger: the checkpoint verifier key every answer is checked against (default: ask the server, trust on first use)"),
	}
}

// withRemote returns flags with --store and the remote flags after the
// first one (--dir).
func withRemote(flags ...cli.Flag) []cli.Flag {
	return append(append(append(flags[:1:1], locFlag(locStore, "")), remoteFlags()...), flags[1:]...)
}

// openStore opens the log where c reads and writes (resolveLocation): a
// server, a store or a data folder.
func openStore(ctx context.Context, c *cli.Command) (logStore, error) {
	return openStoreMode(ctx, c, false)
}

// openStoreRO is openStore for the commands that only read.
func openStoreRO(ctx context.Context, c *cli.Command) (logStore, error) {
	return openStoreMode(ctx, c, true)
}

func openStoreMode(ctx context.Context, c *cli.Command, readOnly bool) (logStore, error) {
	loc, err := resolveLocation(c)
	if err != nil {
		return nil, err
	}
	if loc.kind == locLedger {
		vkey, err := optionalLogKey(c)
		if err != nil {
			return nil, err
		}
		cl, err := remoteClient(ctx, loc.value, vkey, 4)
		if err != nil {
			return nil, err
		}
		return openRemote(ctx, cl)
	} else if c.IsSet("log-key") {
		return nil, usage(c, "--log-key goes with --ledger (the ledger at %s is checked against its own key)", loc)
	}
	l, err := openLedgerAt(c, loc, readOnly)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// remoteClient returns a client of the server at url that checks answers
// against vkey, or the key the server names when vkey is empty.
func remoteClient(ctx context.Context, url, vkey string, conns int) (*client.Client, error) {
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

// remoteLedger is a logStore over HTTP. Every answer is verified by the
// client (checkpoints against the verifier key, proofs, leaves).
type remoteLedger struct {
	ctx  context.Context
	c    *client.Client
	head ledger.Head
}

func openRemote(ctx context.Context, c *client.Client) (*remoteLedger, error) {
	cp, text, err := c.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("reaching the ledger at %s: %w", c.URL(), err)
	}
	return &remoteLedger{ctx: ctx, c: c, head: ledger.Head{Size: cp.Size, Root: cp.Root, Checkpoint: text}}, nil
}

func (r *remoteLedger) Origin() string      { return r.c.Origin() }
func (r *remoteLedger) VerifierKey() string { return r.c.VerifierKey() }
func (r *remoteLedger) Head() ledger.Head   { return r.head }
func (r *remoteLedger) Close() error        { return nil }

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

func (r *remoteLedger) Append(ctx context.Context, envelope []byte) (*ledger.Result, error) {
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

func (r *remoteLedger) Entry(index uint64) (*ledger.Entry, error) {
	e, err := r.c.Entry(r.ctx, index)
	if err != nil {
		return nil, remoteErr(err)
	}
	return ledger.DecodeEntry(e.Index, e.Leaf)
}

func (r *remoteLedger) EntryByID(id string) (*ledger.Entry, error) {
	e, err := r.c.Statement(r.ctx, id)
	if err != nil {
		return nil, remoteErr(err)
	}
	return ledger.DecodeEntry(e.Index, e.Leaf)
}

func (r *remoteLedger) LeafBytes(index uint64) ([]byte, error) {
	e, err := r.c.Entry(r.ctx, index)
	if err != nil {
		return nil, remoteErr(err)
	}
	return e.Leaf, nil
}

func (r *remoteLedger) KeyBinding(keyID string) (*authority.KeyRec, error) {
	ks, err := r.c.KeySeq(r.ctx, keyID)
	if err != nil || !ks.Bound {
		return nil, remoteErr(err)
	}
	return &authority.KeyRec{Role: ks.Role, Name: ks.Name, LastSeq: ks.NextSeq - 1, Retired: ks.Retired}, nil
}

func (r *remoteLedger) NextSeq(keyID string) (uint64, error) {
	ks, err := r.c.KeySeq(r.ctx, keyID)
	if err != nil {
		return 0, remoteErr(err)
	}
	return ks.NextSeq, nil
}

func (r *remoteLedger) InclusionProof(index, size uint64) ([]merkle.Hash, error) {
	p, err := r.c.Inclusion(r.ctx, index, size)
	if err != nil {
		return nil, remoteErr(err)
	}
	return parseHashList(p.Proof)
}

func (r *remoteLedger) ConsistencyProof(size1, size2 uint64) ([]merkle.Hash, error) {
	if size1 == 0 {
		// The server has no proof from the empty tree either; say it as
		// the ledger does.
		return nil, fmt.Errorf("no consistency proof from %d to %d: need 0 < from <= to <= %d", size1, size2, r.head.Size)
	}
	p, err := r.c.Consistency(r.ctx, size1, size2)
	if err != nil {
		return nil, remoteErr(err)
	}
	return parseHashList(p.Proof)
}

func (r *remoteLedger) RootAt(size uint64) (merkle.Hash, error) {
	h, err := r.c.RootAt(r.ctx, size)
	return h, remoteErr(err)
}

func (r *remoteLedger) Prove(subject uint64, wholeWorkflow bool) (*verify.Bundle, error) {
	b, err := r.c.BundleAt(r.ctx, subject, wholeWorkflow)
	return b, remoteErr(err)
}

func (r *remoteLedger) TLogProof(index uint64) ([]byte, error) {
	p, err := r.c.TLogProof(r.ctx, index)
	return p, remoteErr(err)
}

func parseHashList(in []string) ([]merkle.Hash, error) {
	out := make([]merkle.Hash, len(in))
	for i, s := range in {
		h, err := merkle.ParseHash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}
