package witness

import (
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
)

// FuzzParsePolicy: any input is read or refused, never a panic; a policy
// that parses evaluates any checkpoint text without a panic, and a policy
// whose quorum is none is always satisfied.
func FuzzParsePolicy(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, policy, checkpoint []byte) {
		p, err := ParsePolicy(policy)
		if err != nil {
			return
		}
		_ = p.String()
		ev := p.Evaluate(checkpoint)
		_ = ev.Describe()
		if p.None() && !ev.Satisfied {
			t.Fatal("quorum none unsatisfied")
		}
		if ev.Satisfied && !p.None() && len(ev.Signed) == 0 {
			t.Fatalf("a quorum met with no cosignature: %q", policy)
		}
	})
}
