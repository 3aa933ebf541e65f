package reliability

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// # Attacks from another process
//
// An attacker on another machine spends its own CPU. In the test's own
// process, its thousands of goroutines and dials would share the honest
// agents' scheduler, and the share measured would be the test's, not the
// server's. So these attacks run in another process: this test binary,
// run as TestAttackerProcess, which prepares what it holds (streams),
// says "ready", floods until interrupted, then prints what it saw.

// Environment of the attacking process.
const (
	attackKindsEnv = "RELIABILITY_ATTACK"      // comma-separated kinds (attackerKinds)
	attackAddrEnv  = "RELIABILITY_ATTACK_ADDR" // the server's host:port
	attackWfsEnv   = "RELIABILITY_ATTACK_WFS"  // comma-separated workflows the streams watch
)

// The kinds of attack the attacking process knows.
const (
	// 4,200 slow bodies from 127.0.0.9, held (never reopened).
	attackSlowHeld = "slow-held"
	// The same, each reopened 2 s after the server ended it.
	attackSlowReopened = "slow-reopened"
	// 64 never-read event streams from the honest agents' own address
	// (127.0.0.1) on the first workflow, and 64 from each of 18 others
	// (127.0.0.10 to 127.0.0.27) on the workflows in turn: every slot
	// these clients may take.
	attackStreamsOwn = "streams-own"
	// 64 never-read streams from each of 127.0.0.10 to 127.0.0.27.
	attackStreams = "streams"
	// 200 KiB bodies (over the 128 KiB cap) posted over and over by 8
	// clients.
	attackOversized = "oversized"
	// 1,000 streams on workflows that do not exist.
	attackUnknown = "unknown-streams"
)

// attackProc is one running attacking process.
type attackProc struct {
	cmd   *exec.Cmd
	out   bytes.Buffer // what it printed after "ready"
	lines chan string
	done  chan error
}

// startAttacker starts the attacking process with kinds against e's
// server and waits until it has prepared what it holds.
func (e *abuseEnv) startAttacker(t *testing.T, kinds ...string) *attackProc {
	t.Helper()
	var wfs []string
	for _, a := range e.honest {
		wfs = append(wfs, a.wf)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), attackKindsEnv+"="+strings.Join(kinds, ","), attackAddrEnv+"="+e.sp.addr, attackWfsEnv+"="+strings.Join(wfs, ","))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &attackProc{cmd: cmd, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		ready := false
		for sc.Scan() {
			l := sc.Text()
			if !ready {
				if l == "ready" {
					ready = true
				}
				p.lines <- l
				continue
			}
			if l == "PASS" || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "ok ") {
				continue // the test framework's own lines
			}
			p.out.WriteString(l + "\n")
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the attacking process ended before it was ready: %v", <-p.done)
			}
			if l == "ready" {
				return p
			}
			if strings.HasPrefix(l, "attacker:") {
				t.Log(l)
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatal("the attacking process was not ready within 2 minutes")
		}
	}
}

// stop interrupts the attacking process, waits for it and returns what
// it printed after "ready".
func (p *attackProc) stop(t *testing.T) string {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("the attacking process: %v\n%s", err, p.out.Bytes())
		}
	case <-time.After(90 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("the attacking process did not stop within 90 s of its interrupt")
	}
	return strings.TrimSpace(p.out.String())
}

// attackFrom runs kinds from another process while the honest agents
// append (e.attack), with during (if any) run alongside, and returns
// the honest run and what the attacker reported.
func (e *abuseEnv) attackFrom(t *testing.T, name string, baseline honestRun, during func(ctx context.Context), kinds ...string) (honestRun, string) {
	t.Helper()
	var p *attackProc
	var cpu time.Duration
	run := e.attack(t, name, baseline, func() { p = e.startAttacker(t, kinds...) }, func(ctx context.Context) {
		c0 := procCPU(p.cmd.Process.Pid)
		if during != nil {
			during(ctx)
		}
		<-ctx.Done()
		cpu = procCPU(p.cmd.Process.Pid) - c0
	})
	return run, fmt.Sprintf("attacker CPU %.2fs; ", cpu.Seconds()) + p.stop(t)
}

// TestAttackerProcess is the attacking process of attackFrom. It does
// nothing when run on its own.
func TestAttackerProcess(t *testing.T) {
	kinds, addr := os.Getenv(attackKindsEnv), os.Getenv(attackAddrEnv)
	if kinds == "" || addr == "" {
		t.Skip("the attacking process of attackFrom")
	}
	if _, err := raiseNoFile(16000); err != nil {
		t.Fatal(err)
	}
	wfs := strings.Split(os.Getenv(attackWfsEnv), ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	open := func(host int, wf string, n int) (got int) {
		for range n {
			c, status, err := subscribe(host, addr, wf, 0)
			if err != nil || status != 200 {
				return got
			}
			held = append(held, c)
			got++
		}
		return got
	}
	var floods []func()
	var report []string
	var mu sync.Mutex
	say := func(s string) { mu.Lock(); report = append(report, s); mu.Unlock() }
	for _, k := range strings.Split(kinds, ",") {
		switch k {
		case attackStreamsOwn, attackStreams:
			n := 0
			if k == attackStreamsOwn {
				n += open(1, wfs[0], 64)
			}
			for host := 10; host < 28; host++ {
				n += open(host, wfs[host%len(wfs)], 64)
			}
			fmt.Printf("attacker: holds %d never-read streams\n", n)
			say(fmt.Sprintf("%d never-read streams", n))
		case attackSlowHeld, attackSlowReopened:
			redial := time.Duration(0)
			if k == attackSlowReopened {
				redial = 2 * time.Second
			}
			floods = append(floods, func() {
				say(fmt.Sprintf("%d slow bodies ended by the server", slowBodiesFrom(ctx, 9, 4200, addr, redial)))
			})
		case attackOversized:
			floods = append(floods, func() {
				counts := &statusCounts{m: map[string]int{}}
				big := bytes.Repeat([]byte("x"), 200<<10)
				flood(ctx, 8, "http://"+addr, func(int) []byte { return big }, counts)
				say(fmt.Sprintf("oversized bodies answered %v", counts.m))
			})
		case attackUnknown:
			floods = append(floods, func() {
				say(fmt.Sprintf("%d unknown-workflow streams answered 404", unknownStreams(ctx, addr, eventStreams)))
			})
		default:
			t.Fatalf("unknown attack %q", k)
		}
	}
	fmt.Println("ready")
	var wg sync.WaitGroup
	for _, f := range floods {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	<-ctx.Done()
	wg.Wait()
	sort.Strings(report)
	for _, r := range report {
		fmt.Println(r)
	}
}

// TestStreamsAndOversizedShare: never-read event streams on the honest
// agents' workflows (every slot 18 clients may take: 512, the
// per-workflow cap) together with 200 KiB bodies posted over and over by
// 8 clients, from another process. The server must answer at most
// maxOversized of those bodies in a round (each body refused as too
// large holds its client's body slot for a second before its answer;
// before, they were read and answered as fast as they came: 3,584-7,182
// in the 4 s of a round), and honest appends must reach
// minPairShare of the baseline measured just before in one of up to
// three rounds (before: 18-28% with the attacker in another process, the
// collector marking a third of the time).
func TestStreamsAndOversizedShare(t *testing.T) {
	needAttackRoom(t)
	const (
		minPairShare = 40  // percent of the baseline, in one round
		maxOversized = 400 // oversized bodies answered in a round
	)
	e := newAbuseEnv(t)
	e.measureHonest(time.Second) // warm up connections and caches
	var shares []string
	best := 0.0
	var baseline honestRun
	for round := 1; round <= 3; round++ {
		baseline = e.measureHonest(attackWindow)
		if baseline.n == 0 || len(baseline.errs) > 0 {
			t.Fatalf("baseline: %d appends, errors %v", baseline.n, firstErr(baseline.errs))
		}
		during, rep := e.attackFrom(t, fmt.Sprintf("streams and oversized bodies, round %d", round), baseline, nil, attackStreams, attackOversized)
		answered := 0
		if i := strings.Index(rep, "oversized bodies answered map["); i >= 0 {
			for _, kv := range strings.Fields(strings.TrimSuffix(strings.SplitN(rep[i+len("oversized bodies answered map["):], "]", 2)[0], "]")) {
				var n int
				if _, err := fmt.Sscanf(kv, "413:%d", &n); err == nil {
					answered += n
				}
			}
		} else {
			t.Fatalf("round %d: the attacker said %q", round, rep)
		}
		if answered > maxOversized {
			t.Errorf("round %d: the server answered %d oversized bodies (want at most %d: each holds its client's slot for a second)", round, answered, maxOversized)
		}
		share := 100 * during.rate() / baseline.rate()
		shares = append(shares, fmt.Sprintf("%.0f%% (%d oversized answered)", share, answered))
		best = max(best, share)
		if share >= minPairShare {
			break
		}
		time.Sleep(2 * time.Second)
	}
	after := e.measureHonest(attackWindow)
	if after.n == 0 || len(after.errs) > 0 {
		t.Errorf("after the attack: %d appends, errors %v", after.n, firstErr(after.errs))
	}
	t.Logf("never-read streams and oversized bodies from another process: honest appends at %s of the baseline of each round; %.1f/s after (%.0f%% of the last baseline)", strings.Join(shares, ", "), after.rate(), 100*after.rate()/baseline.rate())
	if best < minPairShare {
		t.Errorf("honest appends during never-read streams and oversized bodies: %s of the baseline in %d rounds (want at least %d%% in one)", strings.Join(shares, ", "), len(shares), minPairShare)
	}
}

// TestSlowBodiesAndUnknownStreamsShare: one client's 4,200 slow bodies,
// each reopened 2 s after the server ended it, together with 1,000
// stream requests on workflows that do not exist, from another process.
// Honest appends must reach minPairShare of the baseline measured just
// before in one of up to three rounds, and 90% of it after the attack in
// one of them.
func TestSlowBodiesAndUnknownStreamsShare(t *testing.T) {
	needAttackRoom(t)
	const minPairShare = 50 // percent of the baseline, in one round
	e := newAbuseEnv(t)
	e.measureHonest(time.Second) // warm up connections and caches
	var shares []string
	best := 0.0
	for round := 1; round <= 3; round++ {
		baseline := e.measureHonest(attackWindow)
		if baseline.n == 0 || len(baseline.errs) > 0 {
			t.Fatalf("baseline: %d appends, errors %v", baseline.n, firstErr(baseline.errs))
		}
		during, rep := e.attackFrom(t, fmt.Sprintf("reopened slow bodies and unknown-workflow streams, round %d", round), baseline, nil, attackSlowReopened, attackUnknown)
		share := 100 * during.rate() / baseline.rate()
		load, _ := os.ReadFile("/proc/loadavg")
		shares = append(shares, fmt.Sprintf("%.0f%% (%s; load %s)", share, strings.ReplaceAll(rep, "\n", "; "), strings.Join(strings.Fields(string(load))[:3], " ")))
		best = max(best, share)
		if share >= minPairShare {
			break
		}
		time.Sleep(serverReadHeaderTimeout)
	}
	t.Logf("reopened slow bodies and unknown-workflow streams from another process: honest appends at %s of the baseline of each round", strings.Join(shares, ", "))
	if best < minPairShare {
		t.Errorf("honest appends during reopened slow bodies and unknown-workflow streams: best %.0f%% of the baseline in %d rounds (want at least %d%% in one): %s", best, len(shares), minPairShare, strings.Join(shares, ", "))
	}
}
