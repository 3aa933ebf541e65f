package verify_test

import (
	"context"
	"testing"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
)

// TestDenialKeyRotation: after the admin rotates the DENIAL key, bundles
// of DENIALs the new key signs verify with nothing but the checkpoint key
// (the rotation is in the trust chain every bundle carries), and the whole
// log audits clean. A DENIAL the retired key signs afterwards is the
// rogue case denial-key-retired-signs.
func TestDenialKeyRotation(t *testing.T) {
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	s := testlog.Standard(r)
	rot := r.RotateDenialKey("log_key_2", testlog.NewActorSeed(testlog.Origin, "denials 2"))
	d := r.Deny(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", testlog.StdTarget,
		map[string]int64{"budget_usd": 10, "max_side_effects": 0}), authority.WorkflowStopped)
	mustVerify(t, r.Bundle(d, true), r.VerifierKey())
	if !slicesContain(entryIndexes(r.Bundle(d, true)), rot) {
		t.Fatalf("the bundle of DENIAL %d lacks the rotation at %d", d, rot)
	}
	// The DENIAL before the rotation (the scenario's) still verifies.
	mustVerify(t, r.Bundle(s.Denial, false), r.VerifierKey())
	dir := t.TempDir()
	r.Export(dir, nil)
	rep, err := audit.Run(context.Background(), audit.Dir(dir), audit.Options{VerifierKey: r.VerifierKey()})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("audit after a DENIAL key rotation: %v", rep.Findings)
	}
}
