package failover

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
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
	t      *testing.T
	cs     *cast
	cl     *client.Client
	stop   atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	acks   []ack
	errs   atomic.Int64 // answers that were not acknowledgements (503s, transport failures)
	failed atomic.Int64 // decisions that were not acceptances: must stay 0
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
// another has taken over. No acknowledged entry is lost or duplicated,
// every checkpoint a client saw is consistent with the final tree, the
// stored state is the replay's, and custody audit passes. The time from
// each kill to the first acknowledgement after it is logged (p50, p99).
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
	cs := newCast(t, cl, admin, nClients)
	ld := startLoad(t, cs, cl, nClients)
	var killedAt []time.Time
	for k := range kills {
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		leader := waitLeader(t, 30*time.Second, servers...)
		killedAt = append(killedAt, time.Now())
		leader.kill()
		// Wait for another to lead, then bring the killed one back, so
		// that three servers run for the next kill.
		waitLeader(t, 30*time.Second, servers...)
		leader.start()
		t.Logf("kill %d of %d done", k+1, kills)
	}
	time.Sleep(time.Second)
	acks := ld.finish()
	t.Logf("%d acknowledged appends, %d answers that were not acknowledgements (retried)", len(acks), ld.errs.Load())
	if ld.failed.Load() != 0 {
		t.Fatalf("%d appends were denied or refused", ld.failed.Load())
	}

	// Kill to first acknowledgement after it.
	slices.SortFunc(acks, func(a, b ack) int { return a.at.Compare(b.at) })
	var gaps []time.Duration
	for _, k := range killedAt {
		i, _ := slices.BinarySearchFunc(acks, k, func(a ack, k time.Time) int { return a.at.Compare(k) })
		if i == len(acks) {
			t.Fatalf("no append was acknowledged after the kill at %s", k.Format(time.StampMilli))
		}
		gaps = append(gaps, acks[i].at.Sub(k))
	}
	slices.Sort(gaps)
	p := func(q float64) time.Duration { return gaps[min(len(gaps)-1, int(q*float64(len(gaps))))] }
	t.Logf("kill -> first acknowledged append, over %d kills (lease %s): p50 %s, p99 %s, max %s",
		len(gaps), ttl, p(0.50).Round(time.Millisecond), p(0.99).Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	if f := os.Getenv("CUSTODY_FAILOVER_REPORT"); f != "" {
		os.WriteFile(f, []byte(fmt.Sprintf("kills %d clients %d lease %s acks %d retried %d p50 %s p99 %s max %s\n",
			len(gaps), nClients, ttl, len(acks), ld.errs.Load(), p(0.50), p(0.99), gaps[len(gaps)-1])), 0o644)
	}

	checkLog(t, store, acks)
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
