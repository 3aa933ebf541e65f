package verify_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/verify"
)

// world is the standard scenario in a real ledger.
type world struct {
	*testlog.World
	s    *testlog.Scenario
	vkey string
}

func newStandardWorld(tb testing.TB) *world {
	tb.Helper()
	w := testlog.NewWorld(tb, testlog.WorldOptions{})
	s := w.Standard()
	return &world{World: w, s: s, vkey: w.VerifierKey()}
}

// check runs a bundle through its wire form: Marshal, ParseBundle,
// VerifyBundle. It returns the verdict, or the error of an unusable input.
func check(tb testing.TB, b *verify.Bundle, vkey string) (*verify.Verdict, error) {
	tb.Helper()
	raw, err := b.Marshal()
	if err != nil {
		// The wire form cannot carry it (say, invalid UTF-8 or an index
		// above 2^53-1): give it to VerifyBundle directly, as a program
		// that builds bundles in memory could.
		return verify.VerifyBundle(b, vkey)
	}
	return checkBytes(raw, vkey)
}

func checkBytes(raw []byte, vkey string) (*verify.Verdict, error) {
	b, err := verify.ParseBundle(raw)
	if err != nil {
		return nil, errors.Join(verify.ErrUnusable, err)
	}
	return verify.VerifyBundle(b, vkey)
}

// mustVerify requires a valid verdict.
func mustVerify(tb testing.TB, b *verify.Bundle, vkey string) *verify.Verdict {
	tb.Helper()
	v, err := check(tb, b, vkey)
	if err != nil {
		tb.Fatalf("bundle of %d: %v", b.Subject, err)
	}
	if !v.Valid {
		tb.Fatalf("bundle of %d is invalid:\n%s", b.Subject, text(v))
	}
	return v
}

func text(v *verify.Verdict) string {
	var sb strings.Builder
	v.WriteText(&sb)
	return sb.String()
}

// topFailure returns the first failed top-level check and the first failed
// check beneath it (the one that names the entry), or nils.
func topFailure(v *verify.Verdict) (top, leaf *verify.Check) {
	for i := range v.Checks {
		if !v.Checks[i].OK {
			return &v.Checks[i], v.Failure()
		}
	}
	return nil, nil
}

// failedCheck names the first failed top-level check of v, "" if valid,
// or "unusable" for an error wrapping ErrUnusable.
func failedCheck(v *verify.Verdict, err error) string {
	if err != nil {
		if errors.Is(err, verify.ErrUnusable) {
			return "unusable"
		}
		return "error: " + err.Error()
	}
	if top, _ := topFailure(v); top != nil {
		return top.Name
	}
	return ""
}

func cloneBundle(b *verify.Bundle) *verify.Bundle {
	c := *b
	c.Entries = make([]verify.BundleEntry, len(b.Entries))
	for i, e := range b.Entries {
		c.Entries[i] = verify.BundleEntry{Index: e.Index, Leaf: e.Leaf, Proof: append([]string(nil), e.Proof...)}
	}
	return &c
}

func entryIndexes(b *verify.Bundle) []uint64 {
	out := make([]uint64, len(b.Entries))
	for i, e := range b.Entries {
		out[i] = e.Index
	}
	return out
}
