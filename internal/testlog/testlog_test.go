package testlog_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

func mustValid(t *testing.T, name string, b *verify.Bundle, vkey string) {
	t.Helper()
	raw, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := verify.ParseBundle(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, err := verify.VerifyBundle(b2, vkey)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !v.Valid {
		var sb strings.Builder
		v.WriteText(&sb)
		t.Fatalf("%s: invalid:\n%s", name, sb.String())
	}
}

// TestRogueMatchesLedger: a Rogue told the ledger's decisions writes the
// leaves the ledger wrote, byte for byte but for the DENIAL's free-text
// reason, and its bundles hold the same entries and verify.
func TestRogueMatchesLedger(t *testing.T) {
	w := testlog.NewWorld(t, testlog.WorldOptions{})
	ws := w.Standard()
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	rs := testlog.Standard(r)
	if ws.Pending != rs.Pending || ws.Denial != rs.Denial || ws.Stop != rs.Stop {
		t.Fatalf("indexes differ: world %+v, rogue %+v", ws, rs)
	}
	wl, rl := w.Leaves(), r.Leaves()
	if len(wl) != len(rl) {
		t.Fatalf("world has %d leaves, rogue %d", len(wl), len(rl))
	}
	for i := range wl {
		a, b := wl[i], rl[i]
		if uint64(i) == ws.Denial {
			a, b = withoutReason(t, a), withoutReason(t, b)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("leaf %d differs:\nworld %.400s\nrogue %.400s", i, a, b)
		}
	}
	if w.VerifierKey() != r.VerifierKey() {
		t.Errorf("verifier keys differ")
	}
	for _, subj := range []uint64{0, 2, ws.Confirm, ws.Delegate3, ws.Pending, ws.Outcome, ws.Denial, ws.Stop} {
		for _, whole := range []bool{false, true} {
			wb, rb := w.Prove(subj, whole), r.Bundle(subj, whole)
			if wi, ri := indexes(wb), indexes(rb); !slices.Equal(wi, ri) {
				t.Errorf("bundle of %d (whole %v): world has entries %v, rogue %v", subj, whole, wi, ri)
			}
			mustValid(t, "world", wb, w.VerifierKey())
			mustValid(t, "rogue", rb, r.VerifierKey())
		}
	}
}

func indexes(b *verify.Bundle) []uint64 {
	var out []uint64
	for _, e := range b.Entries {
		out = append(out, e.Index)
	}
	return out
}

// withoutReason returns a DENIAL leaf's envelope payload with its reason
// cleared (the signature then no longer matters).
func withoutReason(t *testing.T, leaf []byte) []byte {
	t.Helper()
	l, _, err := statement.ParseLeaf(leaf)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sign.ParseEnvelope(l.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	st, err := statement.Parse(statement.Denial, env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	st.(*statement.DenialDoc).Reason = "-"
	out, err := statement.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	prev := "none"
	if l.PrevInWorkflow != nil {
		prev = fmt.Sprint(*l.PrevInWorkflow)
	}
	return fmt.Appendf(out, " logged_at=%s prev=%s trust_head=%d", l.LoggedAt, prev, l.TrustHead)
}
