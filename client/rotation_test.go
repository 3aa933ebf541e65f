package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestRotatedLog: a client holding a rotated log's key set verifies every
// answer (acceptances under checkpoints the new key signs, DENIALs the
// GENESIS log key signs); a client holding only the retired key refuses
// them.
func TestRotatedLog(t *testing.T) {
	lg := servertest.StartRotated(t, server.Options{})
	if !strings.Contains(lg.VKey, "max_size=1") {
		t.Fatalf("key set %q", lg.VKey)
	}
	ctx := context.Background()
	if _, err := lg.Client.Log(ctx); err != nil {
		t.Fatalf("Log: %v", err)
	}
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_x", map[string]int64{"budget": 100})
	never := func(context.Context) (client.Outcome, error) {
		t.Error("fn ran")
		return client.Outcome{}, nil
	}
	_, err := agent.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 101}}, never)
	var de *client.DeniedError
	if !errors.As(err, &de) || de.Receipt.ReasonCode != "limit_exceeded" {
		t.Fatalf("a verified denial: %v", err)
	}

	// The retired key alone: the server's checkpoints are not its.
	oldKey := ""
	for _, line := range strings.Split(lg.VKey, "\n") {
		if k, _, ok := strings.Cut(line, " max_size=1 root="); ok {
			oldKey = k
		}
	}
	c, err := client.New(lg.URL, oldKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Log(ctx); err == nil {
		t.Fatal("a client with the retired key accepted the log's description")
	}
	stale := client.NewRuntime(c, lg.KeyOf(agent), "agent:a", nil)
	_, err = stale.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 1}}, never)
	if !errors.Is(err, client.ErrNotExecuted) {
		t.Fatalf("a client with the retired key: %v", err)
	}
}
