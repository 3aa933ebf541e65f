package cosign_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/internal/witnesstest"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/witness"
	"github.com/custodylog/custody/witness/cosign"
)

const origin = "test.example/witnessed"

// testLog is a real ledger that appends raw leaves (Options.LogOnly), so
// the tests can grow it fast and fork it.
type testLog struct {
	*ledger.Ledger
	n int
}

func newLog(t *testing.T, logKey ed25519.PrivateKey) *testLog {
	t.Helper()
	dir := t.TempDir()
	l, err := ledger.Init(dir, origin, ledger.InitOptions{LogKey: logKey})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err = ledger.Open(dir, ledger.Options{LogOnly: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &testLog{Ledger: l}
}

// grow appends n leaves tagged with tag and returns the new head.
func (l *testLog) grow(t *testing.T, tag string, n int) cosign.Checkpoint {
	t.Helper()
	leaves := make([][]byte, n)
	for i := range leaves {
		l.n++
		leaves[i] = []byte(fmt.Sprintf("%s leaf %d", tag, l.n))
	}
	if _, _, err := l.AppendLeaves(context.Background(), leaves); err != nil {
		t.Fatal(err)
	}
	return l.head()
}

func (l *testLog) head() cosign.Checkpoint {
	h := l.Head()
	return cosign.Checkpoint{Size: h.Size, Root: h.Root, Text: h.Checkpoint}
}

// logBuffer collects the cosigner's logs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (lb *logBuffer) Write(p []byte) (int, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.b.Write(p)
}
func (lb *logBuffer) String() string { lb.mu.Lock(); defer lb.mu.Unlock(); return lb.b.String() }

type running struct {
	*cosign.Cosigner
	reg  *prometheus.Registry
	logs *logBuffer
	stop func()
}

func start(t *testing.T, policy string, l cosign.Log) *running {
	t.Helper()
	return startEvery(t, policy, l, 0)
}

// startEvery is start with a least interval between two requests to a
// witness (cosign.Options.Interval).
func startEvery(t *testing.T, policy string, l cosign.Log, interval time.Duration) *running {
	t.Helper()
	p, err := witness.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lb := &logBuffer{}
	c, err := cosign.New(p, l, cosign.Options{Timeout: 5 * time.Second, Interval: interval, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return &running{Cosigner: c, reg: reg, logs: lb, stop: stop}
}

func wait(t *testing.T, c *running, size uint64) cosign.Witnessed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Wait(ctx, size)
	if err != nil {
		t.Fatalf("waiting for size %d: %v\nlogs:\n%s", size, err, c.logs)
	}
	return w
}

// outcomes reads custody_witness_requests_total{witness, outcome}.
func outcomes(r *running, witness, outcome string) float64 {
	mfs, _ := r.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "custody_witness_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var w, o string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "witness":
					w = lp.GetValue()
				case "outcome":
					o = lp.GetValue()
				}
			}
			if w == witness && o == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestRealWitnessesCosign: omniwitness and litewitness cosign the log's
// checkpoints as it grows; the cosignatures verify under the policy, and
// the log's own signature still verifies on the cosigned text.
func TestRealWitnessesCosign(t *testing.T) {
	_, logKey, _ := sign.GenerateKey()
	l := newLog(t, logKey)
	lg := witnesstest.Log{Origin: origin, VKey: l.VerifierKey()}
	omni := witnesstest.StartOmniwitness(t, "omni.test.example", lg)
	lite := witnesstest.StartLitewitness(t, "lite.test.example", lg)
	policy := omni.PolicyLine("omni") + "\n" + lite.PolicyLine("lite") + "\ngroup both all omni lite\nquorum both\n"
	c := start(t, policy, l)

	for round := 0; round < 4; round++ {
		cp := l.grow(t, "a", 1+round*3)
		c.Publish(cp)
		w := wait(t, c, cp.Size)
		if w.Size != cp.Size {
			continue // a newer one: fine, but check this one below
		}
		if !w.Evaluation.Satisfied || len(w.Evaluation.Signed) != 2 {
			t.Fatalf("round %d: %s", round, w.Evaluation.Describe())
		}
		if !bytes.HasPrefix(w.Cosigned, cp.Text) {
			t.Fatalf("the cosigned checkpoint does not start with the log's own text:\n%s", w.Cosigned)
		}
		if _, err := merkle.OpenCheckpoint(w.Cosigned, origin, l.VerifierKey()); err != nil {
			t.Fatalf("the log's signature no longer verifies on the cosigned checkpoint: %v", err)
		}
		if _, got := c.Latest(); !bytes.Equal(got, w.Cosigned) {
			t.Errorf("Latest is not the cosigned head:\n%s", got)
		}
	}
	if n := outcomes(c, "lite", "cosigned"); n < 3 {
		t.Errorf("litewitness cosigned %v times", n)
	}

	// A second cosigner (a restart) starts from old size 0: each witness
	// answers 409 with the size it holds, and the cosigner resyncs.
	c.stop()
	c2 := start(t, policy, l)
	cp := l.grow(t, "a", 2)
	c2.Publish(cp)
	wait(t, c2, cp.Size)
	// (The counters move just after the cosignature is merged.)
	deadline := time.Now().Add(5 * time.Second)
	for _, name := range []string{"omni", "lite"} {
		for outcomes(c2, name, "cosigned") == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if outcomes(c2, name, "conflict") != 1 || outcomes(c2, name, "cosigned") != 1 {
			t.Errorf("%s after a restart: conflict %v, cosigned %v (want 1 and 1)\n%s", name,
				outcomes(c2, name, "conflict"), outcomes(c2, name, "cosigned"), c2.logs)
		}
	}
}

// TestForkRefused: a second history signed with the same log key (same
// size, another root) is refused by real witnesses, and the cosigner
// reports it as a fork.
func TestForkRefused(t *testing.T) {
	_, logKey, _ := sign.GenerateKey()
	a := newLog(t, logKey)
	b := newLog(t, logKey)
	lg := witnesstest.Log{Origin: origin, VKey: a.VerifierKey()}
	if b.VerifierKey() != a.VerifierKey() {
		t.Fatal("the two logs do not share their key")
	}
	omni := witnesstest.StartOmniwitness(t, "omni.test.example", lg)
	lite := witnesstest.StartLitewitness(t, "lite.test.example", lg)
	policy := omni.PolicyLine("omni") + "\n" + lite.PolicyLine("lite") + "\ngroup g any omni lite\nquorum g\n"

	ca := start(t, policy, a)
	cpA := a.grow(t, "a", 5)
	ca.Publish(cpA)
	wait(t, ca, cpA.Size)
	// The quorum is "any": wait until both witnesses hold cpA, or the one
	// that had not answered yet would take cpB as its first checkpoint.
	deadline := time.Now().Add(20 * time.Second)
	for outcomes(ca, "omni", "cosigned") == 0 || outcomes(ca, "lite", "cosigned") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("both witnesses did not cosign size %d:\n%s", cpA.Size, ca.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ca.stop()

	// The same size, another root.
	cpB := b.grow(t, "b", 5)
	if cpB.Size != cpA.Size || cpB.Root == cpA.Root {
		t.Fatalf("sizes %d %d, roots equal %v", cpA.Size, cpB.Size, cpB.Root == cpA.Root)
	}
	// Each witness, asked directly, refuses the forked checkpoint. The
	// spec asks for a 409 with the size it holds; omniwitness and
	// litewitness both answer 422, as for a consistency proof that does
	// not verify (an empty proof between equal sizes proves equal roots).
	// The cosigner takes either as a fork.
	for _, w := range []*witnesstest.Witness{omni, lite} {
		res, err := cosign.AddCheckpoint(context.Background(), http.DefaultClient, w.URL, "custody-test", cpA.Size, nil, cpB.Text, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		size, _ := cosign.ParseSize(res.Body)
		if !(res.Status == http.StatusConflict && size == cpA.Size) && res.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s answered the forked checkpoint %d %q, want 409 and its size %d, or 422", w.Kind, res.Status, res.Body, cpA.Size)
		}
	}
	cb := start(t, policy, b)
	cb.Publish(cpB)
	deadline = time.Now().Add(20 * time.Second)
	for outcomes(cb, "omni", "fork") == 0 || outcomes(cb, "lite", "fork") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no fork reported:\n%s", cb.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(cb.logs.String(), "split view or a forked log") {
		t.Errorf("the logs do not say what happened:\n%s", cb.logs)
	}
	if _, ok := cb.Best(); ok {
		t.Error("a forked checkpoint met the quorum")
	}
	// Grown past the witnesses' size, the fork's consistency proof from
	// their size does not verify against their root: 422, a fork again.
	before := outcomes(cb, "omni", "fork") + outcomes(cb, "lite", "fork")
	cb.Publish(b.grow(t, "b", 3))
	deadline = time.Now().Add(20 * time.Second)
	for outcomes(cb, "omni", "fork")+outcomes(cb, "lite", "fork") <= before {
		if time.Now().After(deadline) {
			t.Fatalf("no fork reported for the grown fork:\n%s", cb.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := cb.Best(); ok {
		t.Error("a forked checkpoint met the quorum")
	}
}

// TestWitnessErrors: a witness that does not know the log (404), one
// that knows its origin with another key (403), and one that never
// answers (timeout) are each logged and counted under their outcome, and
// the quorum is met by the witness that works.
func TestWitnessErrors(t *testing.T) {
	_, logKey, _ := sign.GenerateKey()
	l := newLog(t, logKey)
	_, otherKey, _ := sign.GenerateKey()
	other := newLog(t, otherKey) // the same origin, another key
	good := witnesstest.StartOmniwitness(t, "good.test.example", witnesstest.Log{Origin: origin, VKey: l.VerifierKey()})
	stranger := witnesstest.StartLitewitness(t, "stranger.test.example")
	wrongKey := witnesstest.StartLitewitness(t, "wrongkey.test.example", witnesstest.Log{Origin: origin, VKey: other.VerifierKey()})
	// omniwitness (with its SQLite store) answers 500, not the spec's 404
	// and 403, for an origin it does not know and for a checkpoint signed
	// by another key: custody logs the status and counts it as an error.
	omniStranger := witnesstest.StartOmniwitness(t, "omnistranger.test.example")
	// A listener that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	silentKey, _ := witness.NewSigner("silent.test.example", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, 32)))
	policy := good.PolicyLine("good") + "\n" + stranger.PolicyLine("stranger") + "\n" + wrongKey.PolicyLine("wrongkey") + "\n" +
		"witness silent " + silentKey.VerifierKey() + " http://" + ln.Addr().String() + "\n" +
		omniStranger.PolicyLine("omnistranger") + "\n" +
		"group g any good stranger wrongkey silent omnistranger\nquorum g\n"
	p, err := witness.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lb := &logBuffer{}
	c, err := cosign.New(p, l, cosign.Options{Timeout: 300 * time.Millisecond, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r := &running{Cosigner: c, reg: reg, logs: lb}
	cp := l.grow(t, "a", 3)
	c.Publish(cp)
	wait(t, r, cp.Size)
	deadline := time.Now().Add(20 * time.Second)
	for _, want := range [][2]string{{"stranger", "unknown_log"}, {"wrongkey", "forbidden"}, {"silent", "timeout"}, {"omnistranger", "error"}, {"good", "cosigned"}} {
		for outcomes(r, want[0], want[1]) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no %s outcome for witness %s:\n%s", want[1], want[0], lb)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, want := range []string{"does not know this log (404)", "does not accept this log's signature (403)", "no answer",
		"unexpected answer\" witness=omnistranger status=500"} {
		if !strings.Contains(lb.String(), want) {
			t.Errorf("the logs do not say %q:\n%s", want, lb)
		}
	}
	if w, _ := c.Best(); len(w.Evaluation.Signed) != 1 || w.Evaluation.Signed[0].Witness != "good" {
		t.Errorf("the quorum: %+v", w.Evaluation)
	}
}
