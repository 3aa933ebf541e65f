package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/transparency-dev/formats/proof"

	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/verify"
)

// tlogFuzzOrigin and tlogFuzzKey sign the seed corpus of FuzzVerifyTLogProof.
const tlogFuzzOrigin = "fuzz.example/log"

var tlogFuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x71}, ed25519.SeedSize))

// FuzzVerifyTLogProof feeds arbitrary bytes to VerifyTLogProof (what
// `custody verify --tlog-proof` reads). It never panics; an error always
// wraps ErrUnusable and comes without a verdict; a verdict is never nil;
// and a valid verdict is confirmed independently: the checkpoint opens
// under the log key, the index is inside the tree, and the leaf carried in
// the proof's extra data is included at that index.
func FuzzVerifyTLogProof(f *testing.F) {
	fuzzseed.Add(f)
	vk, err := merkle.VerifierKey(tlogFuzzOrigin, tlogFuzzKey.Public().(ed25519.PublicKey))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := verify.VerifyTLogProof(data, vk)
		if err != nil {
			if !errors.Is(err, verify.ErrUnusable) || v != nil {
				t.Fatalf("error %v (verdict %v) does not wrap ErrUnusable", err, v)
			}
			return
		}
		if v == nil {
			t.Fatal("no verdict and no error")
		}
		if !v.Valid {
			if v.Failure() == nil {
				t.Fatal("an invalid verdict names no failed check")
			}
			return
		}
		var p proof.TLogProof
		if err := p.Unmarshal(data); err != nil {
			t.Fatalf("valid verdict for a proof that does not parse: %v", err)
		}
		cp, err := merkle.OpenCheckpoint(p.Checkpoint, tlogFuzzOrigin, vk)
		if err != nil {
			t.Fatalf("valid verdict for a checkpoint that does not open: %v", err)
		}
		if p.Index >= cp.Size || len(p.ExtraData) == 0 {
			t.Fatalf("valid verdict for index %d of size %d with %d bytes of leaf", p.Index, cp.Size, len(p.ExtraData))
		}
		hashes := make([]merkle.Hash, len(p.Hashes))
		for i, h := range p.Hashes {
			hashes[i] = merkle.Hash(h)
		}
		if err := merkle.VerifyInclusion(p.Index, cp.Size, merkle.LeafHash(p.ExtraData), hashes, cp.Root); err != nil {
			t.Fatalf("valid verdict for a failing inclusion proof: %v", err)
		}
		if v.Subject != p.Index || v.Size != cp.Size {
			t.Fatalf("verdict names entry %d of %d, the proof %d of %d", v.Subject, v.Size, p.Index, cp.Size)
		}
	})
}
