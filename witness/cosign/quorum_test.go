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
	// One request a second per witness, as `custody serve` sends by
	// default (--witness-interval): each witness's turn comes at its own
	// time.
	// The witnesses come up at different times, so their turns are apart,
	// as with witnesses that answer at different speeds.
	ws[1].Stop()
	ws[2].Stop()
	c := startEvery(t, policy, l, time.Second)

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
		period := 8 * time.Second
		var lags []uint64
		seen := map[uint64]bool{}
		from, st0 := l.Head().Size, c.Stats()
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
		}
		slices.Sort(lags)
		st := c.Stats()
		quorum := time.Duration(0)
		if n := st.Witnessed - st0.Witnessed; n > 0 {
			quorum = time.Duration((st.QuorumSeconds - st0.QuorumSeconds) / float64(n) * float64(time.Second))
		}
		line := fmt.Sprintf("witnesses %d of 3 up, quorum 2: %d witnessed checkpoints in %s (log growing %d entries/s); lag behind the log p50 %d, max %d entries; publish to quorum %s on average\n",
			up, len(seen), period, int(float64(l.Head().Size-from)/period.Seconds()), lags[len(lags)/2], lags[len(lags)-1], quorum.Round(time.Millisecond))
		t.Log(line)
		if f := os.Getenv("CUSTODY_WITNESS_REPORT"); f != "" {
			if fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
				fh.WriteString(line)
				fh.Close()
			}
		}
		if len(seen) < 4 {
			t.Errorf("with %d of 3 witnesses up, the witnessed checkpoint moved %d times in %s under continuous appends\n%s", up, len(seen), period, c.logs)
		}
	}
	time.Sleep(300 * time.Millisecond)
	ws[1].Start()
	time.Sleep(1300 * time.Millisecond)
	ws[2].Start()
	time.Sleep(3 * time.Second)
	measure(3)
	ws[2].Stop()
	time.Sleep(2 * time.Second)
	measure(2)
	cancel()
	<-grown
}
