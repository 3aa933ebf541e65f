package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/verify"
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
			f := tc.Build(t)
			r, bad := f.R, f.Bad
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

// TestRetiredKeyOtherPast (issue 15, item 7): after a checkpoint key
// rotation the retired key, still on the host, signs a different 4-entry
// log of the same origin. Pinned by size alone, the key set let it verify
// (the checkpoint was smaller than max_size); pinned to (size, root), the
// retired key vouches only for the honest head.
func TestRetiredKeyOtherPast(t *testing.T) {
	honest, forged, keys := testlog.RetiredKeyPast(t)
	// The forgery is otherwise perfect: under the old key alone it verifies.
	mustVerify(t, forged.Bundle(forged.Size()-1, false), forged.VerifierKey())
	v, err := check(t, forged.Bundle(forged.Size()-1, false), keys)
	if err != nil {
		t.Fatal(err)
	}
	if top, _ := topFailure(v); top == nil || top.Name != cCheckpoint || !strings.Contains(top.Detail, "signed only by a retired key") {
		t.Fatalf("a different past signed by the retired key: want the checkpoint refused:\n%s", text(v))
	}
	// The honest head the key was retired at still verifies under the set,
	// signed by the retired key alone.
	mustVerify(t, honest.Bundle(honest.Size()-1, true), keys)
	// An honest checkpoint from before, signed by the retired key alone, is
	// trusted once proven consistent with the pinned head.
	old := honest.BundleWith(3, honest.Indexes(3, false), 4, checkpointAt(t, honest, 4))
	if v, _ := check(t, old, keys); v.Valid {
		t.Fatalf("a smaller checkpoint by the retired key alone verified without a consistency proof")
	}
	proof, err := merkle.ConsistencyProof(honest.TileReader(), 4, honest.Size())
	if err != nil {
		t.Fatal(err)
	}
	cv, err := verify.VerifyConsistency([]byte(old.Checkpoint), honest.Checkpoint(), proof, keys)
	if err != nil || !cv.Valid {
		t.Fatalf("consistency of the honest size-4 checkpoint with the pinned head: %v %+v", err, cv)
	}
	// The forged past is not consistent with the honest head.
	if cv, err := verify.VerifyConsistency(forged.Checkpoint(), honest.Checkpoint(), proof, keys); err != nil || cv.Valid {
		t.Fatalf("the forged past proved consistent: %v", err)
	}
}

// checkpointAt is the honest log's checkpoint of an earlier size, signed by
// its log key.
func checkpointAt(t *testing.T, r *testlog.Rogue, size uint64) []byte {
	root, err := merkle.RootAt(r.TileReader(), size)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := merkle.SignCheckpoint(r.Origin, size, root, r.LogKey.NoteSigner(r.Origin))
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestStandaloneDenialUnknownSigner: a DENIAL outside every workflow whose
// signer is bound only elsewhere verifies, and the verdict says its
// signature is left to the audit.
func TestStandaloneDenialUnknownSigner(t *testing.T) {
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	s := testlog.Standard(r)
	mallory := testlog.NewActor("agent:mallory")
	r.Accept(s.Bob, r.Author.Confirm(s.Bob, "c_bob", testlog.NewGrant(mallory, "wf_bob", []string{"shop/*"}, []string{"buy"}, nil, nil, 600)))
	env := r.SignAccept(mallory, r.Author.StopChain(mallory, "s_m", testlog.StdWorkflow, "not mine"))
	mallory.Seq--
	d := r.DenyEnvelope(env, authority.IdentityConflict, "STOP s_m: identity")
	v := mustVerify(t, r.Bundle(d, false), r.VerifierKey())
	if !strings.Contains(strings.Join(v.Notes, "\n"), "signature is left to custody audit") {
		t.Errorf("notes %q do not say the signature is left to the audit", v.Notes)
	}
}
