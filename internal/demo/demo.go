// Package demo plays the seed scenario of the README's quick start
// through the library (no subprocesses), in a new data folder: a person
// grants a planner agent authority to book a flight, the planner
// delegates the purchase to a booker, the booker gates the purchase with
// a pending receipt and records its outcome, and the ledger denies what
// exceeds the grant: a second purchase over budget, a delegation too
// deep, a delegation that widens its parent, and a receipt after the
// owner stopped the workflow. `custody demo` runs it and prints each
// decision; the replay tests run it at a chosen time. [NewDir] and [Fresh]
// choose and check its folder, never deleting one that is not a ledger.
package demo

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Origin is the demo log's origin.
const Origin = "demo.custody.example/log"

// Workflow is the workflow of the seed example.
const Workflow = "wf_9f3a"

// Step is one decision of the demo.
type Step struct {
	Say      string         `json:"step"` // what happens, in a few words
	Kind     statement.Kind `json:"kind"`
	ID       string         `json:"id"`
	Actor    string         `json:"actor"`
	Want     string         `json:"expected"` // accepted, or the denial code
	Verdict  string         `json:"verdict"`
	Code     string         `json:"reason_code,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Index    uint64         `json:"index"`
	Expected bool           `json:"as_expected"`
}

// Report is what the demo leaves behind.
type Report struct {
	Dir         string `json:"dir"`
	Origin      string `json:"origin"`
	Steps       []Step `json:"steps"`
	Size        uint64 `json:"size"`
	Checkpoint  string `json:"checkpoint"`
	VerifierKey string `json:"verifier_key"`
}

// actor is a key with its bound name.
type actor struct {
	name string
	priv ed25519.PrivateKey
}

func (a *actor) pub() string { return sign.EncodePublicKey(a.priv.Public().(ed25519.PublicKey)) }

// demo is a running demo.
type demo struct {
	ctx    context.Context
	l      *ledger.Ledger
	w      io.Writer // one line per decision, nil for none
	report *Report
	now    func() time.Time // the clock of the statements and the ledger
}

// Run creates a ledger in dir (which must not hold one) and plays the
// scenario, printing each decision to w. It returns the report, and an
// error if anything failed or any decision was not the expected one.
func Run(ctx context.Context, dir string, w io.Writer) (*Report, error) {
	return RunAt(ctx, dir, w, time.Now)
}

// RunAt is Run on the clock now, which the statements' timestamps
// and the ledger both read (a test plays the demo at a chosen time of day).
func RunAt(ctx context.Context, dir string, w io.Writer, now func() time.Time) (*Report, error) {
	admin, err := newActor("admin")
	if err != nil {
		return nil, err
	}
	l, err := ledger.Init(dir, Origin, ledger.InitOptions{AdminName: admin.name, AdminKey: admin.priv, Options: ledger.Options{Clock: now}})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	d := &demo{ctx: ctx, l: l, w: w, report: &Report{Dir: dir, Origin: Origin}, now: now}

	var alice, planner, booker, checker, fourth, scout *actor
	for p, name := range map[**actor]string{&alice: "user:alice", &planner: "agent:planner", &booker: "agent:planner/booker",
		&checker: "agent:planner/booker/checker", &fourth: "agent:planner/booker/checker/helper", &scout: "agent:planner/scout"} {
		if *p, err = newActor(name); err != nil {
			return d.report, err
		}
	}
	// The keys go into the data folder so that the log can be explored
	// further with the other commands.
	for file, a := range map[string]*actor{"admin": admin, "alice": alice, "planner": planner, "booker": booker, "checker": checker} {
		if err := sign.WritePrivateKeyFile(filepath.Join(dir, "keys", file+".key"), a.priv, nil, false); err != nil {
			return d.report, err
		}
	}
	if w != nil {
		fmt.Fprintf(w, "ledger %s in %s; keys in %s\n\n", Origin, dir, filepath.Join(dir, "keys"))
	}

	seed := func(to *actor, targets, caps, steps []string, limits map[string]int64, ttl int64) statement.Grant {
		return statement.Grant{Grantee: statement.Grantee{Name: to.name, PublicKey: to.pub()},
			Scope:  scope.Scope{WorkflowID: Workflow, Targets: targets, Capabilities: caps, StepIDs: steps},
			Limits: limits, TTLSeconds: ttl, Revocable: true}
	}
	portal := []string{"airline_portal/account_123"}
	purchase := []string{"purchase"}
	step3 := []string{"step_3"}

	d.step("admin enrolls user:alice", admin, "", &statement.PrincipalDoc{PrincipalID: "principal_alice", Op: statement.OpEnroll,
		Name: alice.name, PublicKey: alice.pub()})

	confirm := &statement.ConfirmDoc{ConfirmID: "confirm_42c1", RiskLevel: "high",
		Grant: seed(planner, portal, []string{"purchase", "submit_form"}, []string{"step_2", "step_3"},
			map[string]int64{"budget_usd": 800, "max_side_effects": 1}, 900)}
	d.step("alice lets agent:planner book a flight: purchase+submit_form, budget_usd 800, 1 side effect, 15 min", alice, "", confirm)

	del := &statement.DelegateDoc{DelegationID: "del_booker", ParentRef: confirm.ConfirmID,
		Grant: seed(booker, portal, purchase, step3, map[string]int64{"budget_usd": 742, "max_side_effects": 1}, 600)}
	d.step("planner delegates the purchase to agent:planner/booker: budget_usd 742, step_3 only", planner, "", del, &confirm.Grant)

	pend := &statement.ReceiptDoc{ReceiptID: "rcpt_1", Workflow: Workflow, StepID: "step_3", Action: "purchase",
		Target: portal[0], AuthorizationRef: del.DelegationID, Result: statement.ResultPending,
		Reserve: map[string]int64{"budget_usd": 742, "max_side_effects": 1}}
	d.step("booker gates the purchase: pending receipt reserving 742 budget_usd and 1 side effect", booker, "", pend, &del.Grant)

	// ... the booker books the flight only now, after "accepted" ...
	outcome := &statement.ReceiptDoc{ReceiptID: "rcpt_1_done", Workflow: Workflow, StepID: "step_3", Action: "purchase",
		Target: portal[0], AuthorizationRef: del.DelegationID, Result: statement.ResultSuccess, PendingRef: pend.ReceiptID,
		Consumed:    map[string]int64{"budget_usd": 742, "max_side_effects": 1},
		SideEffects: map[string]string{"booking_ref": "XK42-7Q"}, EvidenceRefs: []string{"airline_portal/confirmation/XK42-7Q"}}
	d.step("booker records the booking: success, consumed 742 and 1, booking_ref XK42-7Q", booker, "", outcome, &del.Grant)

	again := &statement.ReceiptDoc{ReceiptID: "rcpt_2", Workflow: Workflow, StepID: "step_3", Action: "purchase",
		Target: portal[0], AuthorizationRef: del.DelegationID, Result: statement.ResultPending,
		Reserve: map[string]int64{"budget_usd": 120, "max_side_effects": 0}}
	d.step("booker tries a second purchase of 120 budget_usd", booker, authority.LimitExceeded, again, &del.Grant)

	third := &statement.DelegateDoc{DelegationID: "del_checker", ParentRef: del.DelegationID,
		Grant: seed(checker, portal, purchase, step3, map[string]int64{"budget_usd": 500, "max_side_effects": 1}, 300)}
	d.step("booker delegates to agent:planner/booker/checker (depth 3, the limit)", booker, "", third, &del.Grant)

	deep := &statement.DelegateDoc{DelegationID: "del_helper", ParentRef: third.DelegationID,
		Grant: seed(fourth, portal, purchase, step3, map[string]int64{"budget_usd": 400, "max_side_effects": 1}, 120)}
	d.step("checker delegates to a fourth agent (depth 4)", checker, authority.DepthExceeded, deep, &third.Grant)

	wide := &statement.DelegateDoc{DelegationID: "del_scout", ParentRef: confirm.ConfirmID,
		Grant: seed(scout, portal, []string{"purchase", "refund"}, step3, map[string]int64{"budget_usd": 100, "max_side_effects": 1}, 300)}
	d.step("planner delegates purchase+refund to agent:planner/scout (refund was never granted)", planner, authority.Widening, wide, &confirm.Grant)

	stop := &statement.StopDoc{RequestID: "stop_alice", Workflow: Workflow, StopScope: statement.StopChain,
		TakeoverMode: statement.TakeoverHuman, Reason: "alice takes over the trip"}
	d.step("alice stops the whole chain; a human takes over", alice, "", stop)

	late := &statement.ReceiptDoc{ReceiptID: "rcpt_3", Workflow: Workflow, StepID: "step_3", Action: "purchase",
		Target: portal[0], AuthorizationRef: third.DelegationID, Result: statement.ResultPending,
		Reserve: map[string]int64{"budget_usd": 0, "max_side_effects": 0}}
	d.step("checker tries a purchase after the stop", checker, authority.WorkflowStopped, late, &third.Grant)

	head := l.Head()
	d.report.Size, d.report.Checkpoint, d.report.VerifierKey = head.Size, string(head.Checkpoint), l.VerifierKey()
	var bad []string
	for _, s := range d.report.Steps {
		if !s.Expected {
			bad = append(bad, fmt.Sprintf("%q: got %s %s, expected %s", s.Say, s.Verdict, s.Code, s.Want))
		}
	}
	if len(bad) > 0 {
		return d.report, fmt.Errorf("demo: %d decision(s) were not as expected: %v", len(bad), bad)
	}
	return d.report, nil
}

func newActor(name string) (*actor, error) {
	_, priv, err := sign.GenerateKey()
	return &actor{name: name, priv: priv}, err
}

// step fills st's header, seals it (a receipt takes its grant's scope_hash,
// a DELEGATE its parent's), signs it as a, appends it and records the
// decision. want is "" for accepted, else the expected denial code.
func (d *demo) step(say string, a *actor, want authority.Code, st statement.Statement, parent ...*statement.Grant) {
	s := Step{Say: say, Kind: statement.KindOf(st), ID: st.ID(), Actor: a.name, Want: "accepted"}
	if want != "" {
		s.Want = string(want)
	}
	defer func() {
		s.Expected = s.Verdict == "accepted" && want == "" || s.Verdict == "denied" && s.Code == string(want)
		d.report.Steps = append(d.report.Steps, s)
		d.print(s)
	}()
	seq, err := d.l.NextSeq(sign.KeyID(a.priv.Public().(ed25519.PublicKey)))
	if err != nil {
		s.Verdict, s.Reason = "error", err.Error()
		return
	}
	*st.Head() = statement.Header{Type: s.Kind, Timestamp: statement.FormatTimestamp(d.now()), Log: Origin, Actor: a.name, Seq: seq}
	if len(parent) > 0 {
		switch x := st.(type) {
		case *statement.DelegateDoc:
			x.ParentScopeHash = parent[0].ScopeHash
		case *statement.ReceiptDoc:
			x.ScopeHash = parent[0].ScopeHash
		}
	}
	if err := statement.Seal(st); err != nil {
		s.Verdict, s.Reason = "error", err.Error()
		return
	}
	_, raw, err := statement.Sign(a.priv, st)
	if err != nil {
		s.Verdict, s.Reason = "error", err.Error()
		return
	}
	res, err := d.l.Append(d.ctx, raw)
	if err != nil {
		s.Verdict, s.Reason = "error", err.Error()
		return
	}
	s.Verdict, s.Code, s.Reason, s.Index = res.Verdict.String(), string(res.Code), res.Reason, res.Index
}

// print writes one line per decision:
//
//	#3  accepted  CONFIRM   confirm_42c1  alice lets agent:planner ...
//	#6  denied    RECEIPT   rcpt_2        booker tries ... -> limit_exceeded: <reason>
func (d *demo) print(s Step) {
	if d.w == nil {
		return
	}
	mark := ""
	if !s.Expected {
		mark = fmt.Sprintf("   <-- UNEXPECTED (wanted %s)", s.Want)
	}
	switch s.Verdict {
	case "accepted":
		fmt.Fprintf(d.w, "#%-3d accepted  %-9s %-15s %s%s\n", s.Index, s.Kind, s.ID, s.Say, mark)
	case "denied":
		fmt.Fprintf(d.w, "#%-3d denied    %-9s %-15s %s -> %s: %s%s\n", s.Index, s.Kind, s.ID, s.Say, s.Code, textsafe.Text(s.Reason), mark)
	default:
		fmt.Fprintf(d.w, "     %-9s %-9s %-15s %s: %s%s\n", s.Verdict, s.Kind, s.ID, s.Say, textsafe.Text(s.Reason), mark)
	}
}
