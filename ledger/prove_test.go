package ledger

import (
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

func TestProveVerifies(t *testing.T) {
	w := newWorld(t, Options{})
	alice, planner, booker := newActor(t, "user:alice"), newActor(t, "agent:planner"), newActor(t, "agent:planner/booker")
	w.enroll(alice)
	c := w.confirm(alice, "c1", grant(planner, "wf1", []string{"shop/*"}, []string{"buy"}, nil, map[string]int64{"usd": 100}, 900))
	w.must(alice, c, authority.Accepted, "")
	d := w.delegate(planner, "d1", "c1", c.ScopeHash, grant(booker, "wf1", []string{"shop/a"}, []string{"buy"}, nil, map[string]int64{"usd": 50}, 600))
	w.must(planner, d, authority.Accepted, "")
	p := w.pending(booker, "r1", "wf1", "d1", d.ScopeHash, "s1", "buy", "shop/a", map[string]int64{"usd": 50})
	r := w.must(booker, p, authority.Accepted, "")
	over := w.pending(booker, "r2", "wf1", "d1", d.ScopeHash, "s1", "buy", "shop/a", map[string]int64{"usd": 1})
	den := w.must(booker, over, authority.Denied, authority.LimitExceeded)
	// An unrelated principal and workflow in between.
	bob := newActor(t, "user:bob")
	w.enroll(bob)

	for _, tc := range []struct {
		subject uint64
		whole   bool
		entries int
	}{{r.Index, false, 5}, {den.Index, false, 6}, {r.Index, true, 6}, {0, false, 1}} {
		b, err := w.l.Prove(tc.subject, tc.whole)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Entries) != tc.entries {
			t.Errorf("bundle for %d (whole %v) has %d entries, want %d", tc.subject, tc.whole, len(b.Entries), tc.entries)
		}
		raw, _ := b.Marshal()
		b2, err := verify.ParseBundle(raw)
		if err != nil {
			t.Fatal(err)
		}
		v, err := verify.VerifyBundle(b2, w.l.VerifierKey())
		if err != nil {
			t.Fatal(err)
		}
		if !v.Valid {
			var sb strings.Builder
			v.WriteText(&sb)
			t.Fatalf("bundle for %d invalid:\n%s", tc.subject, sb.String())
		}
	}
	_ = statement.Receipt
}
