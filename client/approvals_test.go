package client_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

// approvalLog confirms agent:buyer in wf_h, whose "act" steps reserving
// more than 10 usd need one approval of user:bob or user:carol within
// ttl seconds.
func approvalLog(t testing.TB, ttl int64, hooks *client.Hooks) (lg *servertest.Log, agent *client.Runtime, grant string, bob, carol *client.Runtime) {
	lg = servertest.Start(t, server.Options{})
	alice := lg.Principal("user:alice")
	bob, carol = lg.Principal("user:bob"), lg.Principal("user:carol")
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	grant = lg.ID("confirm")
	if _, err := alice.Confirm(context.Background(), client.Grant{ID: grant, Workflow: "wf_h", Grantee: "agent:buyer", GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"usd": 1_000_000}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"act"}, Above: map[string]int64{"usd": 10},
			Approvers: []string{"user:bob", "user:carol"}, Quorum: 1, TTLSeconds: ttl}}}); err != nil {
		t.Fatal(err)
	}
	return lg, client.NewRuntime(lg.Client, priv, "agent:buyer", hooks), grant, bob, carol
}

// outcomeOf reads the outcome receipt a held step's Execute recorded.
func outcomeOf(t *testing.T, ex *client.Execution) *statement.ReceiptDoc {
	t.Helper()
	if ex.Outcome == nil {
		t.Fatal("no outcome was recorded")
	}
	return ex.Outcome.Statement.(*statement.ReceiptDoc)
}

// TestExecuteWaitsForApproval: a held step runs once, after the runtime
// itself verified the approval; the outcome is success.
func TestExecuteWaitsForApproval(t *testing.T) {
	var bob *client.Runtime
	var held, ran atomic.Int32
	var progress []string
	hooks := &client.Hooks{
		OnHeld: func(ctx context.Context, s client.Step, r *client.Receipt) {
			held.Add(1)
			go func() {
				time.Sleep(100 * time.Millisecond)
				if _, err := bob.Approve(context.Background(), s.ReceiptID, false, "ok"); err != nil {
					t.Errorf("approve: %v", err)
				}
			}()
		},
		OnApprovalProgress: func(ctx context.Context, s client.Step, st api.ApprovalState) { progress = append(progress, st.State) },
	}
	_, agent, grant, bob0, _ := approvalLog(t, 600, hooks)
	bob = bob0
	ex, err := agent.Execute(context.Background(), client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant,
		Reserve: map[string]int64{"usd": 50}, Params: []byte(`{"b":2,"a":1}`)},
		func(ctx context.Context) (client.Outcome, error) { ran.Add(1); return client.Outcome{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if held.Load() != 1 || ran.Load() != 1 || !ex.Held || ex.Approval == nil || outcomeOf(t, ex).Result != statement.ResultSuccess {
		t.Fatalf("held %d ran %d ex %+v", held.Load(), ran.Load(), ex)
	}
	if len(progress) == 0 || progress[len(progress)-1] != "approved" {
		t.Errorf("progress %v", progress)
	}
	p := ex.Pending.Statement.(*statement.ReceiptDoc)
	want, _ := client.ParamsSHA256([]byte(`{"a":1,"b":2}`))
	if p.ParamsSHA256 != want {
		t.Errorf("params_sha256 %q, want %q", p.ParamsSHA256, want)
	}
}

// TestExecuteHeldNotRun: a reject, a timeout and an expiry each mean the
// step never runs, and the outcome recorded is a failure whose error
// starts with the reason's code.
func TestExecuteHeldNotRun(t *testing.T) {
	cases := []struct {
		name string
		ttl  int64
		wait time.Duration
		act  func(bob *client.Runtime, id string)
		code string
	}{
		{"rejected", 600, time.Minute, func(bob *client.Runtime, id string) {
			if _, err := bob.Approve(context.Background(), id, true, "no"); err != nil {
				t.Errorf("reject: %v", err)
			}
		}, client.ApprovalRejected},
		{"timeout", 600, time.Second, nil, client.ApprovalTimeout},
		{"expired", 1, time.Minute, nil, client.ApprovalExpired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var bob *client.Runtime
			var ran atomic.Int32
			hooks := &client.Hooks{OnHeld: func(ctx context.Context, s client.Step, r *client.Receipt) {
				if c.act != nil {
					go c.act(bob, s.ReceiptID)
				}
			}}
			_, rt, grant, bob0, _ := approvalLog(t, c.ttl, hooks)
			bob = bob0
			ex, err := rt.Execute(context.Background(), client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant,
				Reserve: map[string]int64{"usd": 50}, ApprovalWait: c.wait},
				func(ctx context.Context) (client.Outcome, error) { ran.Add(1); return client.Outcome{}, nil })
			var ae *client.ApprovalError
			if !errors.Is(err, client.ErrNotExecuted) || !errors.As(err, &ae) || ae.Code != c.code {
				t.Fatalf("err %v, want %s", err, c.code)
			}
			if ran.Load() != 0 {
				t.Fatal("a held step ran without a verified approval")
			}
			o := outcomeOf(t, ex)
			if o.Result != statement.ResultFailure || !strings.HasPrefix(o.Error, c.code+": ") || o.Consumed != nil {
				t.Errorf("outcome %s %q", o.Result, o.Error)
			}
		})
	}
}

// TestAwaitParamsMismatch: an approved receipt does not run a call whose
// parameters hash to something else than the approved params_sha256.
func TestAwaitParamsMismatch(t *testing.T) {
	lg, agent, grant, bob, _ := approvalLog(t, 600, nil)
	ctx := context.Background()
	h, _ := client.ParamsSHA256([]byte(`{"to":"alice"}`))
	p := servertest.Pending(grant, "s1", map[string]int64{"usd": 50})
	p.ReceiptID, p.ParamsSHA256 = lg.ID("r"), h
	if _, err := agent.Receipt(ctx, p); err == nil {
		t.Fatal("not held")
	}
	if _, err := bob.Approve(ctx, p.ReceiptID, false, ""); err != nil {
		t.Fatal(err)
	}
	other, _ := client.ParamsSHA256([]byte(`{"to":"mallory"}`))
	_, err := agent.AwaitApproval(ctx, p.ReceiptID, client.AwaitOptions{ParamsSHA256: other})
	var ae *client.ApprovalError
	if !errors.As(err, &ae) || ae.Code != client.ParamsMismatch {
		t.Fatalf("other params: %v", err)
	}
	if a, err := agent.AwaitApproval(ctx, p.ReceiptID, client.AwaitOptions{ParamsSHA256: h}); err != nil || a.Receipt.ID != p.ReceiptID {
		t.Fatalf("the approved params: %v", err)
	}
	// A STOP after the approval closes it for the runtime.
	if _, err := lg.Admin.Stop(ctx, client.StopSpec{Workflow: "wf_h", Step: "s1", Reason: "halt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.AwaitApproval(ctx, p.ReceiptID, client.AwaitOptions{}); !errors.As(err, &ae) || ae.Code != client.ApprovalClosed {
		t.Fatalf("after a STOP: %v", err)
	}
}

// BenchmarkApprovalReachesRuntime measures the time from an APPROVAL's
// logged_at (set just before its commit) to a runtime waiting in AwaitApproval
// learning of it and finishing its own verification; it reports the p50
// of the notification alone (long poll answered) as ms_p50_notify.
func BenchmarkApprovalReachesRuntime(b *testing.B) {
	lg, agent, grant, bob, _ := approvalLog(b, 600, nil)
	ctx := context.Background()
	var notify, verified []time.Duration
	for i := 0; i < b.N; i++ {
		p := servertest.Pending(grant, "s1", map[string]int64{"usd": 50})
		p.ReceiptID = lg.ID("r")
		var held *client.HeldError
		if _, err := agent.Receipt(ctx, p); !errors.As(err, &held) {
			b.Fatalf("not held: %v", err)
		}
		var committed atomic.Int64
		learned := make(chan time.Time, 1)
		done := make(chan error, 1)
		go func() {
			_, err := agent.AwaitApproval(ctx, p.ReceiptID, client.AwaitOptions{Progress: func(st api.ApprovalState) {
				if st.State == "approved" {
					learned <- time.Now()
				}
			}})
			done <- err
		}()
		time.Sleep(20 * time.Millisecond) // the poll is waiting
		rec, err := bob.Approve(ctx, p.ReceiptID, false, "")
		if err != nil {
			b.Fatal(err)
		}
		// The APPROVAL's logged_at: the sequencer's time, before its
		// commit (same machine clock), so the figures include the fsync.
		leaf, _, err := statement.ParseLeaf(rec.Leaf)
		if err != nil {
			b.Fatal(err)
		}
		la, _ := statement.ParseLoggedAt(leaf.LoggedAt)
		committed.Store(la.UnixNano())
		at := <-learned
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		c := time.Unix(0, committed.Load())
		notify = append(notify, max(at.Sub(c), 0))
		verified = append(verified, end.Sub(c))
	}
	b.ReportMetric(float64(p50(notify).Microseconds())/1000, "ms_p50_notify")
	b.ReportMetric(float64(p50(verified).Microseconds())/1000, "ms_p50_verified")
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
