package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
)

// TestRogueDenials: a DENIAL whose reason the bundle cannot re-derive is
// still checked for everything the bundle can show (DESIGN §6): the denied
// envelope's signature when its signer's key is bound, that an envelope is
// left out only when it would not fit, and that a DENIAL on a workflow's
// chain names a signer who belongs to the workflow. Each case used to
// verify VALID (issue 15, item 1); the whole-log audit rejects each too.
func TestRogueDenials(t *testing.T) {
	for _, tc := range testlog.RogueDenialCases() {
		t.Run(tc.Name, func(t *testing.T) {
			r, bad := tc.Build(t)
			v, err := check(t, r.Bundle(bad, false), r.VerifierKey())
			if err != nil {
				t.Fatal(err)
			}
			top, leaf := topFailure(v)
			if top == nil || top.Name != cDecisions {
				t.Fatalf("first failed check is %v, want %q:\n%s", top, cDecisions, text(v))
			}
			if leaf.Index == nil || *leaf.Index != bad || !strings.HasPrefix(leaf.Name, fmt.Sprintf("#%d ", bad)) {
				t.Errorf("failure names %q (index %v), want entry %d:\n%s", leaf.Name, leaf.Index, bad, text(v))
			}
			if !strings.Contains(leaf.Detail, tc.Verify) {
				t.Errorf("failure detail %q does not say %q", leaf.Detail, tc.Verify)
			}
			dir := t.TempDir()
			r.Export(dir, nil)
			rep, err := audit.Run(context.Background(), audit.Dir(dir), audit.Options{VerifierKey: r.VerifierKey()})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Findings {
				found = found || (f.Index != nil && *f.Index == bad && f.Check == "denial" && strings.Contains(f.Detail, tc.Audit))
			}
			if !found {
				t.Errorf("audit: no denial finding at entry %d saying %q: %v", bad, tc.Audit, rep.Findings)
			}
		})
	}
}

// TestHonestOmittedEnvelope is the control: a DENIAL that leaves out an
// envelope too large to fit, and says its size, verifies and audits clean.
func TestHonestOmittedEnvelope(t *testing.T) {
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	s := testlog.Standard(r)
	for _, n := range []int{36000, 48000} {
		env := r.SignAccept(s.Alice, r.Author.StopChain(s.Alice, fmt.Sprintf("s_big%d", n), testlog.StdWorkflow, strings.Repeat("x", n)))
		s.Alice.Seq--
		c, _ := env.Canonical()
		d := r.DenyForged(env, authority.SeqMismatch, "STOP: seq", testlog.Forgery{Omit: true, EnvelopeSize: int64(len(c))})
		mustVerify(t, r.Bundle(d, false), r.VerifierKey())
	}
	// A DENIAL with the envelope inside that fits is the ledger's choice
	// for anything smaller; the same size left out is not.
	env := r.SignAccept(s.Alice, r.Author.StopChain(s.Alice, "s_mid", testlog.StdWorkflow, strings.Repeat("x", 30000)))
	s.Alice.Seq--
	c, _ := env.Canonical()
	d := r.DenyForged(env, authority.SeqMismatch, "STOP: seq", testlog.Forgery{Omit: true, EnvelopeSize: int64(len(c))})
	if v, _ := check(t, r.Bundle(d, false), r.VerifierKey()); v.Valid {
		t.Errorf("a %d-byte envelope left out verifies", len(c))
	}
}
