package demo

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/ledger"
	_ "github.com/custodylog/custody/storage/badgerstore"
	"github.com/custodylog/custody/verify"
)

// TestRun plays the scenario: every decision is the one the script
// expects, the report is the log's (size, checkpoint, key), the demo's
// keys are in the folder, and the workflow's bundle verifies offline.
func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	rep, err := RunAt(context.Background(), dir, &out, func() time.Time { return time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC) })
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rep.Steps) < 8 {
		t.Fatalf("%d steps", len(rep.Steps))
	}
	denied := 0
	for _, s := range rep.Steps {
		if !s.Expected {
			t.Errorf("step %q: %s %s, expected %s", s.Say, s.Verdict, s.Code, s.Want)
		}
		if s.Verdict == "denied" {
			denied++
		}
		if !strings.Contains(out.String(), s.ID) {
			t.Errorf("the printed lines do not name %s", s.ID)
		}
	}
	if denied < 4 {
		t.Errorf("%d denials, the scenario has four", denied)
	}
	l, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if h := l.Head(); h.Size != rep.Size || string(h.Checkpoint) != rep.Checkpoint || l.VerifierKey() != rep.VerifierKey || l.Origin() != Origin {
		t.Fatalf("report %+v, log size %d origin %s", rep, h.Size, l.Origin())
	}
	b, err := l.Prove(rep.Steps[len(rep.Steps)-1].Index, true)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyBundle(b, rep.VerifierKey); err != nil || !v.Valid {
		t.Fatalf("the workflow's bundle does not verify: %v", err)
	}
	if _, err := RunAt(context.Background(), dir, nil, time.Now); err == nil {
		t.Fatal("a second demo in the same folder")
	}
}
