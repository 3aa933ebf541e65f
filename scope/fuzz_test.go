package scope

import (
	"slices"
	"testing"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/fuzzseed"
)

// FuzzPatternCovers checks that covering is sound: if p covers q and q
// matches x, then p matches x. x is also bent to fall under q, so that the
// premise holds often.
func FuzzPatternCovers(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, p, q, x string) {
		pc := PatternCovers(p, q)
		xs := []string{x, q}
		if isWildcard(q) && CheckPattern(q) == nil {
			xs = append(xs, wildcardPrefix(q)+x, wildcardPrefix(q)+"z")
		}
		for _, x := range xs {
			if pc && Match(q, x) && !Match(p, x) {
				t.Fatalf("PatternCovers(%q, %q) and Match(%q, %q), but not Match(%q, %q)", p, q, q, x, p, x)
			}
			if Match(p, x) && CheckIdentifier(x) != nil {
				t.Fatalf("Match(%q, %q) on a malformed identifier", p, x)
			}
		}
		validP := CheckPattern(p) == nil
		if PatternCovers(p, p) != validP {
			t.Fatalf("PatternCovers(%q, %q) = %v, CheckPattern says valid=%v", p, p, !validP, validP)
		}
		if pc && PatternCovers(q, p) && p != q {
			t.Fatalf("%q and %q cover each other", p, q)
		}
		if validP && CheckPattern(q) == nil && pc != coveredBy([]string{p}, q) {
			t.Fatalf("PatternCovers(%q, %q) = %v disagrees with coveredBy", p, q, pc)
		}
	})
}

// FuzzAttenuates decodes two grants (the attenuation table's JSON form)
// and checks that Attenuates never panics, and that when it accepts, the
// child really is contained in and different from the parent.
func FuzzAttenuates(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, parentJSON, childJSON []byte) {
		var pj, cj grantJSON
		if canon.UnmarshalRelaxed(parentJSON, &pj) != nil || canon.UnmarshalRelaxed(childJSON, &cj) != nil {
			return
		}
		p, c := pj.grant(), cj.grant()
		err := Attenuates(p, c)
		if err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		// Accepted: check each rule again by the plainest means.
		if p.WorkflowID != c.WorkflowID {
			t.Fatal("accepted across workflows")
		}
		for _, r := range setRules {
			ps, cs := r.get(&p.Descriptor), r.get(&c.Descriptor)
			if ps == nil {
				continue
			}
			if cs == nil {
				t.Fatalf("accepted an absent child %s under %q", r.name, ps)
			}
			for _, e := range cs {
				if !slices.ContainsFunc(ps, func(pe string) bool { return PatternCovers(pe, e) }) {
					t.Fatalf("accepted child %s %q not covered by %q", r.element, e, ps)
				}
				// A witness identifier under e is covered by the parent.
				w := e
				if isWildcard(e) {
					w = wildcardPrefix(e) + "w"
				}
				if CheckIdentifier(w) == nil && !Covers(ps, w) {
					t.Fatalf("%q under child %q is not under parent %q", w, e, ps)
				}
			}
		}
		for k, pv := range p.Limits {
			if cv, ok := c.Limits[k]; !ok || cv > pv {
				t.Fatalf("accepted limit %q: parent %d, child %d (present %v)", k, pv, cv, ok)
			}
		}
		if c.ExpiresAt > p.ExpiresAt { // fixed-width layout: string order is time order
			t.Fatalf("accepted later expiry %s > %s", c.ExpiresAt, p.ExpiresAt)
		}
		if p.Revocable && !c.Revocable {
			t.Fatal("accepted a non-revocable child of a revocable parent")
		}
		// Strictly narrower: antisymmetric, and a grant never attenuates itself.
		if Attenuates(c, p) == nil {
			t.Fatal("parent and child attenuate each other")
		}
		if code := CodeOf(Attenuates(p, p)); code != CodeEqualScope {
			t.Fatalf("a grant against itself: %s", code)
		}
		for _, g := range []Grant{p, c} {
			if _, err := g.Hash(); err != nil {
				t.Fatalf("accepted grant has no hash: %v", err)
			}
		}
	})
}
