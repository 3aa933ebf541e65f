package ledger

import (
	"bytes"
	"context"
	"testing"

	"github.com/custodylog/custody/verify"
)

// TestTLogProofLeafLimit: a tlog-proof carries its leaf on one line, which
// the common reader caps at 64 KiB. The largest leaf that fits is exported
// and verifies; one byte more is refused with a clear error.
func TestTLogProofLeafLimit(t *testing.T) {
	l := openLogOnly(t, t.TempDir())
	defer l.Close()
	first, _, err := l.AppendLeaves(context.Background(), [][]byte{
		bytes.Repeat([]byte("a"), MaxTLogProofLeaf),
		bytes.Repeat([]byte("b"), MaxTLogProofLeaf+1),
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.TLogProof(first)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.VerifyTLogProof(p, l.VerifierKey())
	if err != nil {
		t.Fatalf("the largest allowed leaf: %v", err)
	}
	if f := v.Failure(); f != nil && f.Name != "entry form" { // raw leaves are not custody entries
		t.Fatalf("inclusion of the largest allowed leaf: %+v", f)
	}
	if _, err := l.TLogProof(first + 1); err == nil {
		t.Fatal("a tlog-proof of an over-long leaf was written")
	}
}
