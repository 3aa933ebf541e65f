package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/verify"
)

// custody replay --ledger URL: the workflow's bundle comes from a server.
// It is verified exactly as a local or file bundle is, so the server is
// trusted for nothing.
func remoteReplaySource(c *cli.Command, loc location.Location) (workflowSource, error) {
	url := loc.Value
	vkey, err := optionalLogKey(c)
	if err != nil {
		return nil, err
	}
	cl, err := remotelog.Client(context.Background(), url, vkey, 4)
	if err != nil {
		return nil, err
	}
	return remoteWorkflow{cl}, nil
}

type remoteWorkflow struct{ c *client.Client }

func (r remoteWorkflow) Bundle(ctx context.Context, wf string) (*verify.Bundle, string, error) {
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

func (r remoteWorkflow) Close() error { return nil }
