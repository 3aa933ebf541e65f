package sign

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
)

// FuzzParsePublicKey feeds arbitrary text to the statement form of a public
// key. It never panics; every error is a key_invalid *Error; an accepted
// key is 32 bytes, passes CheckPublicKey, is not on the small-order
// blocklist, and is spelled exactly as EncodePublicKey spells it (one key,
// one spelling). Its PKIX PEM form parses back to the same key.
func FuzzParsePublicKey(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := ParsePublicKey(s)
		if err != nil {
			if !errors.Is(err, ErrKey) {
				t.Fatalf("error is not %s: %v", CodeKey, err)
			}
			// The same bytes are refused in PEM form too (or are not 32 bytes).
			if raw, derr := base64.StdEncoding.Strict().DecodeString(s); derr == nil && len(raw) == ed25519.PublicKeySize &&
				base64.StdEncoding.EncodeToString(raw) == s {
				p, merr := MarshalPublicKeyPEM(ed25519.PublicKey(raw))
				if merr != nil {
					t.Fatal(merr)
				}
				if _, perr := ParsePublicKeyPEM(p); perr == nil {
					t.Fatalf("%q refused in statement form but accepted as PEM", s)
				}
			}
			return
		}
		if len(pub) != ed25519.PublicKeySize {
			t.Fatalf("accepted a key of %d bytes", len(pub))
		}
		if CheckPublicKey(pub) != nil || hasSmallOrderEncoding(pub) {
			t.Fatalf("accepted a key CheckPublicKey refuses: %x", []byte(pub))
		}
		if EncodePublicKey(pub) != s {
			t.Fatalf("accepted %q, which is not the canonical spelling %q", s, EncodePublicKey(pub))
		}
		p, err := MarshalPublicKeyPEM(pub)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePublicKeyPEM(p)
		if err != nil || !back.Equal(pub) {
			t.Fatalf("PEM round trip: %v", err)
		}
		if len(KeyID(pub)) != 64 {
			t.Fatal("key id is not 64 hex digits")
		}
	})
}

// FuzzParsePublicKeyPEM feeds arbitrary bytes to the PKIX PEM parser. It
// never panics; every error is a key_invalid *Error; an accepted key
// passes CheckPublicKey and re-encodes to a PEM that parses to the same
// key, and its statement form parses too.
func FuzzParsePublicKeyPEM(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := ParsePublicKeyPEM(data)
		if err != nil {
			if !errors.Is(err, ErrKey) {
				t.Fatalf("error is not %s: %v", CodeKey, err)
			}
			return
		}
		if CheckPublicKey(pub) != nil {
			t.Fatalf("accepted a key CheckPublicKey refuses: %x", []byte(pub))
		}
		p, err := MarshalPublicKeyPEM(pub)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePublicKeyPEM(p)
		if err != nil || !back.Equal(pub) {
			t.Fatalf("PEM round trip: %v", err)
		}
		again, err := ParsePublicKey(EncodePublicKey(pub))
		if err != nil || !bytes.Equal(again, pub) {
			t.Fatalf("statement form of an accepted PEM key: %v", err)
		}
	})
}
