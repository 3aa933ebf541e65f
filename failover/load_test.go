package failover

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage/storagetest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// ack is one acknowledged append, as its client saw it.
type ack struct {
	id    string
	index uint64
	cp    merkle.Checkpoint
	at    time.Time
}

// load is clients appending pending receipts through every server URL,
// each sending the same bytes again until they are acknowledged.
type load struct {
	t       *testing.T
	cs      *cast
	cl      *client.Client
	stop    atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	acks    []ack
	errs    atomic.Int64 // answers that were not acknowledgements (503s, transport failures)
	failed  atomic.Int64 // decisions that were not acceptances: must stay 0
	lastErr atomic.Value
}

// startLoad runs the first n agents of the cast.
func startLoad(t *testing.T, cs *cast, cl *client.Client, n int) *load {
	ld := &load{t: t, cs: cs, cl: cl}
	for i := range n {
		ld.wg.Add(1)
		go ld.run(i)
	}
	return ld
}

func (ld *load) run(i int) {
	defer ld.wg.Done()
	for n := 0; !ld.stop.Load(); n++ {
		id, env := ld.cs.pending(ld.t, i, n)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			r, err := ld.cl.Append(ctx, env)
			cancel()
			if err == nil {
				if r.Statement == nil && !r.Accepted() {
					ld.failed.Add(1)
				}
				ld.mu.Lock()
				ld.acks = append(ld.acks, ack{id: id, index: r.Index, cp: r.Checkpoint, at: time.Now()})
				ld.mu.Unlock()
				break
			}
			var denied *client.DeniedError
			var refused *client.RefusedError
			if errors.As(err, &denied) || errors.As(err, &refused) || errors.Is(err, client.ErrUnverified) {
				ld.failed.Add(1)
				ld.t.Errorf("agent %d, receipt %s: %v", i, id, err)
				return
			}
			// Not acknowledged: send the same bytes again (the ledger
			// answers a repeat with its first decision). The receipt's seq
			// is taken, so this agent cannot move on without it.
			ld.errs.Add(1)
			ld.lastErr.Store(err.Error())
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (ld *load) finish() []ack {
	ld.stop.Store(true)
	ld.wg.Wait()
	return ld.acks
}

// TestFailoverUnderLoad: three servers on one log, many clients
// appending through all three URLs, and the leader SIGKILLed again and
// again (CUSTODY_FAILOVER_KILLS, default 3), each time restarted once
// another has taken over. After each kill, a client that tries the
// killed leader first sends a new append, which must be accepted. No
// acknowledged entry is lost or duplicated, every checkpoint a client saw
// is consistent with the final tree, the stored state is the replay's,
// and custody audit passes. The figures (CUSTODY_FAULT_REPORT, and the
// test's log) are the time from each kill to another server leading and
// to the acceptance of that append sent after it (p50, max).
func TestFailoverUnderLoad(t *testing.T) {
	store := storagetest.PostgresURL(t)
	kills := envInt("CUSTODY_FAILOVER_KILLS", 3)
	nClients := envInt("CUSTODY_FAILOVER_CLIENTS", 64)
	ttl := time.Duration(envInt("CUSTODY_FAILOVER_TTL_MS", 1000)) * time.Millisecond
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	servers := []*server{newServer(t, store, ttl), newServer(t, store, ttl), newServer(t, store, ttl)}
	urls := servers[0].URL + "," + servers[1].URL + "," + servers[2].URL
	cl, err := client.New(urls, vkey, &client.Options{FailoverWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The last agent sends the appends after each kill; the others are
	// the load.
	cs := newCast(t, cl, admin, nClients+1)
	ld := startLoad(t, cs, cl, nClients)
	var probeAcks []ack
	var gaps, leads []time.Duration
	for k := range kills {
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		leader := waitLeader(t, 30*time.Second, servers...)
		var others []*server
		order := []string{leader.URL}
		for _, s := range servers {
			if s != leader {
				others = append(others, s)
				order = append(order, s.URL)
			}
		}
		// A client that tries the killed leader first.
		pc, err := client.New(strings.Join(order, ","), vkey, &client.Options{FailoverWait: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		id, env := cs.pending(t, nClients, k)
		killedAt := time.Now()
		leader.kill()
		probe := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, err := pc.Append(ctx, env)
			if err == nil {
				if !r.Accepted() {
					err = fmt.Errorf("not accepted: %+v", r)
				} else {
					probeAcks = append(probeAcks, ack{id: id, index: r.Index, cp: r.Checkpoint, at: time.Now()})
				}
			}
			probe <- err
		}()
		// Wait for another to lead, then bring the killed one back, so
		// that three servers run for the next kill.
		waitLeader(t, 30*time.Second, others...)
		leads = append(leads, time.Since(killedAt))
		if err := <-probe; err != nil {
			t.Fatalf("kill %d: the append sent after it: %v", k+1, err)
		}
		gaps = append(gaps, probeAcks[len(probeAcks)-1].at.Sub(killedAt))
		leader.start()
		t.Logf("kill %d of %d: another server led %s after it, the append sent after it was accepted %s after it",
			k+1, kills, leads[k].Round(time.Millisecond), gaps[k].Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	acks := ld.finish()
	t.Logf("%d acknowledged appends, %d answers that were not acknowledgements (retried)", len(acks), ld.errs.Load())
	if ld.failed.Load() != 0 {
		t.Fatalf("%d appends were denied or refused", ld.failed.Load())
	}
	all := append(slices.Clone(acks), probeAcks...)
	checkLog(t, store, all)
	faultReport(t, "killed", ttl, len(all), leads, gaps)
}

// faultReport logs the figures of one fault kind's rounds, and appends
// them to CUSTODY_FAULT_REPORT: rounds, acknowledged appends, lost and
// split views (0: the test fails otherwise), and the time from the fault
// to another server leading and to the acceptance of an append sent
// after the fault (p50, max).
func faultReport(t *testing.T, kind string, ttl time.Duration, acks int, leads, gaps []time.Duration) {
	t.Helper()
	if len(gaps) == 0 || len(leads) == 0 {
		return
	}
	slices.Sort(gaps)
	slices.Sort(leads)
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	line := fmt.Sprintf("fault %s rounds %d lease %s acks %d lost 0 split 0 new-leader p50 %s max %s first-append-after-fault p50 %s max %s\n",
		kind, len(gaps), ttl, acks, ms(leads[len(leads)/2]), ms(leads[len(leads)-1]), ms(gaps[len(gaps)/2]), ms(gaps[len(gaps)-1]))
	t.Log(line)
	if f := os.Getenv("CUSTODY_FAULT_REPORT"); f != "" {
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(line)
		fh.Close()
	}
}

// checkLog requires every acknowledged append to be in the log at its
// index, no receipt to be in it twice, every checkpoint a client saw to be
// consistent with the final tree, the stored state to be the replay's,
// and custody audit to pass.
func checkLog(t *testing.T, store string, acks []ack) {
	t.Helper()
	l, err := ledger.Open(store, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	head := l.Head()
	byID := map[string]uint64{}
	for i := range head.Size {
		e, err := l.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := e.Statement.(*statement.ReceiptDoc); ok {
			if j, dup := byID[r.ReceiptID]; dup {
				t.Fatalf("receipt %s is in the log twice: entries %d and %d", r.ReceiptID, j, i)
			}
			byID[r.ReceiptID] = i
		}
	}
	for _, a := range acks {
		if j, ok := byID[a.id]; !ok || j != a.index {
			t.Fatalf("receipt %s was acknowledged at %d; the log has it at %d (%v)", a.id, a.index, j, ok)
		}
		if a.cp.Size > head.Size {
			t.Fatalf("a client saw a checkpoint of size %d; the final tree has %d", a.cp.Size, head.Size)
		}
		root, err := l.RootAt(a.cp.Size)
		if err != nil || root != a.cp.Root {
			t.Fatalf("a client saw a checkpoint of size %d whose root the final tree does not have at that size", a.cp.Size)
		}
	}
	storagetest.ReplayEqualsState(t, l)
	if out, code := custody(t, "audit", "--store", store); code != 0 {
		t.Fatalf("custody audit: exit %d\n%s", code, out)
	}
}
