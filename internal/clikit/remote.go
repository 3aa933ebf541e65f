package clikit

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/verify"
)

// LogStore is what the authoring and reading commands need of a log: the
// ledger in a data folder (*ledger.Ledger), or a server reached with
// --ledger (remotelog.Log), so that each command reads the same either way.
type LogStore interface {
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

var (
	_ LogStore = (*ledger.Ledger)(nil)
	_ LogStore = (*remotelog.Log)(nil)
)

// remoteFlags are the flags that point a command at a server instead of a
// data folder.
func remoteFlags() []cli.Flag {
	return []cli.Flag{
		LocFlag(location.Ledger, ""),
		LogKeyFlag("with --ledger: the checkpoint verifier key every answer is checked against (default: ask the server, trust on first use)"),
	}
}

// WithRemote returns flags with --store and the remote flags after the
// first one (--dir).
func WithRemote(flags ...cli.Flag) []cli.Flag {
	return append(append(append(flags[:1:1], LocFlag(location.Store, "")), remoteFlags()...), flags[1:]...)
}

// OpenStore opens the log where c reads and writes (ResolveLocation): a
// server, a store or a data folder.
func OpenStore(ctx context.Context, c *cli.Command) (LogStore, error) {
	return openStoreMode(ctx, c, false)
}

// OpenStoreRO is OpenStore for the commands that only read.
func OpenStoreRO(ctx context.Context, c *cli.Command) (LogStore, error) {
	return openStoreMode(ctx, c, true)
}

func openStoreMode(ctx context.Context, c *cli.Command, readOnly bool) (LogStore, error) {
	loc, err := ResolveLocation(c)
	if err != nil {
		return nil, err
	}
	if loc.Kind == location.Ledger {
		vkey, err := OptionalLogKey(c)
		if err != nil {
			return nil, err
		}
		cl, err := remotelog.Client(ctx, loc.Value, vkey, 4)
		if err != nil {
			return nil, err
		}
		return remotelog.Open(ctx, cl)
	} else if c.IsSet("log-key") {
		return nil, Usage(c, "--log-key goes with --ledger (the ledger at %s is checked against its own key)", loc)
	}
	l, err := OpenLedgerAt(c, loc, readOnly)
	if err != nil {
		return nil, err
	}
	return l, nil
}
