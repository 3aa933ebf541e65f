package failover

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/storage/storagetest"
)

// TestFrozenLeader: three servers, each reaching PostgreSQL through a
// proxy of its own, under continuous appends. In each round the leader
// is caught between its batch and COMMIT (its proxy holds the COMMIT),
// then either paused there (SIGSTOP) or cut off with every socket left
// open (its proxy passes nothing more). The fault lasts eight lease
// times. Within it another server must lead, and an append sent after
// the fault, by a client that tries the faulty leader first, must be
// accepted; before the fix, the frozen transaction's lock on the lease
// row kept every takeover waiting until the fault ended, and the client
// waited on the frozen leader. At the end every acknowledged append is
// in the log once, every checkpoint a client saw is consistent with the
// final tree, and custody audit passes.
//
// CUSTODY_FAULT_ROUNDS sets the rounds per kind (default 2; the long
// drill runs 20 or more), CUSTODY_FAULT_REPORT a file the figures are
// appended to.
func TestFrozenLeader(t *testing.T) {
	for _, kind := range []string{"paused", "partitioned"} {
		t.Run(kind, func(t *testing.T) { frozenLeader(t, kind) })
	}
}

func frozenLeader(t *testing.T, kind string) {
	store := storagetest.PostgresURL(t)
	rounds := envInt("CUSTODY_FAULT_ROUNDS", 2)
	nClients := envInt("CUSTODY_FAILOVER_CLIENTS", 16)
	ttl := time.Duration(envInt("CUSTODY_FAILOVER_TTL_MS", 1000)) * time.Millisecond
	hold := 8 * ttl
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	var servers []*server
	proxies := map[*server]*pgProxy{}
	for range 3 {
		p, url := newPGProxy(t, store)
		s := makeServer(t, url, ttl)
		proxies[s] = p
		servers = append(servers, s)
	}
	for _, s := range servers {
		s.start()
	}
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL)
	}
	cl, err := client.New(strings.Join(urls, ","), vkey, &client.Options{FailoverWait: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The last two agents send the probes; the others are the load.
	cs := newCast(t, cl, admin, nClients+2)
	ld := startLoad(t, cs, cl, nClients)
	var probeAcks []ack
	var gaps, leads []time.Duration
	for r := range rounds {
		time.Sleep(time.Duration(300+r*137%700) * time.Millisecond)
		leader := waitLeader(t, 30*time.Second, servers...)
		px := proxies[leader]
		select {
		case <-px.arm():
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the leader sent no COMMIT in 20 s", r)
		}
		if kind == "paused" {
			leader.signal(syscall.SIGSTOP)
		} else {
			px.freeze()
		}
		faultAt := time.Now()
		// Cut off, the leader still answers what it holds: an append sent
		// to it now waits behind the stuck commit, and must be answered
		// 503 not_leader once it has lost the lease (within about a lease
		// time), not held until the fault ends.
		var held <-chan rawAnswer
		if kind == "partitioned" {
			_, raw := cs.pending(t, nClients+1, r)
			held = postRaw(leader.URL, raw, 2*hold)
		}

		// A client that tries the faulty leader first.
		order := []string{leader.URL}
		for _, s := range servers {
			if s != leader {
				order = append(order, s.URL)
			}
		}
		pc, err := client.New(strings.Join(order, ","), vkey, &client.Options{FailoverWait: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		id, env := cs.pending(t, nClients, r)
		probe := make(chan error, 1)
		var probeAt time.Time
		var mu sync.Mutex
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := pc.Append(ctx, env)
			if err == nil {
				mu.Lock()
				probeAt = time.Now()
				probeAcks = append(probeAcks, ack{id: id, index: res.Index, cp: res.Checkpoint, at: probeAt})
				mu.Unlock()
			}
			probe <- err
		}()
		var others []*server
		for _, s := range servers {
			if s != leader {
				others = append(others, s)
			}
		}
		var leadAt time.Time
		for time.Since(faultAt) < hold && leadAt.IsZero() {
			for _, s := range others {
				if role, _, err := s.role(); err == nil && role == "leader" {
					leadAt = time.Now()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		var probeErr error
		probed := false
		select {
		case probeErr = <-probe:
			probed = true
		case <-time.After(time.Until(faultAt.Add(hold))):
		}
		if !probed {
			t.Errorf("round %d (%s): no append sent after the fault was accepted during it (%s)", r, kind, hold)
		} else if probeErr != nil {
			t.Errorf("round %d (%s): the append sent after the fault: %v", r, kind, probeErr)
		}
		if kind == "partitioned" {
			select {
			case got := <-held:
				// not_leader, or unavailable for a submission whose read
				// failed when the lease was lost.
				if got.err != nil || got.status != http.StatusServiceUnavailable ||
					(got.code != api.CodeNotLeader && got.code != api.CodeUnavailable) {
					t.Errorf("round %d: the cut-off leader answered an append it held %s, want 503 not_leader", r, got)
				}
				if d := got.at.Sub(faultAt); d > 3*ttl {
					t.Errorf("round %d: the cut-off leader held an append for %s after the cut", r, d.Round(time.Millisecond))
				}
			case <-time.After(time.Until(faultAt.Add(hold))):
				t.Errorf("round %d: the cut-off leader held an append until the fault ended", r)
			}
		}
		if leadAt.IsZero() {
			t.Errorf("round %d (%s): no other server led during the fault (%s)", r, kind, hold)
		} else {
			leads = append(leads, leadAt.Sub(faultAt))
		}
		time.Sleep(time.Until(faultAt.Add(hold)))
		if kind == "paused" {
			leader.signal(syscall.SIGCONT)
		}
		px.thaw()
		if !probed {
			if err := <-probe; err != nil {
				t.Errorf("round %d: the probe after the fault ended: %v", r, err)
			}
		}
		mu.Lock()
		if !probeAt.IsZero() {
			gaps = append(gaps, probeAt.Sub(faultAt))
		}
		mu.Unlock()
		if t.Failed() {
			break
		}
		t.Logf("round %d (%s): another server led %s after the fault, the append sent after it was accepted %s after it",
			r, kind, leads[len(leads)-1].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	acks := ld.finish()
	if ld.failed.Load() != 0 {
		t.Fatalf("%d appends were denied or refused", ld.failed.Load())
	}
	// Each takeover and each loss of the lease is one log line and a
	// metric.
	var took, lost bool
	for _, s := range servers {
		b, _ := os.ReadFile(s.log)
		took = took || strings.Contains(string(b), "lease_event=took")
		lost = lost || strings.Contains(string(b), "lease_event=lost")
	}
	if !took || !lost {
		t.Errorf("the servers' logs have no lease event line (took %v, lost %v)", took, lost)
	}
	var metricLost float64
	for _, s := range servers {
		metricLost += metric(t, s, "custody_lease_lost_total")
	}
	if metricLost < float64(len(leads)) {
		t.Errorf("custody_lease_lost_total sums to %v over the servers after %d takeovers", metricLost, len(leads))
	}
	all := append(slices.Clone(acks), probeAcks...)
	checkLog(t, servers[0].store, all)
	faultReport(t, kind, ttl, len(all), leads, gaps)
}
