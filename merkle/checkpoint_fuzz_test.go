package merkle

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// The fuzz targets below share one log key and origin; seeds are signed
// with it, so mutations reach the body parser as well as the signature.
const fuzzOrigin = "fuzz.example/log"

var fuzzCPKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5c}, ed25519.SeedSize))

func fuzzCPSigner(tb testing.TB) (note.Signer, string) {
	s, err := NewSigner(fuzzOrigin, fuzzCPKey)
	if err != nil {
		tb.Fatal(err)
	}
	vk, err := VerifierKey(fuzzOrigin, fuzzCPKey.Public().(ed25519.PublicKey))
	if err != nil {
		tb.Fatal(err)
	}
	return s, vk
}

// checkOpened holds OpenCheckpoint to its promises: an error wraps one of
// its three sentinels; a success is exactly what SignCheckpoint would have
// signed for the same content.
func checkOpened(t *testing.T, c Checkpoint, err error, s note.Signer, vk string) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrUnsignedCheckpoint) && !errors.Is(err, ErrWrongOrigin) && !errors.Is(err, ErrMalformedCheckpoint) {
			t.Fatalf("error wraps none of the checkpoint sentinels: %v", err)
		}
		return
	}
	if c.Origin != fuzzOrigin {
		t.Fatalf("opened a checkpoint of origin %q", c.Origin)
	}
	again, err := SignCheckpoint(c.Origin, c.Size, c.Root, s)
	if err != nil {
		t.Fatalf("re-signing an opened checkpoint: %v", err)
	}
	c2, err := OpenCheckpoint(again, fuzzOrigin, vk)
	if err != nil || c2 != c {
		t.Fatalf("re-signed checkpoint opens as %+v, %v; want %+v", c2, err, c)
	}
}

// FuzzOpenCheckpoint feeds arbitrary note text to OpenCheckpoint: it never
// panics, and anything it accepts round-trips.
func FuzzOpenCheckpoint(f *testing.F) {
	fuzzseed.Add(f)
	s, vk := fuzzCPSigner(f)
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := OpenCheckpoint(text, fuzzOrigin, vk)
		checkOpened(t, c, err, s, vk)
	})
}

// FuzzOpenCheckpointBody signs an arbitrary note body with the log key, so
// that the body parser behind the signature is exercised: a signed body is
// accepted only if it is exactly the three lines SignCheckpoint writes.
func FuzzOpenCheckpointBody(f *testing.F) {
	fuzzseed.Add(f)
	s, vk := fuzzCPSigner(f)
	f.Fuzz(func(t *testing.T, body string) {
		msg, err := note.Sign(&note.Note{Text: body}, s)
		if err != nil {
			return // not note text (no final newline, or a bad character)
		}
		c, err := OpenCheckpoint(msg, fuzzOrigin, vk)
		checkOpened(t, c, err, s, vk)
		if err == nil {
			want := log.Checkpoint{Origin: c.Origin, Size: c.Size, Hash: c.Root[:]}.Marshal()
			if !bytes.Equal(want, []byte(body)) {
				t.Fatalf("accepted a body that is not canonical:\n%q\nwant\n%q", body, want)
			}
		}
	})
}

// FuzzCheckpointRoundTrip signs every size and root and opens the result.
func FuzzCheckpointRoundTrip(f *testing.F) {
	fuzzseed.Add(f)
	s, vk := fuzzCPSigner(f)
	f.Fuzz(func(t *testing.T, size uint64, root []byte) {
		var h Hash
		copy(h[:], root)
		cp, err := SignCheckpoint(fuzzOrigin, size, h, s)
		if err != nil {
			t.Fatal(err)
		}
		c, err := OpenCheckpoint(cp, fuzzOrigin, vk)
		if err != nil {
			t.Fatalf("our own checkpoint does not open: %v\n%s", err, cp)
		}
		if c.Size != size || c.Root != h || c.Origin != fuzzOrigin {
			t.Fatalf("opened %+v, signed size %d root %x", c, size, h)
		}
		// Another key's signature is not the log's.
		other, _ := NewSigner(fuzzOrigin, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5d}, 32)))
		forged, err := SignCheckpoint(fuzzOrigin, size, h, other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenCheckpoint(forged, fuzzOrigin, vk); !errors.Is(err, ErrUnsignedCheckpoint) {
			t.Fatalf("a checkpoint signed by another key: %v", err)
		}
	})
}
