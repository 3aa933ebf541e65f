package replay_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/replay"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

const evil = "take over \u202etxt.exe <script>alert(1)</script>\x1b[31m"

// incident builds a workflow with one of everything replay flags.
func incident(t *testing.T) (*testlog.World, *verify.Bundle) {
	w := testlog.NewWorld(t, testlog.WorldOptions{})
	au := w.Author
	tick := func() { w.Clock.Add(3 * time.Second) }
	alice := testlog.NewActor("user:alice")
	planner := testlog.NewActor("agent:planner")
	booker := testlog.NewActor("agent:planner/booker")
	wf, target := "wf_inc", "shop/cart_1"
	w.Enroll(alice, "p_alice")
	tick()
	w.Accept(alice, au.Confirm(alice, "c1", testlog.NewGrant(planner, wf, []string{"shop/*"}, []string{"buy"}, nil,
		map[string]int64{"usd": 800}, 3600)))
	tick()
	w.Accept(planner, au.Delegate(planner, "d2", "c1", testlog.NewGrant(booker, wf, []string{target}, []string{"buy"}, []string{"step_1", "step_2"},
		map[string]int64{"usd": 500}, 1800)))
	tick()
	// A transfer of the whole grant: an attempted escalation.
	w.Deny(planner, au.Delegate(planner, "d_same", "c1", testlog.NewGrant(booker, wf, []string{"shop/*"}, []string{"buy"}, nil,
		map[string]int64{"usd": 800}, 3000)), authority.EqualScope)
	tick()
	w.Accept(booker, au.Pending(booker, "r1", "d2", "step_1", "buy", target, map[string]int64{"usd": 100}))
	tick()
	// Signed two minutes before it was logged (within the log's skew).
	late := au.Pending(booker, "r2", "d2", "step_2", "buy", target, map[string]int64{"usd": 50})
	late.Timestamp = statement.FormatTimestamp(w.Clock.Now().Add(-2 * time.Minute))
	w.Accept(booker, late)
	tick()
	w.Deny(booker, au.Pending(booker, "r3", "d2", "step_1", "buy", target, map[string]int64{"usd": 400}), authority.LimitExceeded)
	tick()
	stop := w.Accept(alice, au.StopChain(alice, "s1", wf, evil))
	tick()
	// r1's step was running: its outcome comes after the STOP, above its reserve.
	w.Accept(booker, au.Outcome(booker, "r1_out", "r1", statement.ResultSuccess, map[string]int64{"usd": 150}))
	tick()
	w.Accept(alice, au.Revoke(alice, "rv1", "d2", "the booker overspent"))
	_ = stop
	idx, err := w.L.WorkflowIndexes(wf)
	if err != nil {
		t.Fatal(err)
	}
	return w, w.Prove(idx[len(idx)-1], true)
}

func TestReplayIncident(t *testing.T) {
	w, b := incident(t)
	rep, err := replay.Build(b, w.VerifierKey(), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified || rep.Workflow != "wf_inc" || rep.Owner != "user:alice" {
		t.Fatalf("verified %v, workflow %q, owner %q", rep.Verified, rep.Workflow, rep.Owner)
	}
	var kinds []string
	for _, a := range rep.Attention {
		kinds = append(kinds, a.Kind+":"+a.Code)
	}
	want := []string{"escalation:equal_scope", "denial:limit_exceeded", "overrun:", "open:", "after_stop:", "clock:"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("attention %v, want %v", kinds, want)
	}
	grants := map[string]*replay.Grant{}
	for _, g := range rep.Grants {
		grants[g.ID] = g
	}
	c1, d2, same := grants["c1"], grants["d2"], grants["d_same"]
	if c1 == nil || d2 == nil || same == nil || !same.Denied || same.Code != "equal_scope" || same.Parent != "c1" {
		t.Fatalf("grants %+v", rep.Grants)
	}
	// r1 reserved 100 and consumed 150; r2 reserved 50, still open.
	// Charged: max(100, 150) + 50.
	if got, want := c1.Limits[0], (replay.Limit{Key: "usd", Max: 800, Reserved: 150, Consumed: 150, Charged: 200, Remaining: 600}); got != want {
		t.Errorf("c1 limit %+v, want %+v", got, want)
	}
	if !d2.Revoked || d2.RevokedBy != "rv1" || d2.Stopped != "chain STOP s1" || d2.Depth != 2 {
		t.Errorf("d2 %+v", d2)
	}
	for _, row := range rep.Rows {
		if row.ID == "r1_out" && strings.Join(row.Path, " → ") != "user:alice → c1 → d2 → agent:planner/booker" {
			t.Errorf("r1_out path %v", row.Path)
		}
	}

	// Untrusted text is escaped in every format.
	var text bytes.Buffer
	if err := rep.WriteText(&text, replay.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string][]byte{"text": text.Bytes(), "dot": rep.DOT(), "html": rep.HTML()} {
		if bytes.ContainsAny(out, "\u202e\x1b") {
			t.Errorf("%s output holds a raw control or bidi character", name)
		}
		if name == "text" && !bytes.Contains(out, []byte(`\u202e`)) {
			t.Errorf("%s output lacks the escaped override", name)
		}
	}
	if html := rep.HTML(); bytes.Contains(html, []byte("<script>alert")) || !bytes.Contains(html, []byte("&lt;script&gt;alert(1)")) {
		t.Error("the HTML page does not escape the STOP's reason")
	}
	var col bytes.Buffer
	rep.WriteText(&col, replay.TextOptions{Color: true})
	if !bytes.Contains(col.Bytes(), []byte("\033[31m")) {
		t.Error("no colour with Color set")
	}
}

// TestReplayTampered: a leaf changed after the fact fails inclusion; the
// report says so, marks the row, and still shows it.
func TestReplayTampered(t *testing.T) {
	w, b := incident(t)
	target := b.Entries[len(b.Entries)-2]
	raw, _ := base64.StdEncoding.DecodeString(target.Leaf)
	raw = bytes.Replace(raw, []byte(`"logged_at":"2026`), []byte(`"logged_at":"2027`), 1)
	b.Entries[len(b.Entries)-2].Leaf = base64.StdEncoding.EncodeToString(raw)
	rep, err := replay.Build(b, w.VerifierKey(), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verified || rep.Failure == nil || rep.Failure.Index == nil || *rep.Failure.Index != target.Index || rep.Failure.Check != "inclusion proofs" {
		t.Fatalf("failure %+v", rep.Failure)
	}
	for _, row := range rep.Rows {
		switch {
		case row.Index == target.Index && row.Status != replay.Failed:
			t.Errorf("tampered row %d: %s", row.Index, row.Status)
		case row.Index != target.Index && row.Status != replay.Unverified:
			t.Errorf("row %d: %s, want unverified", row.Index, row.Status)
		}
	}
	if rep.Attention[0].Kind != replay.AttnVerification {
		t.Errorf("first attention item %+v", rep.Attention[0])
	}
	var text bytes.Buffer
	rep.WriteText(&text, replay.TextOptions{})
	if !strings.Contains(text.String(), "VERIFICATION FAILED at entry") {
		t.Errorf("text:\n%s", text.String())
	}
}
