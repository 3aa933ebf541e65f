package verify_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/verify"
)

// fuzzKey is the verifier key of the log the seeds come from: a World's
// default log key (see TestTestdata -update).
var fuzzKey = testlog.NewActor(testlog.Origin).VerifierKey(testlog.Origin)

// FuzzVerifyBundle feeds arbitrary bytes through ParseBundle and
// VerifyBundle: neither may panic, a verdict is either valid or names a
// failed check, and the verdict always renders.
func FuzzVerifyBundle(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := verify.ParseBundle(data)
		if err != nil {
			return
		}
		v, err := verify.VerifyBundle(b, fuzzKey)
		if err != nil {
			t.Fatalf("VerifyBundle on a parsed bundle: %v", err)
		}
		if !v.Valid && v.Failure() == nil {
			t.Fatal("an invalid verdict names no failed check")
		}
		if v.Valid && v.Failure() != nil {
			t.Fatal("a valid verdict has a failed check")
		}
		v.WriteText(io.Discard)
		if _, err := json.Marshal(v); err != nil {
			t.Fatal(err)
		}
		// A bundle that parsed re-encodes and parses again.
		raw, err := b.Marshal()
		if err == nil {
			if _, err := verify.ParseBundle(raw); err != nil {
				t.Fatalf("re-encoded bundle does not parse: %v", err)
			}
		}
	})
}
