package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// An agent runtime gates an irreversible step: Execute writes the pending
// receipt, runs the step only once the ledger has durably accepted it
// (and verified the answer against the log's key), then records the
// outcome. A denial, or no verified answer, means the step never runs.
func ExampleRuntime_Execute() {
	ctx := context.Background()

	// A ledger and its server on loopback, standing in for a deployment.
	dir, err := os.MkdirTemp("", "custody-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_, adminKey, _ := sign.GenerateKey()
	l, err := ledger.Init(dir, "example.com/custody", ledger.InitOptions{AdminKey: adminKey})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	hs := httptest.NewServer(server.New(l, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer hs.Close()

	// Every answer of the server is checked against the log's verifier key.
	c, err := client.New(hs.URL, l.VerifierKey(), nil)
	if err != nil {
		log.Fatal(err)
	}

	// The admin enrolls alice; alice grants the booker agent 800 USD of
	// purchases on the airline portal for 15 minutes.
	admin := client.NewRuntime(c, adminKey, "admin", nil)
	alicePub, aliceKey, _ := sign.GenerateKey()
	if _, err := admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: "principal_alice", Op: statement.OpEnroll,
		Name: "user:alice", PublicKey: sign.EncodePublicKey(alicePub)}); err != nil {
		log.Fatal(err)
	}
	alice := client.NewRuntime(c, aliceKey, "user:alice", nil)
	bookerPub, bookerKey, _ := sign.GenerateKey()
	if _, err := alice.Confirm(ctx, client.Grant{ID: "confirm_1", Workflow: "wf_trip", Grantee: "agent:booker", GranteeKey: bookerPub,
		Targets: []string{"airline_portal/*"}, Capabilities: []string{"purchase"}, Limits: map[string]int64{"budget_usd": 800},
		TTL: 15 * time.Minute, Revocable: true}); err != nil {
		log.Fatal(err)
	}

	// The booker buys the ticket, gated by the ledger.
	booker := client.NewRuntime(c, bookerKey, "agent:booker", nil)
	ex, err := booker.Execute(ctx, client.Step{StepID: "step_3", Action: "purchase", Target: "airline_portal/account_123",
		Auth: "confirm_1", Reserve: map[string]int64{"budget_usd": 742}},
		func(ctx context.Context) (client.Outcome, error) {
			// The irreversible call goes here; ctx is cancelled if a STOP
			// covering the step arrives while it runs.
			return client.Outcome{Result: "success", Consumed: map[string]int64{"budget_usd": 742},
				SideEffects: map[string]string{"booking_ref": "XK42"}}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("pending receipt at %d, step ran: %v, outcome at %d\n", ex.Pending.Index, ex.Ran, ex.Outcome.Index)
	// Output: pending receipt at 3, step ran: true, outcome at 4
}
