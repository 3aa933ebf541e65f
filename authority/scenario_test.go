package authority_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// scenarioStep is one submission of testdata/authority/scenarios.json.
type scenarioStep struct {
	Name string `json:"name"`
	By   string `json:"by"`   // signer key handle
	Kind string `json:"kind"` // statement type
	Set  obj    `json:"set"`  // fields; the harness fills the rest

	Advance    *float64 `json:"advance"`      // seconds before the step (default 1)
	AtExpiry   string   `json:"at_expiry"`    // set the clock to this grant's expires_at...
	AtOffsetNS int64    `json:"at_offset_ns"` // ...plus this many nanoseconds

	TSOffset  int64    `json:"ts_offset"`  // seconds added to the timestamp
	SeqDelta  int64    `json:"seq_delta"`  // added to the right seq
	SignKind  string   `json:"sign_kind"`  // sign under another kind's payload type
	Form      string   `json:"form"`       // "indent": non-canonical bytes
	TamperSig bool     `json:"tamper_sig"` // corrupt the signature
	Drop      []string `json:"drop"`       // header fields to leave out

	Expect string                      `json:"expect"` // accepted | denied/<code> | refused/<code>
	Note   bool                        `json:"note"`   // an accepted decision carries a Note
	Spent  map[string]map[string]int64 `json:"spent"`  // grant id -> charged amounts after the step
}

func loadScenario(t *testing.T) []scenarioStep { return loadScenarioFile(t, "scenarios.json") }

func loadScenarioFile(t *testing.T, name string) []scenarioStep {
	raw, err := os.ReadFile("../testdata/authority/" + name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var file struct {
		Comment []string       `json:"comment"`
		Steps   []scenarioStep `json:"steps"`
	}
	if err := dec.Decode(&file); err != nil {
		t.Fatal(err)
	}
	return file.Steps
}

func verdictString(d authority.Decision) string {
	if d.Verdict == authority.Accepted {
		if d.Hold != nil {
			return "held"
		}
		return "accepted"
	}
	return d.Verdict.String() + "/" + string(d.Code)
}

// TestScenarios runs the scenario table: every step's verdict and reason
// code must be as written. The log it writes must then replay.
func TestScenarios(t *testing.T) {
	steps := loadScenario(t)
	if len(steps) < 80 {
		t.Fatalf("only %d steps", len(steps))
	}
	h := newHarness(t)
	h.flushEvery, h.restartEvery = 7, 3 // reopen the engine over its store now and then
	counts := map[string]int{}
	leafOf := map[int]int{} // step -> leaf index
	for i, s := range steps {
		switch {
		case s.AtExpiry != "":
			g := h.e.Grant(s.AtExpiry)
			if g == nil {
				t.Fatalf("step %d %q: no grant %s", i, s.Name, s.AtExpiry)
			}
			exp, _ := time.Parse(time.RFC3339, g.Descriptor.ExpiresAt)
			at := exp.Add(time.Duration(s.AtOffsetNS))
			h.advance(at.Sub(h.now))
		case s.Advance != nil:
			h.advance(time.Duration(*s.Advance * float64(time.Second)))
		default:
			h.advance(time.Second)
		}
		op := opts{tsOffset: time.Duration(s.TSOffset) * time.Second, seqDelta: s.SeqDelta, signKind: s.SignKind,
			form: s.Form, tamperSig: s.TamperSig, drop: s.Drop}
		before := h.index
		d := h.submit(s.By, statement.Kind(s.Kind), s.Set, op)
		got := verdictString(d)
		counts[got]++
		if got != s.Expect {
			t.Errorf("step %d %q: got %s (%s), want %s", i, s.Name, got, d.Reason, s.Expect)
			continue
		}
		if d.Verdict == authority.Refused && h.index != before {
			t.Errorf("step %d %q: a refused submission took index %d", i, s.Name, before)
		}
		if d.Verdict != authority.Refused {
			leafOf[i] = int(before)
			if d.Reason == "" && d.Verdict == authority.Denied {
				t.Errorf("step %d %q: a denial without a reason", i, s.Name)
			}
		}
		if d.Verdict == authority.Accepted && s.Note != (len(d.Notes) > 0) {
			t.Errorf("step %d %q: notes %q, want note=%v", i, s.Name, d.Notes, s.Note)
		}
		for id, want := range s.Spent {
			g := h.e.Grant(id)
			if g == nil {
				t.Errorf("step %d %q: no grant %s", i, s.Name, id)
				continue
			}
			if !maps.Equal(nonZero(g.Spent), nonZero(want)) {
				t.Errorf("step %d %q: grant %s charged %v, want %v", i, s.Name, id, g.Spent, want)
			}
		}
	}

	// Every reason code the engine can produce appears. too_large is decided
	// before the engine (the ledger refuses oversized submissions) and
	// bad_envelope only when the state store fails (TestStoreFailure).
	all := []authority.Code{authority.UnknownKey, authority.BadSignature,
		authority.SchemaInvalid, authority.NonCanonical, authority.WrongLog, authority.DuplicateID, authority.ActorMismatch,
		authority.SeqMismatch, authority.ClockSkew, authority.NotPrincipal, authority.NotGrantee, authority.NotAuthorized,
		authority.WorkflowOwned, authority.UnknownReference, authority.WorkflowMismatch, authority.IdentityConflict,
		authority.OutcomeExists, authority.OutcomeMismatch, authority.StopLifted, authority.Revoked, authority.Expired,
		authority.WorkflowStopped, authority.StepStopped, authority.ScopeHashMismatch, authority.DepthExceeded,
		authority.Widening, authority.EqualScope, authority.LimitMissing, authority.LimitWidened, authority.ExpiryWidened,
		authority.RevocabilityWidened, authority.PrincipalMismatch, authority.OutOfScope, authority.ReserveMissing,
		authority.LimitExceeded}
	for _, c := range all {
		if counts["denied/"+string(c)]+counts["refused/"+string(c)] == 0 {
			t.Errorf("no step produces %s", c)
		}
	}
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		lines = append(lines, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	t.Logf("%d steps, %d leaves: %s", len(steps), len(h.leaves), strings.Join(lines, " "))

	// The log replays, decision for decision, into the same state.
	h.flush()
	e, ds := replayAll(t, h.leaves)
	for i, s := range steps {
		li, ok := leafOf[i]
		if !ok {
			continue
		}
		if got := verdictString(*ds[li]); got != s.Expect {
			t.Errorf("replay of step %d %q: %s, want %s", i, s.Name, got, s.Expect)
		}
	}
	sameState(t, h.allDirty, dirtyMap(e), "ledger vs replay")
}

func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestApprovalScenarios runs testdata/authority/approvals.json (approval
// rules, held receipts, APPROVALs: DESIGN §7) like TestScenarios: every
// verdict and code as written, reservations given back where written, and
// the log replays into the same state.
func TestApprovalScenarios(t *testing.T) {
	steps := loadScenarioFile(t, "approvals.json")
	h := newHarness(t)
	h.flushEvery, h.restartEvery = 5, 2
	counts := map[string]int{}
	leafOf := map[int]int{}
	for i, s := range steps {
		if s.Advance != nil {
			h.advance(time.Duration(*s.Advance * float64(time.Second)))
		} else {
			h.advance(time.Second)
		}
		op := opts{tsOffset: time.Duration(s.TSOffset) * time.Second, seqDelta: s.SeqDelta}
		before := h.index
		d := h.submit(s.By, statement.Kind(s.Kind), s.Set, op)
		got := verdictString(d)
		counts[got]++
		if got != s.Expect {
			t.Errorf("step %d %q: got %s (%s), want %s", i, s.Name, got, d.Reason, s.Expect)
			continue
		}
		if d.Verdict != authority.Refused {
			leafOf[i] = int(before)
		}
		if d.Verdict == authority.Accepted && s.Note != (len(d.Notes) > 0) {
			t.Errorf("step %d %q: notes %q, want note=%v", i, s.Name, d.Notes, s.Note)
		}
		if d.Verdict == authority.Denied && d.Kind == statement.Approval && d.Code != authority.SeqMismatch && !strings.Contains(d.Reason, str(s.Set["receipt_ref"])) {
			t.Errorf("step %d %q: the reason %q does not name the receipt", i, s.Name, d.Reason)
		}
		for id, want := range s.Spent {
			g := h.e.Grant(id)
			if g == nil {
				t.Errorf("step %d %q: no grant %s", i, s.Name, id)
				continue
			}
			if !maps.Equal(nonZero(g.Spent), nonZero(want)) {
				t.Errorf("step %d %q: grant %s charged %v, want %v", i, s.Name, id, g.Spent, want)
			}
		}
	}
	for _, c := range []authority.Code{authority.NotApprover, authority.ApprovalMismatch, authority.NotHeld,
		authority.ApprovalExpired, authority.DuplicateApproval} {
		if counts["denied/"+string(c)] == 0 {
			t.Errorf("no step produces %s", c)
		}
	}
	h.flush()
	e, ds := replayAll(t, h.leaves)
	for i, s := range steps {
		if li, ok := leafOf[i]; ok {
			if got := verdictString(*ds[li]); got != s.Expect {
				t.Errorf("replay of step %d %q: %s, want %s", i, s.Name, got, s.Expect)
			}
		}
	}
	sameState(t, h.allDirty, dirtyMap(e), "ledger vs replay")
}
