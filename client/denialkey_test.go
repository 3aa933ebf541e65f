package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestRotatedDenialKey: after the admin rotated the DENIAL key, DENIALs are
// signed by a key the client's checkpoint key set does not hold; the
// client proves the key from the trust chain of the DENIAL's bundle and
// reports a verified denial.
func TestRotatedDenialKey(t *testing.T) {
	lg := servertest.StartDenialRotated(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_x", map[string]int64{"budget": 100})
	never := func(context.Context) (client.Outcome, error) {
		t.Error("fn ran")
		return client.Outcome{}, nil
	}
	_, err := agent.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 101}}, never)
	var de *client.DeniedError
	if !errors.As(err, &de) || de.Receipt.ReasonCode != "limit_exceeded" {
		t.Fatalf("a denial signed by the rotated DENIAL key: %v", err)
	}
}
