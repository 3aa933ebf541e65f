package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/witness"
)

// TestPolicyWithoutWitnesses: a client with a witness policy never lets a
// step run on a pending receipt no witness cosigned, even when the server
// has no witnesses at all; the receipt is logged all the same. Other
// statements are not held back. (The tests against real witnesses are in
// package server.)
func TestPolicyWithoutWitnesses(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_p", nil)
	s, err := witness.NewSigner("w1.example", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := witness.ParsePolicy([]byte("witness w1 " + s.VerifierKey() + " http://127.0.0.1:1\nquorum w1\n"))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := client.New(lg.URL, lg.VKey, &client.Options{Policy: p, WitnessWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(pc, lg.KeyOf(agent), "agent:a", nil)
	before := lg.Ledger.Head().Size
	ex, err := rt.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant},
		func(context.Context) (client.Outcome, error) {
			t.Error("the step ran without witnesses")
			return client.Outcome{}, nil
		})
	if !errors.Is(err, client.ErrNotExecuted) || !errors.Is(err, client.ErrNotWitnessed) || ex.Ran {
		t.Fatalf("Execute = %v (ran %v), want ErrNotExecuted and ErrNotWitnessed", err, ex.Ran)
	}
	if got := lg.Ledger.Head().Size; got != before+1 {
		t.Fatalf("the log went from %d to %d entries; the pending receipt is logged all the same", before, got)
	}
	// A grant is not held back by the policy.
	pub, _ := servertest.Key(t)
	ra := client.NewRuntime(pc, lg.KeyOf(alice), "user:alice", nil)
	if _, err := ra.Confirm(ctx, client.Grant{Workflow: "wf_q", Grantee: "agent:b", GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, TTL: time.Hour}); err != nil {
		t.Fatalf("a grant under a policy: %v", err)
	}
	// Without a quorum to meet, the step runs.
	none, _ := witness.ParsePolicy([]byte("quorum none\n"))
	nc, _ := client.New(lg.URL, lg.VKey, &client.Options{Policy: none})
	rt = client.NewRuntime(nc, lg.KeyOf(agent), "agent:a", nil)
	if ex, err := rt.Execute(ctx, client.Step{StepID: "s2", Action: "act", Target: "t/x", Auth: grant},
		func(context.Context) (client.Outcome, error) { return client.Outcome{Result: "success"}, nil }); err != nil || !ex.Ran {
		t.Fatalf("quorum none: %v", err)
	}
}
