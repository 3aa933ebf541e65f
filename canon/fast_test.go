package canon

import (
	"bytes"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
)

// FuzzReader: whatever the canonical Reader reads, Parse accepts, and it
// is the document's canonical encoding; AppendString writes strings as
// Marshal does.
func FuzzReader(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(data)
		raw, ok := r.Raw()
		if ok && r.Done() {
			v, err := Parse(data)
			if err != nil {
				t.Fatalf("Reader read %q, Parse rejected it: %v", data, err)
			}
			if !bytes.Equal(raw, data) || !bytes.Equal(Encode(v), data) {
				t.Fatalf("Reader read %q as %q; canonical form %q", data, raw, Encode(v))
			}
		}
		got, ok := AppendString([]byte("x"), string(data))
		want, err := Marshal(string(data))
		if ok != (err == nil) || (ok && !bytes.Equal(got, append([]byte("x"), want...))) {
			t.Fatalf("AppendString(%q) = %q %v; Marshal %q %v", data, got, ok, want, err)
		}
	})
}

func TestReaderTakesCanonical(t *testing.T) {
	for _, in := range []string{`{"a":[1,-2,"x"],"b":{"c":true,"d":false},"e":"é"}`, `9007199254740991`, "\"\x7f\""} {
		r := NewReader([]byte(in))
		if _, ok := r.Raw(); !ok || !r.Done() {
			t.Errorf("%s: not read", in)
		}
	}
	for _, in := range []string{`{"b":1,"a":2}`, `{"a":1,"a":1}`, `{}`, `[]`, `-0`, `01`, `1.0`, `1e2`, `9007199254740992`, `"\n"`, `"a\/b"`, `{"é":1}`, ` 1`, `null`, "\"\xff\""} {
		r := NewReader([]byte(in))
		if _, ok := r.Raw(); ok && r.Done() {
			t.Errorf("%s: read", in)
		}
	}
}
