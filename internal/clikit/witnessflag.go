package clikit

import (
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/verifycli"
	"github.com/custodylog/custody/witness"
)

// PolicyFlag is --policy: a witness policy the checkpoint must meet.
func PolicyFlag() cli.Flag {
	return &cli.StringFlag{Name: "policy", TakesFile: true, Sources: cli.EnvVars("CUSTODY_WITNESS_POLICY"),
		Usage: "a witness policy `FILE` (Tessera's grammar): require its quorum's cosignatures on the checkpoint"}
}

// PolicyArg reads --policy, or returns nil when it is not given.
func PolicyArg(c *cli.Command) (*witness.Policy, error) {
	f := c.String("policy")
	if f == "" {
		return nil, nil
	}
	p, err := verifycli.ReadPolicy(f)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--policy %w", err)}
	}
	return p, nil
}
