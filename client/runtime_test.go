package client_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/statement"
)

func TestExecuteRunsAfterAcceptance(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_x", map[string]int64{"budget": 100})
	var emitted atomic.Int32
	agent = client.NewRuntime(lg.Client, lg.KeyOf(agent), "agent:a", &client.Hooks{
		EmitReceipt: func(context.Context, *client.Receipt) { emitted.Add(1) },
	})
	ex, err := agent.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 40}},
		func(ctx context.Context) (client.Outcome, error) {
			// The pending receipt is durable before the step runs.
			if lg.Ledger.Head().Size < 4 {
				t.Error("the step ran before its pending receipt was logged")
			}
			return client.Outcome{Consumed: map[string]int64{"budget": 35}, SideEffects: map[string]string{"ref": "XK42"}}, nil
		})
	if err != nil || !ex.Ran || ex.Pending == nil || ex.Outcome == nil || !ex.Outcome.Accepted() {
		t.Fatalf("Execute: %v %+v", err, ex)
	}
	out := ex.Outcome.Statement.(*statement.ReceiptDoc)
	if out.Result != statement.ResultSuccess || out.PendingRef != ex.Pending.Statement.ID() {
		t.Fatalf("outcome %+v", out)
	}
	if emitted.Load() != 2 {
		t.Fatalf("emit_receipt saw %d receipts, want 2", emitted.Load())
	}
	// fn's error is recorded as a failure.
	ex, err = agent.Execute(ctx, client.Step{StepID: "s2", Action: "act", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 1}},
		func(ctx context.Context) (client.Outcome, error) {
			return client.Outcome{}, errors.New("card declined")
		})
	if err == nil || ex.Outcome == nil || ex.Outcome.Statement.(*statement.ReceiptDoc).Error != "card declined" {
		t.Fatalf("failing step: %v %+v", err, ex)
	}
}

// TestExecuteFailsClosed: no server, a denial, a veto: fn never runs.
func TestExecuteFailsClosed(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_x", map[string]int64{"budget": 100})
	never := func(context.Context) (client.Outcome, error) {
		t.Error("fn ran")
		return client.Outcome{}, nil
	}

	// Denied: over budget.
	_, err := agent.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 101}}, never)
	var de *client.DeniedError
	if !errors.Is(err, client.ErrNotExecuted) || !errors.As(err, &de) || de.Receipt.ReasonCode != "limit_exceeded" {
		t.Fatalf("denied: %v", err)
	}
	// Out of scope.
	_, err = agent.Execute(ctx, client.Step{StepID: "s1", Action: "delete", Target: "t/x", Auth: grant, Reserve: map[string]int64{"budget": 1}}, never)
	if !errors.As(err, &de) || de.Receipt.ReasonCode != "out_of_scope" {
		t.Fatalf("out of scope: %v", err)
	}
	// Vetoed by a hook: nothing is written.
	size := lg.Ledger.Head().Size
	vetoed := client.NewRuntime(lg.Client, lg.KeyOf(agent), "agent:a", &client.Hooks{
		BeforeExecute: func(context.Context, client.Step) error { return errors.New("policy says no") },
	})
	if _, err := vetoed.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant}, never); !errors.Is(err, client.ErrNotExecuted) {
		t.Fatalf("veto: %v", err)
	}
	if lg.Ledger.Head().Size != size {
		t.Fatal("a vetoed step wrote to the log")
	}

	// The server is down: a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	c, err := client.New(dead, lg.VKey, &client.Options{Retries: 1, MaxRetryWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	down := client.NewRuntime(c, lg.KeyOf(agent), "agent:a", nil)
	if _, err := down.Execute(ctx, client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, ScopeHash: "00", Workflow: "wf_x"}, never); !errors.Is(err, client.ErrNotExecuted) {
		t.Fatalf("server down: %v", err)
	}
	// The server stops answering after accepting the connection.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			conn, err := hang.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c, _ = client.New("http://"+hang.Addr().String(), lg.VKey, &client.Options{Retries: -1})
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := client.NewRuntime(c, lg.KeyOf(agent), "agent:a", nil).Execute(tctx,
		client.Step{StepID: "s1", Action: "act", Target: "t/x", Auth: grant, ScopeHash: "00", Workflow: "wf_x"}, never); !errors.Is(err, client.ErrNotExecuted) {
		t.Fatalf("server hangs: %v", err)
	}
}

// TestExecuteCancelledByStop: a STOP logged while the step runs cancels
// its context at once; the outcome is still recorded.
func TestExecuteCancelledByStop(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_x", nil)
	var onStop atomic.Int32
	agent = client.NewRuntime(lg.Client, lg.KeyOf(agent), "agent:a", &client.Hooks{
		OnStop: func(_ context.Context, s *statement.StopDoc, _ uint64) { onStop.Add(1) },
	})
	for _, tc := range []struct {
		step, stopStep string
	}{
		{"step_3/a", "step_3"}, // a step STOP covers the steps below it
		{"step_4", ""},         // a chain STOP covers every step
	} {
		started, stopped := make(chan struct{}), make(chan struct{})
		var startedAt time.Time
		go func() {
			defer close(stopped)
			<-started
			if _, err := alice.Stop(ctx, client.StopSpec{Workflow: "wf_x", Step: tc.stopStep, Reason: "human review"}); err != nil {
				t.Error(err)
			}
		}()
		ex, err := agent.Execute(ctx, client.Step{StepID: tc.step, Action: "act", Target: "t/x", Auth: grant},
			func(ctx context.Context) (client.Outcome, error) {
				startedAt = time.Now()
				close(started)
				select {
				case <-ctx.Done():
					return client.Outcome{Result: statement.ResultPartial}, context.Cause(ctx)
				case <-time.After(20 * time.Second):
					return client.Outcome{}, nil
				}
			})
		<-stopped
		var se *client.StoppedError
		if !errors.As(err, &se) || ex.Stopped == nil || !ex.Ran {
			t.Fatalf("%s: Execute: %v %+v", tc.step, err, ex)
		}
		if took := time.Since(startedAt); took > 10*time.Second {
			t.Fatalf("the STOP took %v to reach the step", took) // it waits 20s otherwise
		}
		if ex.Outcome == nil || !ex.Outcome.Accepted() || ex.Outcome.Statement.(*statement.ReceiptDoc).Result != statement.ResultPartial {
			t.Fatalf("%s: the outcome after a STOP was not recorded: %+v", tc.step, ex.Outcome)
		}
		if tc.stopStep != "" {
			// Lift the step STOP so that the chain case starts clean.
			if _, err := alice.Append(ctx, &statement.ResumeDoc{ResumeID: lg.ID("resume"), Workflow: "wf_x", StopRef: se.Stop.RequestID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if onStop.Load() != 2 {
		t.Fatalf("on_stop ran %d times", onStop.Load())
	}
	// After the chain STOP, a new step is denied and never runs.
	_, err := agent.Execute(ctx, client.Step{StepID: "step_5", Action: "act", Target: "t/x", Auth: grant},
		func(context.Context) (client.Outcome, error) {
			t.Error("ran after a STOP")
			return client.Outcome{}, nil
		})
	var de *client.DeniedError
	if !errors.As(err, &de) || de.Receipt.ReasonCode != "workflow_stopped" {
		t.Fatalf("after the STOP: %v", err)
	}
}

// TestConfirmHooks: before_confirm may veto; after_confirm sees the
// verified receipt.
func TestConfirmHooks(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	var after *client.Receipt
	key, keyPriv := servertest.Key(t)
	h := &client.Hooks{
		BeforeConfirm: func(_ context.Context, c *statement.ConfirmDoc) error {
			if c.RiskLevel == "high" {
				return errors.New("a person must confirm high-risk grants")
			}
			return nil
		},
		AfterConfirm: func(_ context.Context, r *client.Receipt) { after = r },
	}
	p := client.NewRuntime(lg.Client, lg.KeyOf(alice), "", h) // name from the log
	g := client.Grant{Workflow: "wf", Grantee: "agent:b", GranteeKey: key, Targets: []string{"t"}, Capabilities: []string{"act"}, TTL: time.Hour, Risk: "high"}
	if _, err := p.Confirm(ctx, g); err == nil {
		t.Fatal("the veto was ignored")
	}
	g.Risk = "low"
	r, err := p.Confirm(ctx, g)
	if err != nil || after != r || p.Name() != "user:alice" {
		t.Fatalf("confirm: %v", err)
	}
	// Delegation reads the parent's scope hash and workflow.
	pub2, _ := servertest.Key(t)
	agentB := client.NewRuntime(lg.Client, keyPriv, "agent:b", nil)
	d, err := agentB.Delegate(ctx, r.Statement.ID(), client.Grant{Grantee: "agent:b/c", GranteeKey: pub2, Steps: []string{"s1"},
		Targets: []string{"t"}, Capabilities: []string{"act"}, TTL: 30 * time.Minute})
	if err != nil || d.Statement.WorkflowID() != "wf" {
		t.Fatalf("delegate: %v", err)
	}
}
