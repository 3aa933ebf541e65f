package bench

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/internal/witnessproc"
)

// TestWitnessLatencyTiny runs the witness comparison at a tiny size
// against real witnesses, so it keeps working. It checks that each figure
// was taken, never how fast.
func TestWitnessLatencyTiny(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	bin := witnessproc.DefaultBin(filepath.Join(filepath.Dir(file), ".."))
	if err := witnessproc.Missing(bin); err != nil {
		testenv.Need(t, "%v", err)
	}
	r, err := WitnessLatency(context.Background(), t.TempDir(), bin, 200, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]AppendResult{"unwitnessed": r.Unwitnessed, "witnessed": r.Witnessed} {
		if a.Accepted == 0 || a.PendingP50Ms <= 0 || a.Accepted+a.Denied != a.Submissions {
			t.Errorf("%s: %+v", name, a)
		}
	}
	if r.Cosigned == 0 || r.Cosigned > r.Commits || r.Ratio <= 0 || r.WitnessMs <= 0 || len(r.PerWitnessMs) != 3 {
		t.Errorf("witness figures: %+v", r)
	}
}
