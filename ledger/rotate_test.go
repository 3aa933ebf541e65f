package ledger

import (
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/verify"
)

// TestCheckpointKeyRotation runs a rotation end to end: checkpoints signed
// before, during and after it all verify under the final key set, the
// log grows consistently across it, DENIALs stay signed by the GENESIS
// key, and bundles verify.
func TestCheckpointKeyRotation(t *testing.T) {
	w := newWorld(t, Options{})
	opts := Options{Clock: w.clock.Now}
	alice, planner := newActor(t, "user:alice"), newActor(t, "agent:planner")
	w.enroll(alice)
	c := w.confirm(alice, "confirm_1", grant(planner, "wf_1", []string{"db/orders"}, []string{"write"}, []string{"s1"},
		map[string]int64{"budget_usd": 100}, 3600))
	w.must(alice, c, authority.Accepted, "")
	n := 0
	receipt := func(amount int64, want authority.Verdict, code authority.Code) *Result {
		n++
		p := w.pending(planner, "rcpt_"+strings.Repeat("x", n), "wf_1", "confirm_1", c.ScopeHash, "s1", "write", "db/orders",
			map[string]int64{"budget_usd": amount})
		return w.must(planner, p, want, code)
	}
	receipt(10, authority.Accepted, "")
	receipt(1000, authority.Denied, authority.LimitExceeded)
	before := w.l.Head()
	oldKey := w.l.VerifierKey()
	if strings.Contains(oldKey, "\n") {
		t.Fatalf("a fresh log's key set is not one key: %q", oldKey)
	}
	w.l.Close()

	// Start: a key this log has used, or bound, is refused.
	if _, err := RotateCheckpointKey(w.dir, LogKeyFile, opts); err == nil {
		t.Fatal("rotated to the log key itself")
	}
	agentKey := filepath.Join(t.TempDir(), "agent.key")
	if err := sign.WritePrivateKeyFile(agentKey, planner.priv, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := RotateCheckpointKey(w.dir, agentKey, opts); err == nil || !strings.Contains(err.Error(), "binds already") {
		t.Fatalf("rotated to an agent's key: %v", err)
	}
	if _, err := FinishRotation(w.dir, opts); err == nil {
		t.Fatal("finished a rotation that was never started")
	}
	_, newPriv, _ := sign.GenerateKey()
	if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, "keys/checkpoint-2.key"), newPriv, nil, false); err != nil {
		t.Fatal(err)
	}
	r1, err := RotateCheckpointKey(w.dir, "keys/checkpoint-2.key", opts)
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := merkle.VerifierKey(testOrigin, newPriv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Signing) != 2 || r1.Signing[0] != oldKey || r1.Signing[1] != newKey || r1.Size != before.Size {
		t.Fatalf("rotation started: %+v", r1)
	}
	// The head is signed again by both keys: either alone verifies it.
	for _, k := range []string{oldKey, newKey} {
		if c, err := merkle.OpenCheckpoint(r1.Checkpoint, testOrigin, k); err != nil || c.Size != before.Size {
			t.Fatalf("co-signed head under %s: %v", k, err)
		}
	}
	if _, err := RotateCheckpointKey(w.dir, "keys/checkpoint-2.key", opts); err == nil {
		t.Fatal("started a second rotation during the first")
	}

	// During the rotation, new checkpoints are co-signed.
	if w.l, err = Open(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	during := receipt(10, authority.Accepted, "")
	receipt(1000, authority.Denied, authority.LimitExceeded)
	for _, k := range []string{oldKey, newKey} {
		if _, err := merkle.OpenCheckpoint(during.Head.Checkpoint, testOrigin, k); err != nil {
			t.Fatalf("checkpoint during the rotation under %s: %v", k, err)
		}
	}
	mid := w.l.Head()
	w.l.Close()

	// Finish: the old key is retired at the current size.
	r2, err := FinishRotation(w.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r2.Signing) != 1 || r2.Signing[0] != newKey || len(r2.Retired) != 1 || r2.Retired[0] != oldKey || r2.Size != mid.Size {
		t.Fatalf("rotation finished: %+v", r2)
	}
	if !strings.Contains(r2.Keys, merkle.RetiredLine(oldKey, mid.Size, mid.Root)) {
		t.Fatalf("final key set %q does not pin the old key to size %d, root %s", r2.Keys, mid.Size, mid.Root)
	}
	if w.l, err = Open(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	if w.l.VerifierKey() != r2.Keys {
		t.Fatalf("the ledger's key set %q, the rotation's %q", w.l.VerifierKey(), r2.Keys)
	}
	after := receipt(10, authority.Accepted, "")
	den := receipt(1000, authority.Denied, authority.LimitExceeded)
	w.checkProof(after)
	w.checkProof(den)
	final := w.l.Head()

	// The old key alone no longer verifies new checkpoints; the set does,
	// and the head the old key was retired at. A checkpoint from before
	// that, signed by the old key alone, is trusted once proven consistent
	// (below): the retired key alone vouches for its pinned head only.
	if _, err := merkle.OpenCheckpoint(final.Checkpoint, testOrigin, oldKey); !errors.Is(err, merkle.ErrUnsignedCheckpoint) {
		t.Fatalf("a checkpoint after the rotation under the old key: %v", err)
	}
	for name, cp := range map[string][]byte{"during": mid.Checkpoint, "after": final.Checkpoint} {
		if _, err := merkle.OpenCheckpoint(cp, testOrigin, r2.Keys); err != nil {
			t.Fatalf("checkpoint %s the rotation under the final set: %v", name, err)
		}
	}
	if _, err := merkle.OpenCheckpoint(before.Checkpoint, testOrigin, r2.Keys); !errors.Is(err, merkle.ErrUnsignedCheckpoint) {
		t.Fatalf("a checkpoint before the rotation, signed by the retired key alone, under the final set: %v", err)
	}
	// The log stayed append-only across the rotation.
	proof, err := w.l.ConsistencyProof(before.Size, final.Size)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyConsistency(before.Checkpoint, final.Checkpoint, proof, r2.Keys)
	if err != nil || !v.Valid {
		t.Fatalf("consistency across the rotation: %v %+v", err, v)
	}
	// DENIALs are still signed by the GENESIS log key, and bundles verify
	// under the set (GENESIS's log_key is in it, retired).
	e, err := w.l.Entry(den.Index)
	if err != nil {
		t.Fatal(err)
	}
	if e.Envelope.KeyID != sign.KeyID(w.l.keys.kr.log.Public().(ed25519.PublicKey)) {
		t.Fatalf("DENIAL after the rotation signed by %s", e.Envelope.KeyID)
	}
	for _, idx := range []uint64{after.Index, den.Index} {
		b, err := w.l.Prove(idx, true)
		if err != nil {
			t.Fatal(err)
		}
		v, err := verify.VerifyBundle(b, r2.Keys)
		if err != nil || !v.Valid {
			t.Fatalf("bundle of %d under the final set: %v %+v", idx, err, v)
		}
		if v, err := verify.VerifyBundle(b, oldKey); err != nil || v.Valid {
			t.Fatalf("bundle of %d after the rotation verified under the old key alone: %v", idx, err)
		}
	}
	if got := w.replay(); len(got) == 0 {
		t.Fatal("replay produced no state")
	}
}

// TestRotationNeedsTheFolder refuses to rotate a ledger another process has open.
func TestRotationNeedsTheFolder(t *testing.T) {
	w := newWorld(t, Options{})
	if _, err := RotateCheckpointKey(w.dir, "keys/none.key", Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("rotating an open ledger: %v", err)
	}
}
