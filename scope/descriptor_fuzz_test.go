package scope

import (
	"errors"
	"testing"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/fuzzseed"
)

// FuzzParseDescriptor feeds arbitrary bytes to ParseDescriptor (what
// `custody scope hash` and `custody scope check` read). It never panics;
// an error is a canon.Error or a non_canonical scope Error; an accepted
// descriptor validates, hashes, re-encodes canonically to a document that
// parses to the same hash, and never strictly attenuates itself (a copy of
// a grant is a transfer: equal_scope).
func FuzzParseDescriptor(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDescriptor(data)
		if err != nil {
			var ce *canon.Error
			if !errors.As(err, &ce) && CodeOf(err) != CodeNonCanonical {
				t.Fatalf("error is neither a canon.Error nor non_canonical: %v", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted a descriptor that does not validate: %v", err)
		}
		h, err := d.Hash()
		if err != nil {
			t.Fatalf("accepted a descriptor with no hash: %v", err)
		}
		c, err := canon.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := ParseDescriptor(c)
		if err != nil {
			t.Fatalf("canonical form refused: %v\n%s", err, c)
		}
		h2, err := d2.Hash()
		if err != nil || h2 != h {
			t.Fatalf("canonical form hashes to %s (%v), want %s", h2, err, h)
		}
		if err := canon.Unmarshal(c, &Descriptor{}); err != nil {
			t.Fatalf("re-encoding is not canonical JSON: %v\n%s", err, c)
		}
		for _, rev := range []bool{false, true} {
			g := Grant{Descriptor: d, Revocable: rev}
			if code := CodeOf(Attenuates(g, g)); code != CodeEqualScope {
				t.Fatalf("a descriptor attenuating itself gives %q, want equal_scope", code)
			}
		}
	})
}
