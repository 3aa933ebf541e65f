package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
	"github.com/custodylog/custody/witness/cosign"
)

// TestWitnessedCheckpointSurvivesRestart: the witnessed checkpoint (the
// note with every cosignature gathered) is kept in the store, so that a
// restarted server serves the same cosigned checkpoint at once, with every
// witness down. A stored copy that was tampered with (a cosignature, the
// log's signature, or a checkpoint the log key signed over another tree)
// is refused with an error naming the check, and not served.
func TestWitnessedCheckpointSurvivesRestart(t *testing.T) {
	t.Run("badger", func(t *testing.T) { witnessedRestart(t, t.TempDir()) })
	t.Run("postgres", func(t *testing.T) { witnessedRestart(t, storagetest.PostgresURL(t)) })
}

// storedFile reads the witnessed checkpoint kept in an open log's store.
func storedFile(lg *servertest.Log) []byte {
	b, _ := lg.Ledger.Store().ReadFile(cosign.StoredName)
	return b
}

// writeStored replaces the kept checkpoint of a closed log's store.
func writeStored(t *testing.T, loc string, data []byte) {
	t.Helper()
	if !pgstore.IsURL(loc) {
		if err := os.WriteFile(filepath.Join(loc, filepath.FromSlash(cosign.StoredName)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	st, err := pgstore.Open(context.Background(), loc, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.WriteFile(cosign.StoredName, data); err != nil {
		t.Fatal(err)
	}
}

func witnessedRestart(t *testing.T, loc string) {
	wl := startWitnessedAt(t, loc, server.Options{})
	alice := wl.Principal("user:alice")
	wl.Agent(alice, "agent:a", "wf_r", nil)

	// Wait until the head is cosigned by all three witnesses and kept.
	size := wl.Ledger.Head().Size
	var witnessed []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _, body := wl.Get("/v1/checkpoint/witnessed")
		kept := storedFile(wl.Log)
		if status == http.StatusOK && len(wl.signedBy(t, body)) == 3 && bytes.Equal(kept, body) {
			if c, err := merkle.OpenCheckpoint(body, servertest.Origin, wl.VKey); err == nil && c.Size == size {
				witnessed = body
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the head of size %d was never witnessed by all three and kept: %d %q, kept %q", size, status, body, kept)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Restart with every witness down: the same cosigned checkpoint is
	// served at once, by GET /checkpoint and the witnessed endpoint.
	for _, w := range wl.w {
		w.Stop()
	}
	opts := server.Options{WitnessPolicy: wl.policy}
	lg := wl.Restart(opts)
	if err := lg.Server.WitnessRestoreError(); err != nil {
		t.Fatalf("the kept checkpoint was refused: %v", err)
	}
	for _, path := range []string{"/checkpoint", "/v1/checkpoint/witnessed"} {
		status, _, body := lg.Get(path)
		if status != http.StatusOK || !bytes.Equal(body, witnessed) {
			t.Fatalf("GET %s after the restart: %d\n%s\nwant\n%s", path, status, body, witnessed)
		}
	}

	// Tampered copies are refused, each for its own reason.
	forged := func() []byte {
		// The log key signs a checkpoint of the same size over another root.
		signer, err := merkle.NewSigner(servertest.Origin, wl.logKey)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("%s\n%d\n%s\n", servertest.Origin, size, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
		text, err := note.Sign(&note.Note{Text: body}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	lines := strings.SplitAfter(string(witnessed), "\n") // the last is ""
	// The body, the blank line and the log's own signature line (the
	// first; the witnesses' follow).
	sep := bytes.Index(witnessed, []byte("\n\n")) + 2
	uncosigned := witnessed[:sep+bytes.IndexByte(witnessed[sep:], '\n')+1]
	flip := func(line string) string { // change one signature byte, keep base64 valid
		i := len(line) - 6
		c := byte('A')
		if line[i] == 'A' {
			c = 'B'
		}
		return line[:i] + string(c) + line[i+1:]
	}
	for _, tc := range []struct {
		name, want string
		text       []byte
	}{
		{"a cosignature changed", "does not verify over the checkpoint",
			[]byte(strings.Join(lines[:len(lines)-2], "") + flip(lines[len(lines)-2]))},
		{"the body changed", "not a checkpoint signed by this log's key",
			bytes.Replace(witnessed, []byte(fmt.Sprintf("\n%d\n", size)), []byte(fmt.Sprintf("\n%d\n", size-1)), 1)},
		{"another tree signed by the log key", "not this log's history", forged()},
		{"cosignatures removed", "do not meet the witness quorum", uncosigned},
	} {
		lg.Close()
		writeStored(t, loc, tc.text)
		lg = lg.Restart(opts)
		err := lg.Server.WitnessRestoreError()
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "is refused") {
			t.Errorf("%s: restore error %v, want one saying %q", tc.name, err, tc.want)
		}
		if status, _, body := lg.Get("/v1/checkpoint/witnessed"); status != http.StatusNotFound {
			t.Errorf("%s: GET /v1/checkpoint/witnessed = %d\n%s", tc.name, status, body)
		}
		if _, _, body := lg.Get("/checkpoint"); wl.policy.Evaluate(body).Satisfied {
			t.Errorf("%s: GET /checkpoint serves a cosigned checkpoint\n%s", tc.name, body)
		}
	}
}
