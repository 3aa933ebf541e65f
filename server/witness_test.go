package server_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/witnesstest"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
	"github.com/custodylog/custody/witness"
)

// witnessed is a log served with three real witnesses (two omniwitness,
// one litewitness) and a 2-of-3 policy.
type witnessed struct {
	*servertest.Log
	w      []*witnesstest.Witness
	policy *witness.Policy
	logKey ed25519.PrivateKey
}

func startWitnessed(t testing.TB, opts server.Options) *witnessed {
	t.Helper()
	return startWitnessedAt(t, t.TempDir(), opts)
}

// startWitnessedAt is startWitnessed with the log in loc (a data folder
// or a postgres:// URL).
func startWitnessedAt(t testing.TB, loc string, opts server.Options) *witnessed {
	t.Helper()
	logPub, logKey := servertest.Key(t)
	vkey, err := merkle.VerifierKey(servertest.Origin, logPub)
	if err != nil {
		t.Fatal(err)
	}
	lg := witnesstest.Log{Origin: servertest.Origin, VKey: vkey}
	ws := []*witnesstest.Witness{
		witnesstest.StartOmniwitness(t, "w1.test.example", lg),
		witnesstest.StartOmniwitness(t, "w2.test.example", lg),
		witnesstest.StartLitewitness(t, "w3.test.example", lg),
	}
	text := ws[0].PolicyLine("w1") + "\n" + ws[1].PolicyLine("w2") + "\n" + ws[2].PolicyLine("w3") + "\ngroup g 2 w1 w2 w3\nquorum g\n"
	p, err := witness.ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	opts.WitnessPolicy = p
	return &witnessed{Log: servertest.StartKeyedAt(t, loc, logKey, opts), w: ws, policy: p, logKey: logKey}
}

func (wl *witnessed) signedBy(t testing.TB, cp []byte) []string {
	t.Helper()
	var names []string
	for _, s := range wl.policy.Evaluate(cp).Signed {
		names = append(names, s.Witness)
	}
	return names
}

func ran(ctx context.Context) (client.Outcome, error) {
	return client.Outcome{Result: statement.ResultSuccess}, nil
}

// TestWitnessFinality: with a 2-of-3 quorum of real witnesses, a pending
// RECEIPT is answered under a checkpoint the quorum cosigned; with one
// witness down it still is; with two down the answer is 503 unwitnessed
// and Runtime.Execute does not run the step; the same submission sent
// again once a witness is back is answered, witnessed.
func TestWitnessFinality(t *testing.T) {
	wl := startWitnessed(t, server.Options{WitnessFinality: true, WitnessTimeout: 2 * time.Second})
	ctx := context.Background()
	alice := wl.Principal("user:alice")
	agent, grant := wl.Agent(alice, "agent:a", "wf_w", nil)
	pc, err := client.New(wl.URL, wl.VKey, &client.Options{Policy: wl.policy, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(pc, wl.KeyOf(agent), "agent:a", nil)
	step := func(id string) client.Step {
		return client.Step{StepID: id, Action: "act", Target: "t/x", Auth: grant}
	}

	ex, err := rt.Execute(ctx, step("s1"), ran)
	if err != nil || !ex.Ran {
		t.Fatalf("all witnesses up: %v", err)
	}
	if got := wl.signedBy(t, ex.Pending.CheckpointText); len(got) < 2 {
		t.Fatalf("the pending receipt's checkpoint is cosigned by %v", got)
	}
	if ex.Pending.Witnessed == nil || !ex.Pending.Witnessed.Satisfied {
		t.Fatalf("the client did not record the witnesses: %+v", ex.Pending.Witnessed)
	}

	wl.w[0].Stop()
	ex, err = rt.Execute(ctx, step("s2"), ran)
	if err != nil || !ex.Ran {
		t.Fatalf("one witness down: %v", err)
	}
	if got := strings.Join(wl.signedBy(t, ex.Pending.CheckpointText), " "); got != "w2 w3" {
		t.Fatalf("one witness down: cosigned by %q, want w2 w3", got)
	}

	wl.w[1].Stop()
	before := wl.Ledger.Head().Size
	ex, err = rt.Execute(ctx, step("s3"), func(context.Context) (client.Outcome, error) {
		t.Error("the step ran without the witness quorum")
		return client.Outcome{}, nil
	})
	var he *client.HTTPError
	if !errors.Is(err, client.ErrNotExecuted) || !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.ReasonCode != api.CodeUnwitnessed {
		t.Fatalf("two witnesses down: Execute = %v, want ErrNotExecuted and a 503 unwitnessed", err)
	}
	if ex.Ran || !strings.Contains(he.Reason, "met the witness quorum") {
		t.Fatalf("ran %v, reason %q", ex.Ran, he.Reason)
	}
	// The pending receipt is logged all the same.
	if wl.Ledger.Head().Size != before+1 {
		t.Fatalf("the log grew from %d to %d", before, wl.Ledger.Head().Size)
	}
	leaf, err := wl.Ledger.LeafBytes(before)
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := statement.ParseLeaf(leaf)
	if err != nil {
		t.Fatal(err)
	}

	// A witness comes back: the same submission is answered, witnessed.
	wl.w[1].Start()
	rec, err := wl.Client.Append(ctx, l.Envelope)
	if err != nil {
		t.Fatalf("the same submission again: %v", err)
	}
	if !rec.Duplicate || rec.Index != before {
		t.Fatalf("the same submission again: index %d duplicate %v", rec.Index, rec.Duplicate)
	}
	if got := strings.Join(wl.signedBy(t, rec.CheckpointText), " "); got != "w2 w3" {
		t.Fatalf("the answer is cosigned by %q, want w2 w3", got)
	}

	// A bundle of the receipt carries the cosignatures and verifies
	// under the policy.
	b := fetchBundle(t, wl.Log, before)
	v, err := verify.VerifyBundle(b, wl.VKey)
	if err != nil || !v.Valid || !verify.CheckWitnesses(v, []byte(b.Checkpoint), wl.policy) {
		t.Fatalf("bundle: %v %+v", err, v.Failure())
	}
}

// TestWitnessDefaultMode: without finality, checkpoints are published at
// once and cosignatures are added as they arrive. With every witness
// down, the log still answers, and verify --policy rejects its
// checkpoint, saying it carries no cosignature; once the witnesses are
// back, GET /checkpoint carries their cosignatures and a new bundle
// verifies under the policy.
func TestWitnessDefaultMode(t *testing.T) {
	wl := startWitnessed(t, server.Options{})
	ctx := context.Background()
	for _, w := range wl.w {
		w.Stop()
	}
	alice := wl.Principal("user:alice")
	agent, grant := wl.Agent(alice, "agent:a", "wf_d", nil)
	ex, err := agent.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant}, ran)
	if err != nil || !ex.Ran {
		t.Fatalf("default mode, witnesses down: %v", err)
	}
	b := fetchBundle(t, wl.Log, ex.Pending.Index)
	v, err := verify.VerifyBundle(b, wl.VKey)
	if err != nil || !v.Valid {
		t.Fatalf("without a policy the bundle verifies: %v %+v", err, v)
	}
	if verify.CheckWitnesses(v, []byte(b.Checkpoint), wl.policy) {
		t.Fatal("an uncosigned checkpoint met the policy")
	}
	if f := v.Failure(); f == nil || !strings.Contains(f.Detail, "carries no witness cosignature") {
		t.Fatalf("failure %+v", f)
	}

	// The witnesses come back; the current checkpoint gathers their
	// cosignatures.
	for _, w := range wl.w {
		w.Start()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, body := wl.Get("/checkpoint")
		if wl.policy.Evaluate(body).Satisfied {
			if _, err := merkle.OpenCheckpoint(body, servertest.Origin, wl.VKey); err != nil {
				t.Fatalf("GET /checkpoint no longer verifies with the log key: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /checkpoint never met the quorum:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b = fetchBundle(t, wl.Log, ex.Pending.Index)
	v, err = verify.VerifyBundle(b, wl.VKey)
	if err != nil || !v.Valid || !verify.CheckWitnesses(v, []byte(b.Checkpoint), wl.policy) {
		t.Fatalf("bundle after the witnesses came back: %v %+v", err, v.Failure())
	}
	if len(v.Witnessed) < 2 {
		t.Fatalf("Witnessed %+v", v.Witnessed)
	}

	// A client with the policy, in default mode, waits for the witnessed
	// checkpoint before it lets the step run.
	pc, err := client.New(wl.URL, wl.VKey, &client.Options{Policy: wl.policy})
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(pc, wl.KeyOf(agent), "agent:a", nil)
	ex, err = rt.Execute(ctx, client.Step{StepID: "s2", Action: "act", Target: "t/x", Auth: grant}, ran)
	if err != nil || !ex.Ran || ex.Pending.Witnessed == nil || !ex.Pending.Witnessed.Satisfied {
		t.Fatalf("a client with a policy in default mode: %v", err)
	}
	if !wl.policy.Evaluate(ex.Pending.CheckpointText).Satisfied {
		t.Fatal("the receipt's checkpoint does not meet the policy")
	}
}

func fetchBundle(t *testing.T, lg *servertest.Log, index uint64) *verify.Bundle {
	t.Helper()
	status, _, body := lg.Get("/v1/bundle?index=" + strconv.FormatUint(index, 10))
	if status != http.StatusOK {
		t.Fatalf("bundle of %d: %d %s", index, status, body)
	}
	b, err := verify.ParseBundle(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWitnessLeadership: the witness client runs only while
// Options.Leading says this server leads the log.
func TestWitnessLeadership(t *testing.T) {
	logPub, logKey := servertest.Key(t)
	vkey, err := merkle.VerifierKey(servertest.Origin, logPub)
	if err != nil {
		t.Fatal(err)
	}
	w := witnesstest.StartOmniwitness(t, "w1.test.example", witnesstest.Log{Origin: servertest.Origin, VKey: vkey})
	p, err := witness.ParsePolicy([]byte(w.PolicyLine("w1") + "\nquorum w1\n"))
	if err != nil {
		t.Fatal(err)
	}
	leading := make(chan bool, 1)
	leading <- false
	lg := servertest.StartKeyed(t, logKey, server.Options{WitnessPolicy: p, Leading: leading})
	lg.Principal("user:alice")
	cosigned := func() bool {
		_, _, body := lg.Get("/checkpoint")
		return p.Evaluate(body).Satisfied
	}
	// A follower never starts the witness client: nothing can be sent.
	if lg.Server.Witnessing() || cosigned() || lg.Server.WitnessStats().Answers != 0 {
		t.Fatal("a follower sent checkpoints to the witness")
	}
	leading <- true
	deadline := time.Now().Add(20 * time.Second)
	for !cosigned() {
		if time.Now().After(deadline) {
			t.Fatal("the leader's checkpoint was never cosigned")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !lg.Server.Witnessing() {
		t.Fatal("the leader's checkpoint was cosigned, but Witnessing says the client is not running")
	}
	leading <- false
	// Stopping waits for the client to end: once Witnessing is false, no
	// request can be in flight or sent.
	for deadline := time.Now().Add(20 * time.Second); lg.Server.Witnessing(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the witness client still runs after leadership was lost")
		}
	}
	answers := lg.Server.WitnessStats().Answers
	lg.Principal("user:bob")
	if lg.Server.Witnessing() || cosigned() || lg.Server.WitnessStats().Answers != answers {
		t.Fatal("a server that stopped leading still sent checkpoints to the witness")
	}
}
