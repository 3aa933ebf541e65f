package audit_test

import (
	"context"
	"testing"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
)

// TestWatchAcrossRotation: a monitor that kept a checkpoint signed by the
// old key alone, before a rotation, follows the log after it: the kept
// checkpoint is trusted because the served one (new key) extends it. A
// forged past the retired key signs is not kept.
func TestWatchAcrossRotation(t *testing.T) {
	honest, forged, keys := testlog.RetiredKeyPast(t)
	root, err := merkle.RootAt(honest.TileReader(), 4)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := merkle.SignCheckpoint(honest.Origin, 4, root, honest.LogKey.NoteSigner(honest.Origin))
	if err != nil {
		t.Fatal(err)
	}
	newKey := testlog.NewActorSeed(testlog.Origin, "the checkpoint key after the rotation")
	dir := t.TempDir()
	honest.Export(dir, honest.CheckpointSignedBy(newKey.NoteSigner(honest.Origin)))
	res, err := audit.Watch(context.Background(), audit.Dir(dir), keys, kept)
	if err != nil {
		t.Fatal(err)
	}
	if res.Alert || res.Outcome != audit.WatchGrew {
		t.Fatalf("watch across the rotation: %+v", res)
	}
	// The forged 4-entry past, served signed by the retired key alone.
	fdir := t.TempDir()
	forged.Export(fdir, nil)
	res, err = audit.Watch(context.Background(), audit.Dir(fdir), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Alert || res.Outcome != audit.WatchBadSignature {
		t.Fatalf("a forged past signed by the retired key: %+v", res)
	}
}
