package replay_test

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/replay"
	"github.com/custodylog/custody/witness"
)

// TestReplayPolicy: with a witness policy, a replay is verified only when
// the bundle's checkpoint carries the quorum's cosignatures.
func TestReplayPolicy(t *testing.T) {
	w, b := incident(t)
	s, err := witness.NewSigner("w1.example", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return time.Unix(1767225600, 0) }
	p, err := witness.ParsePolicy([]byte("witness w1 " + s.VerifierKey() + "\nquorum w1\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Build(b, w.VerifierKey(), replay.Options{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verified || rep.Failure == nil || rep.Failure.Check != "witness quorum" || !strings.Contains(rep.Failure.Detail, "carries no witness cosignature") {
		t.Fatalf("an uncosigned bundle replayed as verified: %+v", rep.Failure)
	}
	body, _, _ := strings.Cut(b.Checkpoint, "\n\n")
	signed, err := note.Sign(&note.Note{Text: body + "\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	b.Checkpoint += string(signed[len(body)+2:])
	rep, err = replay.Build(b, w.VerifierKey(), replay.Options{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified || len(rep.Verification.Witnessed) != 1 {
		t.Fatalf("a cosigned bundle: verified %v, %+v", rep.Verified, rep.Failure)
	}
}
