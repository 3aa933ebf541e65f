package merkle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
	"golang.org/x/mod/sumdb/note"
)

// rotationKeys returns two checkpoint keys of one log: the old and the new.
func rotationKeys(t testing.TB, origin string) (old, new note.Signer, oldVK, newVK string) {
	t.Helper()
	mk := func(seed byte) (note.Signer, string) {
		k := testKey(seed)
		s, err := NewSigner(origin, k)
		if err != nil {
			t.Fatal(err)
		}
		vk, err := VerifierKey(origin, k.Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		return s, vk
	}
	old, oldVK = mk(1)
	new, newVK = mk(2)
	return
}

func TestKeySetRotation(t *testing.T) {
	const origin = "example.com/log"
	old, new, oldVK, newVK := rotationKeys(t, origin)
	root := Hash{7}
	sign := func(size uint64, signers ...note.Signer) []byte {
		cp, err := SignCheckpoint(origin, size, root, signers[0], signers[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	// The rotation: the old key signs alone up to 100, both sign 100..150,
	// the new key alone from 150.
	before, during, after := sign(100, old), sign(120, old, new), sign(200, new)
	transition := oldVK + "\n" + newVK + "\n"
	finished := fmt.Sprintf("# comment\n\n%s\n%s\n", RetiredLine(oldVK, 150, root), newVK)
	sizeOnly := fmt.Sprintf("%s max_size=150\n%s\n", oldVK, newVK) // before design v3
	otherPast := func(size uint64) []byte {
		cp, err := SignCheckpoint(origin, size, Hash{8}, old)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}

	for _, tc := range []struct {
		name, keys string
		cp         []byte
		want       error
	}{
		{"old key, old checkpoint", oldVK, before, nil},
		{"old key, co-signed checkpoint", oldVK, during, nil},
		{"old key, new checkpoint", oldVK, after, ErrUnsignedCheckpoint},
		{"new key, old checkpoint", newVK, before, ErrUnsignedCheckpoint},
		{"new key, co-signed checkpoint", newVK, during, nil},
		{"transition set, old", transition, before, nil},
		{"transition set, co-signed", transition, during, nil},
		{"transition set, new", transition, after, nil},
		// A checkpoint before the retirement needs a consistency proof
		// (OpenRetired); on its own the retired key vouches for its pin only.
		{"finished set, old", finished, before, ErrUnsignedCheckpoint},
		{"finished set, co-signed", finished, during, nil},
		{"finished set, new", finished, after, nil},
		// A thief of the retired key cannot sign the log as it grows...
		{"finished set, retired key past its size", finished, sign(151, old), ErrUnsignedCheckpoint},
		{"finished set, retired key at its pin", finished, sign(150, old), nil},
		// ...nor a different past, of the pinned size or smaller.
		{"finished set, retired key, other root at its size", finished, otherPast(150), ErrUnsignedCheckpoint},
		{"finished set, retired key, other 4-entry past", finished, otherPast(4), ErrUnsignedCheckpoint},
		{"size-only set, retired key at its size", sizeOnly, sign(150, old), ErrUnsignedCheckpoint},
		{"size-only set, other past", sizeOnly, otherPast(4), ErrUnsignedCheckpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := OpenCheckpoint(tc.cp, origin, tc.keys)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("OpenCheckpoint: %v", err)
				}
				if c.Root != root {
					t.Fatalf("root %v", c.Root)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("OpenCheckpoint = %v, want %v", err, tc.want)
			}
		})
	}

	// A known key's bad signature fails the checkpoint even if another
	// key's is good.
	lines := strings.Split(string(during), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "— ") && strings.Contains(l, sigB64Prefix(t, old, during)) {
			lines[i] = l[:len(l)-4] + "AAA="
		}
	}
	if _, err := OpenCheckpoint([]byte(strings.Join(lines, "\n")), origin, transition); !errors.Is(err, ErrUnsignedCheckpoint) {
		t.Fatalf("a corrupted co-signature: %v", err)
	}
}

// sigB64Prefix returns the start of signer's signature line in a note.
func sigB64Prefix(t *testing.T, s note.Signer, msg []byte) string {
	n, err := note.Open(msg, note.VerifierList())
	var u *note.UnverifiedNoteError
	if !errors.As(err, &u) {
		t.Fatalf("note.Open: %v %v", n, err)
	}
	for _, sig := range u.Note.UnverifiedSigs {
		if sig.Hash == s.KeyHash() {
			return sig.Base64[:8]
		}
	}
	t.Fatal("no signature by the key")
	return ""
}

func TestKeySetText(t *testing.T) {
	const origin = "example.com/log"
	_, _, oldVK, newVK := rotationKeys(t, origin)
	_, _, otherVK, _ := rotationKeys(t, "other.example/log")

	one, err := ParseKeySet(" " + oldVK + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if one.String() != oldVK || one.Origin() != origin || one.Len() != 1 {
		t.Fatalf("one key: %q %q %d", one.String(), one.Origin(), one.Len())
	}
	two, err := one.Add(newVK)
	if err != nil {
		t.Fatal(err)
	}
	done, err := two.Retire(oldVK, 150, Hash{7})
	if err != nil {
		t.Fatal(err)
	}
	want := oldVK + " max_size=150 root=BwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n" + newVK + "\n"
	if done.String() != want {
		t.Fatalf("String = %q, want %q", done.String(), want)
	}
	if again, err := ParseKeySet(done.String()); err != nil || again.String() != want {
		t.Fatalf("round trip: %v %q", err, again)
	}
	if got := done.Current(); len(got) != 1 || got[0] != newVK {
		t.Fatalf("Current = %q", got)
	}
	if two.String() != oldVK+"\n"+newVK+"\n" {
		t.Fatalf("Retire changed the set it was called on: %q", two.String())
	}
	if _, err := done.Retire(oldVK, 200, Hash{}); err == nil {
		t.Fatal("retired a key twice")
	}
	if _, err := done.Retire(otherVK, 200, Hash{}); err == nil {
		t.Fatal("retired a key not in the set")
	}

	for _, bad := range []string{
		"",
		"# only a comment\n",
		"not a key",
		oldVK + "\n" + otherVK,          // two logs
		oldVK + "\n" + oldVK,            // twice
		oldVK + " max_size=",            // no size
		oldVK + " max_size=01",          // leading zero
		oldVK + " max_size=-1",          // negative
		oldVK + " max_size=1 extra",     // not a root
		oldVK + " max_size=1 root=AAAA", // short root
		oldVK + " root=" + strings.Repeat("A", 43) + "=",                          // root without size
		oldVK + " max_size=1 root=BwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= x", // four fields
		oldVK + " size=1",                        // unknown attribute
		oldVK + " max_size=18446744073709551616", // overflow
	} {
		if ks, err := ParseKeySet(bad); err == nil {
			t.Errorf("ParseKeySet(%q) = %q, want an error", bad, ks.String())
		}
	}
	var many []string
	for i := 0; i <= MaxKeySetKeys; i++ {
		k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{byte(i + 10)}, ed25519.SeedSize))
		vk, _ := VerifierKey(origin, k.Public().(ed25519.PublicKey))
		many = append(many, vk)
	}
	if _, err := ParseKeySet(strings.Join(many, "\n")); err == nil {
		t.Errorf("a set of %d keys was accepted", len(many))
	}
	if _, err := ParseKeySet(strings.Join(many[:MaxKeySetKeys], "\n")); err != nil {
		t.Errorf("a set of %d keys: %v", MaxKeySetKeys, err)
	}
}

// FuzzParseKeySet feeds arbitrary text to ParseKeySet: it never panics,
// and a set it accepts prints as text it reads back to the same set.
func FuzzParseKeySet(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, text string) {
		ks, err := ParseKeySet(text)
		if err != nil {
			return
		}
		again, err := ParseKeySet(ks.String())
		if err != nil {
			t.Fatalf("the printed set %q does not parse: %v", ks.String(), err)
		}
		if again.String() != ks.String() || again.Origin() != ks.Origin() || again.Len() != ks.Len() {
			t.Fatalf("round trip changed the set: %q -> %q", ks.String(), again.String())
		}
	})
}

var updateKeySet = flag.Bool("update", false, "rewrite testdata/keyset")

// TestKeySetVectors checks the files in testdata/keyset: a log's key set
// after a finished rotation (old key retired at size 150) and checkpoints
// signed before, during and after it, with the verdict each must get. The
// keys come from fixed seeds and Ed25519 is deterministic, so the files
// are regenerated byte for byte (-update rewrites them).
func TestKeySetVectors(t *testing.T) {
	const origin = "example.com/custody"
	old, new, oldVK, newVK := rotationKeys(t, origin)
	root := Hash(sha256.Sum256([]byte("custody key set vector")))
	sign := func(size uint64, signers ...note.Signer) string {
		cp, err := SignCheckpoint(origin, size, root, signers[0], signers[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		return string(cp)
	}
	files := map[string]string{
		"log.keys":                    fmt.Sprintf("# the key set of %s after a finished rotation\n%s\n%s\n", origin, newVK, RetiredLine(oldVK, 150, root)),
		"old.vkey":                    oldVK + "\n",
		"checkpoint-before.txt":       sign(100, old),
		"checkpoint-during.txt":       sign(150, old, new),
		"checkpoint-after.txt":        sign(200, new),
		"checkpoint-old-key-late.txt": sign(151, old),
		"checkpoint-old-key-pin.txt":  sign(150, old),
		// The retired key alone, signing a different history of 4 entries.
		"checkpoint-old-key-other-past.txt": func() string {
			cp, err := SignCheckpoint(origin, 4, Hash(sha256.Sum256([]byte("another past"))), old)
			if err != nil {
				t.Fatal(err)
			}
			return string(cp)
		}(),
	}
	dir := filepath.Join("..", "testdata", "keyset")
	if *updateKeySet {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != files[name] {
			t.Fatalf("%s differs from what the fixed keys give (run go test ./merkle -run KeySetVectors -update)", name)
		}
		return string(b)
	}
	keys, oldOnly := read("log.keys"), read("old.vkey")
	for _, tc := range []struct {
		file       string
		keys, only error // under the set; under the old key alone
	}{
		// Before the retirement: trusted under the set only with a
		// consistency proof to a trusted checkpoint (KeySet.OpenRetired).
		{"checkpoint-before.txt", ErrUnsignedCheckpoint, nil},
		{"checkpoint-during.txt", nil, nil},
		{"checkpoint-after.txt", nil, ErrUnsignedCheckpoint},
		{"checkpoint-old-key-late.txt", ErrUnsignedCheckpoint, nil},
		{"checkpoint-old-key-pin.txt", nil, nil},
		{"checkpoint-old-key-other-past.txt", ErrUnsignedCheckpoint, nil},
	} {
		cp := []byte(read(tc.file))
		if _, err := OpenCheckpoint(cp, origin, keys); !errors.Is(err, tc.keys) {
			t.Errorf("%s under log.keys: %v, want %v", tc.file, err, tc.keys)
		}
		if _, err := OpenCheckpoint(cp, origin, oldOnly); !errors.Is(err, tc.only) {
			t.Errorf("%s under old.vkey: %v, want %v", tc.file, err, tc.only)
		}
	}
}
