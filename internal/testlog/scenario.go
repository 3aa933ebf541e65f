package testlog

import (
	"time"

	"github.com/custodylog/custody/authority"
)

// Scenario is the standard scenario's cast and the indexes of its leaves.
//
//	0  GENESIS
//	1  PRINCIPAL enroll user:alice
//	2  PRINCIPAL enroll user:bob
//	3  CONFIRM   c1, alice -> agent:planner (depth 1), wf_9f3a
//	4  DELEGATE  d2, planner -> agent:planner/coordinator (depth 2)
//	5  DELEGATE  d3, coordinator -> agent:planner/coordinator/booker (depth 3)
//	6  RECEIPT   r1 pending, booker, under d3
//	7  RECEIPT   r1-out success, booker
//	8  DENIAL    of RECEIPT r2 pending, booker: limit_exceeded
//	9  STOP      s1, alice, chain
type Scenario struct {
	Alice, Bob, Planner, Coordinator, Booker *Actor
	Workflow                                 string

	Confirm, Delegate2, Delegate3, Pending, Outcome, Denial, Stop uint64
}

// Standard-scenario grant and receipt ids.
const (
	StdWorkflow = "wf_9f3a"
	StdTarget   = "airline_portal/account_123"
)

// Standard builds the standard scenario on any log: a person confirms,
// depth-2 and depth-3 delegations, a pending receipt at depth 3, its
// outcome, a denial (the next receipt would exceed the budget), a STOP.
// The clock moves a few seconds between steps.
func Standard(l Log) *Scenario {
	au := l.Statements()
	admin := l.AdminActor()
	tick := func() { au.Clock.Add(7 * time.Second) }
	s := &Scenario{
		Alice: NewActor("user:alice"), Bob: NewActor("user:bob"),
		Planner: NewActor("agent:planner"), Coordinator: NewActor("agent:planner/coordinator"),
		Booker: NewActor("agent:planner/coordinator/booker"), Workflow: StdWorkflow,
	}
	l.Accept(admin, au.Enroll(admin, s.Alice, "p_alice"))
	tick()
	l.Accept(admin, au.Enroll(admin, s.Bob, "p_bob"))
	tick()
	s.Confirm = l.Accept(s.Alice, au.Confirm(s.Alice, "c1", NewGrant(s.Planner, StdWorkflow,
		[]string{"airline_portal/*"}, []string{"purchase", "submit_form"}, nil,
		map[string]int64{"budget_usd": 800, "max_side_effects": 2}, 3600)))
	tick()
	s.Delegate2 = l.Accept(s.Planner, au.Delegate(s.Planner, "d2", "c1", NewGrant(s.Coordinator, StdWorkflow,
		[]string{StdTarget}, []string{"purchase", "submit_form"}, []string{"step_2", "step_3"},
		map[string]int64{"budget_usd": 500, "max_side_effects": 2}, 1800)))
	tick()
	s.Delegate3 = l.Accept(s.Coordinator, au.Delegate(s.Coordinator, "d3", "d2", NewGrant(s.Booker, StdWorkflow,
		[]string{StdTarget}, []string{"purchase"}, []string{"step_2"},
		map[string]int64{"budget_usd": 300, "max_side_effects": 1}, 900)))
	tick()
	s.Pending = l.Accept(s.Booker, au.Pending(s.Booker, "r1", "d3", "step_2", "purchase", StdTarget,
		map[string]int64{"budget_usd": 250, "max_side_effects": 1}))
	tick()
	s.Outcome = l.Accept(s.Booker, au.Outcome(s.Booker, "r1-out", "r1", "success",
		map[string]int64{"budget_usd": 240, "max_side_effects": 1}))
	tick()
	s.Denial = l.Deny(s.Booker, au.Pending(s.Booker, "r2", "d3", "step_2", "purchase", StdTarget,
		map[string]int64{"budget_usd": 100, "max_side_effects": 0}), authority.LimitExceeded)
	tick()
	s.Stop = l.Accept(s.Alice, au.StopChain(s.Alice, "s1", StdWorkflow, "the trip was cancelled"))
	tick()
	return s
}

// Standard builds the standard scenario in the world's ledger.
func (w *World) Standard() *Scenario { w.TB.Helper(); return Standard(w) }
