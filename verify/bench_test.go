package verify_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/verify"
)

// BenchmarkVerifyBundle verifies the bundle of a pending receipt under a
// depth-3 chain (7 entries: GENESIS, two PRINCIPALs, CONFIRM, two
// DELEGATEs, the receipt), from its wire bytes, as an auditor would. Beside
// it, BenchmarkEd25519Verify gives the cost of one signature check: a
// bundle costs 8 of them (7 envelopes and the checkpoint) plus parsing,
// hashing and the decisions re-run.
func BenchmarkVerifyBundle(b *testing.B) {
	w := newStandardWorld(b)
	raw, err := w.Prove(w.s.Pending, false).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for b.Loop() {
		bundle, err := verify.ParseBundle(raw)
		if err != nil {
			b.Fatal(err)
		}
		v, err := verify.VerifyBundle(bundle, w.vkey)
		if err != nil || !v.Valid {
			b.Fatalf("%v %v", err, v)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bundles/s")
}

func BenchmarkEd25519Verify(b *testing.B) {
	a := testlog.NewActor("bench")
	msg := make([]byte, 600) // about a statement's PAE
	sig := ed25519.Sign(a.Priv, msg)
	for b.Loop() {
		if !ed25519.Verify(a.Pub, msg, sig) {
			b.Fatal("does not verify")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifies/s")
}
