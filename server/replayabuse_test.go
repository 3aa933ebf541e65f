package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

// TestReplayLogSignedEnvelopes is the red-team's keyless growth attack
// over HTTP: a client with no key fetches the log's DENIALs and posts their
// envelopes back to /v1/entries, again and again. Each is refused
// (bad_signature, 400) and the log does not grow (DESIGN §1).
func TestReplayLogSignedEnvelopes(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_1", map[string]int64{"budget": 10})
	var denials []uint64
	for i := range 3 {
		r, err := agent.Receipt(context.Background(), servertest.Pending(grant, fmt.Sprintf("s%d", i), map[string]int64{"budget": 11}))
		var de *client.DeniedError
		if !errors.As(err, &de) || r == nil {
			t.Fatalf("receipt %d: %v, want a denial", i, err)
		}
		denials = append(denials, r.Index)
	}
	// What an attacker holds: every leaf of the log, read over HTTP.
	size := lg.Ledger.Head().Size
	var envelopes [][]byte
	for i := range size {
		code, _, body := lg.Get(fmt.Sprintf("/v1/entries/%d", i))
		if code != http.StatusOK {
			t.Fatalf("entry %d: HTTP %d", i, code)
		}
		var e api.Entry
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		leaf, _, err := statement.ParseLeaf(e.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == string(statement.Denial) {
			envelopes = append(envelopes, leaf.Envelope)
		}
	}
	if len(envelopes) != len(denials) {
		t.Fatalf("found %d DENIALs, want %d", len(envelopes), len(denials))
	}
	for round := range 5 {
		for i, env := range envelopes {
			resp, err := http.Post(lg.URL+"/v1/entries", "application/json", bytes.NewReader(env))
			if err != nil {
				t.Fatal(err)
			}
			var doc api.Error
			json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || doc.ReasonCode != "bad_signature" {
				t.Fatalf("round %d, DENIAL %d posted back: HTTP %d %+v; want 400 bad_signature", round, i, resp.StatusCode, doc)
			}
		}
	}
	if got := lg.Ledger.Head().Size; got != size {
		t.Fatalf("the log grew from %d to %d from log-signed envelopes posted back", size, got)
	}
	// The log still takes honest entries.
	if _, err := agent.Receipt(context.Background(), servertest.Pending(grant, "s_ok", map[string]int64{"budget": 1})); err != nil {
		t.Fatalf("an honest receipt after the replay: %v", err)
	}
}
