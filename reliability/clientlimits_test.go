package reliability

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
)

// slowBodiesFrom keeps n append bodies dribbling from the loopback address of
// host (one client): each sends its headers and one byte of a 120,000
// byte body, then a byte a second; a body the server refuses or cuts is
// started again redial later (never when redial is 0). It returns how
// many the server ended.
func slowBodiesFrom(ctx context.Context, host, n int, addr string, redial time.Duration) int64 {
	var cut atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := dialFrom(host, addr)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				io.WriteString(c, "POST /v1/entries HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 120000\r\n\r\n{")
				ended := make(chan struct{})
				go func() { io.Copy(io.Discard, c); close(ended) }()
				tick := time.NewTicker(time.Second)
			dribble:
				for {
					select {
					case <-ended:
						cut.Add(1)
						break dribble
					case <-tick.C:
						c.Write([]byte("a"))
					case <-ctx.Done():
						break dribble
					}
				}
				tick.Stop()
				c.Close()
				if redial <= 0 {
					<-ctx.Done()
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(redial):
				}
			}
		}()
	}
	wg.Wait()
	return cut.Load()
}

// TestClientAttacks measures honest appends, as a share of a baseline
// measured just before each attack, during and after attacks from clients the
// limits count as one, each from another process (attackFrom): 4,200
// slow append bodies from one address (more than the 4,096 body-reading
// slots everyone shares), held, then each reopened 2 s after the server
// ended it; every event-stream slot taken (64 streams from the runtime's
// own address on its workflow, and the rest from 18 other loopback
// addresses), never read, while a runtime executes a step, which must
// still connect to its stream; those never-read streams with a flood of
// oversized bodies from 8 clients; then every attack at once. The
// figures go to docs/SECURITY.md.
func TestClientAttacks(t *testing.T) {
	needAttackRoom(t)
	e := newAbuseEnv(t)
	e.measureHonest(time.Second) // warm up connections and caches
	a := e.honest[0]
	var executed error
	ran := false
	for _, at := range []struct {
		name   string
		kinds  []string
		during func(ctx context.Context)
	}{
		{"slow bodies, one client (4,200 at once)", []string{attackSlowHeld}, nil},
		// The same client reopening each refused body 2 s later, which is
		// also a flood of new connections (it fills the kernel's accept
		// queue, whatever the server does: that is for a firewall or
		// proxy in front of it).
		{"slow bodies, one client, reopened every 2s", []string{attackSlowReopened}, nil},
		{"streams from the runtime's address and 18 others, every slot they may take, never read; a step", []string{attackStreamsOwn}, func(ctx context.Context) {
			a.rt.WatchTimeout = 10 * time.Second
			_, executed = a.rt.Execute(ctx, client.Step{StepID: "crowded", Action: "act", Target: "t/x", Auth: a.grant},
				func(context.Context) (client.Outcome, error) { ran = true; return client.Outcome{}, nil })
		}},
		{"never-read streams from 18 clients and oversized bodies from 8", []string{attackStreams, attackOversized}, nil},
		{"every attack at once (4,200 slow bodies from one client reopened every 2s, every stream slot 18 clients may take, oversized bodies from 8 clients, 1,000 unknown-workflow streams)",
			[]string{attackSlowReopened, attackStreams, attackOversized, attackUnknown}, nil},
	} {
		// A baseline just before each attack: the load of the machine
		// the tests share changes within a minute.
		baseline := e.measureHonest(attackWindow)
		share := func(r honestRun) float64 { return 100 * r.rate() / baseline.rate() }
		during, rep := e.attackFrom(t, at.name, baseline, at.during, at.kinds...)
		after := e.measureHonest(attackWindow)
		fig := fmt.Sprintf("%s: honest appends %.0f%% of the baseline just before (%.0f/s) during, %.0f%% after (%s)", at.name, share(during), baseline.rate(), share(after), strings.ReplaceAll(rep, "\n", "; "))
		t.Log(fig)
		e.figures = append(e.figures, fig)
		// (Rates are reported, not asserted: attack checks that every
		// honest append was accepted.)
		if after.n == 0 || len(after.errs) > 0 {
			t.Errorf("after %s: %d appends, errors %v", at.name, after.n, firstErr(after.errs))
		}
		if at.during != nil && (executed != nil || !ran) {
			t.Errorf("a runtime's step with every stream slot taken: ran %v, %v", ran, executed)
		}
	}
	t.Log("summary:\n" + strings.Join(e.figures, "\n"))
}

// slowBodiesAddrEnv names, for the test binary run as an attacker
// (TestSlowBodiesAttacker), the server it attacks.
const slowBodiesAddrEnv = "RELIABILITY_SLOW_BODIES_ADDR"

// TestSlowBodiesHonestShare: one client (127.0.0.9) keeps 4,200 slow
// bodies open, each started again 2 s after the server ended it, from
// another process (this test binary, TestSlowBodiesAttacker), as an
// attacker on another machine would: in this one its 8,400 goroutines
// would queue the honest agents' own. In each round the server must end
// at most maxEnded of the bodies within the measurement (past the
// client's budget they are held unread; before, the server read and
// refused 4,136 at once, then again 2 s after each answer), and honest
// appends must reach minSlowBodiesShare of the baseline measured just
// before in one of up to three rounds (rounds, because the 2-core machine
// the tests share can be taken from every process at once for seconds).
// Before the listener held a budget-full client's new connections, honest
// appends ran at 7–30% of the baseline in a first round.
func TestSlowBodiesHonestShare(t *testing.T) {
	needAttackRoom(t)
	const (
		minSlowBodiesShare = 30   // percent of the baseline, in one round
		maxEnded           = 1000 // bodies the server ended in a round
	)
	e := newAbuseEnv(t)
	e.measureHonest(time.Second) // warm up connections and caches
	var shares []string
	best := 0.0
	for round := 1; round <= 3; round++ {
		baseline := e.measureHonest(attackWindow)
		if baseline.n == 0 || len(baseline.errs) > 0 {
			t.Fatalf("baseline: %d appends, errors %v", baseline.n, firstErr(baseline.errs))
		}
		var cmdErr error
		var attackerOut []byte
		during := e.attack(t, fmt.Sprintf("slow bodies from another process, round %d", round), baseline, nil, func(ctx context.Context) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSlowBodiesAttacker$")
			cmd.Env = append(os.Environ(), slowBodiesAddrEnv+"="+e.sp.addr)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if cmdErr = cmd.Start(); cmdErr != nil {
				return
			}
			<-ctx.Done()
			cmd.Process.Signal(os.Interrupt)
			if err := cmd.Wait(); err != nil {
				cmdErr = fmt.Errorf("%v\n%s", err, out.Bytes())
			}
			attackerOut = out.Bytes()
		})
		if cmdErr != nil {
			t.Fatalf("the attacking process: %v", cmdErr)
		}
		var ended int
		i := bytes.LastIndex(attackerOut, []byte("ended "))
		if i < 0 {
			t.Fatalf("the attacking process said %q", attackerOut)
		}
		if _, err := fmt.Sscan(string(attackerOut[i+len("ended "):]), &ended); err != nil {
			t.Fatalf("the attacking process said %q: %v", attackerOut, err)
		}
		// What the server must not do: read and answer the client's bodies
		// past its budget, each as it comes (4,136 at once, then again 2 s
		// after each answer).
		if ended > maxEnded {
			t.Errorf("round %d: the server ended %d of the 4,200 bodies within %v (want at most %d: past the client's %d, they are held unread)",
				round, ended, settle+attackWindow, maxEnded, 64)
		}
		share := 100 * during.rate() / baseline.rate()
		shares = append(shares, fmt.Sprintf("%.0f%% (%d bodies ended by the server)", share, ended))
		best = max(best, share)
		if share >= minSlowBodiesShare {
			break
		}
		// The connections the server still holds of the attacker that
		// left are closed after the header timeout.
		time.Sleep(serverReadHeaderTimeout)
	}
	after := e.measureHonest(attackWindow)
	t.Logf("4,200 slow bodies from one client in another process: honest appends at %s of the baseline of each round during; %.1f/s after",
		strings.Join(shares, ", "), after.rate())
	if best < minSlowBodiesShare {
		t.Errorf("honest appends during the slow bodies: %s of the baseline in %d rounds (want at least %d%% in one)", strings.Join(shares, ", "), len(shares), minSlowBodiesShare)
	}
	if after.n == 0 || len(after.errs) > 0 {
		t.Errorf("after the slow bodies: %d appends, errors %v", after.n, firstErr(after.errs))
	}
}

// TestSlowBodiesAttacker is the attacking process of
// TestSlowBodiesHonestShare: 4,200 slow bodies from 127.0.0.9, each
// started again 2 s after the server ended it, until interrupted. It does
// nothing when run on its own.
func TestSlowBodiesAttacker(t *testing.T) {
	addr := os.Getenv(slowBodiesAddrEnv)
	if addr == "" {
		t.Skip("the attacking process of TestSlowBodiesHonestShare")
	}
	if _, err := raiseNoFile(8000); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("ended %d\n", slowBodiesFrom(ctx, 9, 4200, addr, 2*time.Second))
}
