package reliability

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// subscriberCutWait bounds how long the honest agents append, after the
// non-reading subscribers' attack window, for the server to cut every one
// of them (a write blocked on one ends after server.Options
// StreamWriteTimeout, 10s; generous, for a loaded machine).
const subscriberCutWait = 2 * time.Minute

// longWorkflow confirms agents agents in workflow wf and has each append
// per pending receipts, all at once; it returns the workflow's last index.
func (e *abuseEnv) longWorkflow(wf string, agents, per int) uint64 {
	e.t.Helper()
	hc := newClient(e.t, e.sp.url, e.vkey, 3)
	var last atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for i := range agents {
		name := fmt.Sprintf("agent:long/a%d", i)
		priv, id, hash := e.confirm(name, wf)
		rt := client.NewRuntime(hc, priv, name, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				rec, err := rt.Receipt(context.Background(), &statement.ReceiptDoc{ReceiptID: client.NewID("long"), Workflow: wf, StepID: "step",
					Action: "act", Target: "t/x", AuthorizationRef: id, Result: statement.ResultPending, ScopeHash: hash})
				if err != nil {
					errs <- err
					return
				}
				for {
					l := last.Load()
					if rec.Index <= l || last.CompareAndSwap(l, rec.Index) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("building workflow %s: %v", wf, err)
	}
	return last.Load()
}

// dialFrom dials addr from the loopback address 127.0.0.<host>, so that
// the server sees many client addresses.
func dialFrom(host int, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}}
	return d.Dial("tcp", addr)
}

// subscribe opens an event stream on wf from the loopback address of
// host (with the request header lines headers, "Name: value"), waits for
// the server's first line, and returns the connection (which the caller
// then never reads).
func subscribe(host int, addr, wf string, after uint64, headers ...string) (net.Conn, int, error) {
	c, err := dialFrom(host, addr)
	if err != nil {
		return nil, 0, err
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	req := fmt.Sprintf("GET /v1/workflows/%s/events?after=%d HTTP/1.1\r\nHost: %s\r\n", wf, after, addr)
	for _, h := range headers {
		req += h + "\r\n"
	}
	req += "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, 0, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, resp.StatusCode, nil
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, ": watching") {
		c.Close()
		return nil, 0, fmt.Errorf("first line %q: %v", line, err)
	}
	c.SetDeadline(time.Time{})
	return c, http.StatusOK, nil
}

// TestReaderAttacks: readers must not be able to stop writers. Against a
// workflow of 9,000 entries, while honest agents append (their rate is
// measured before, during and after each attack; the figures go to
// docs/BENCHMARKS.md): event streams from the workflow's start whose
// clients close at once; 1,000 subscribers that never read, from many
// client addresses; floods of whole-workflow bundles and of workflow
// pages; streams on workflows that do not exist. Every honest append must
// succeed, the server's memory stay bounded, a runtime's own stream open,
// and the server shut down cleanly at the end.
func TestReaderAttacks(t *testing.T) {
	if testing.Short() {
		t.Skip("reader attacks: skipped in -short mode")
	}
	if lim, err := raiseNoFile(readerSubscribers + 1000); err != nil {
		t.Fatalf("cannot open %d connections: %v (RLIMIT_NOFILE %d)", readerSubscribers, err, lim)
	}
	e := newAbuseEnv(t)
	addr := e.sp.addr
	start := time.Now()
	last := e.longWorkflow("wf_long", 16, longPerAgent)
	t.Logf("workflow wf_long: %d entries appended in %v", 16*longPerAgent, time.Since(start).Round(100*time.Millisecond))
	e.measureHonest(time.Second)
	baseline := e.measureHonest(attackWindow)
	if baseline.n == 0 || len(baseline.errs) > 0 {
		t.Fatalf("baseline: %d appends, errors %v", baseline.n, baseline.errs)
	}
	e.figures = append(e.figures, fmt.Sprintf("%-26s honest %7.1f appends/s, server RSS %d kB", "baseline", baseline.rate(), procStatusKB(e.sp.pid(), "VmRSS")))
	aftermath := func(name string) {
		run := e.measureHonest(attackWindow)
		fig := fmt.Sprintf("%-26s honest %7.1f appends/s (%3.0f%% of baseline)", "  right after", run.rate(), 100*run.rate()/baseline.rate())
		t.Log(name + ": " + fig)
		e.figures = append(e.figures, fig)
		if run.n == 0 || len(run.errs) > 0 {
			t.Errorf("%s: after the attack: %d appends, errors %v", name, run.n, firstErr(run.errs))
		}
	}

	t.Run("streams_from_start_closed", func(t *testing.T) {
		// 200 clients at a time open a stream from the workflow's first
		// entry and close it after the first event: each used to make the
		// server walk the whole workflow, and go on after the client left.
		var opened atomic.Int64
		e.attack(t, "200 closing streams", baseline, nil, func(ctx context.Context) {
			var wg sync.WaitGroup
			for i := range 200 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						c, status, err := subscribe(2+i%50, addr, "wf_long", 0)
						if err == nil && status == http.StatusOK {
							opened.Add(1)
							c.Close()
						} else {
							time.Sleep(20 * time.Millisecond)
						}
					}
				}()
			}
			wg.Wait()
		})
		t.Logf("%d streams opened and closed", opened.Load())
		aftermath("closing streams")
	})

	t.Run("subscribers_not_reading", func(t *testing.T) {
		// 1,000 streams on the honest agents' own workflows, from 20
		// client addresses, that never read: every commit has entries to
		// send them (the server's cap of 128 streams per workflow
		// admits 512 of them on the 4 workflows). Honest appends must keep going while they are open,
		// the server must cut every one of them (they never take what
		// it sends), and appends go on after.
		var conns []net.Conn
		var mu sync.Mutex
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		cutBefore, err := metricValue(e.sp.url, "custody_event_streams_cut_total")
		if err != nil {
			t.Fatal(err)
		}
		e.attack(t, fmt.Sprintf("%d idle subscribers", readerSubscribers), baseline, func() {
			var wg sync.WaitGroup
			for i := range readerSubscribers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, status, err := subscribe(100+i%20, addr, e.honest[i%len(e.honest)].wf, 0)
					if err == nil && status == http.StatusOK {
						mu.Lock()
						conns = append(conns, c)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			t.Logf("%d of %d subscribers opened", len(conns), readerSubscribers)
		}, nil)
		// A runtime's own stream, for the step it executes, still opens
		// (from an address of its own): it proves the step's pending
		// RECEIPT (api.HeaderStreamStep), as client.WatchStep does, and
		// takes capacity the subscribers cannot (the workflow's cap is
		// theirs).
		a := e.honest[0]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pending, err := a.rt.Receipt(ctx, &statement.ReceiptDoc{ReceiptID: client.NewID("step"), Workflow: a.wf, StepID: "watched",
			Action: "act", Target: "t/x", AuthorizationRef: a.grant, Result: statement.ResultPending, ScopeHash: a.hash})
		cancel()
		if err != nil {
			t.Fatalf("the runtime's pending RECEIPT: %v", err)
		}
		proof := newClient(t, e.sp.url, e.vkey, -1).NewStepProof(a.priv, a.wf, pending.Index)
		c, status, err := subscribe(250, addr, a.wf, last, fmt.Sprintf("%s: %d %s", api.HeaderStreamStep, proof.Index, base64.StdEncoding.EncodeToString(proof.Signature)))
		if err != nil || status != http.StatusOK {
			t.Errorf("with %d subscribers open, a runtime's stream for its step: %d %v", len(conns), status, err)
		} else {
			c.Close()
		}
		aftermath("idle subscribers (still open)")
		// The honest agents keep appending until the server has cut every
		// subscriber that never read (or a generous bound passes).
		start := time.Now()
		var cut float64
		for time.Since(start) < subscriberCutWait {
			e.measureHonest(time.Second)
			v, err := metricValue(e.sp.url, "custody_event_streams_cut_total")
			if err != nil {
				t.Fatal(err)
			}
			if cut = v - cutBefore; int(cut) >= len(conns) {
				break
			}
		}
		open, _ := metricValue(e.sp.url, "custody_event_streams")
		fig := fmt.Sprintf("%-26s %.0f of %d cut within %v of the attack's end, %.0f streams still open",
			"  stalled subscribers", cut, len(conns), time.Since(start).Round(time.Second), open)
		t.Log(fig)
		e.figures = append(e.figures, fig)
		if int(cut) < len(conns) {
			t.Errorf("the server cut %.0f of the %d subscribers that never read (after %v of honest appends)", cut, len(conns), subscriberCutWait)
		}
		aftermath("idle subscribers (cut, their connections still open)")
	})

	t.Run("bundle_flood", func(t *testing.T) {
		// 40 clients ask, over and over, for the bundle of the whole
		// 9,000-entry workflow.
		var counts statusCounts
		counts.m = map[string]int{}
		e.attack(t, "40 whole-workflow bundles", baseline, nil, func(ctx context.Context) {
			getFlood(ctx, 40, fmt.Sprintf("%s/v1/bundle?index=%d&workflow=1", e.sp.url, last), &counts)
		})
		counts.log(t, e, "bundles")
		// During the flood a bundle may take longer than the window (one
		// or two are built at a time); every answer is 200 or 503. Then,
		// with the flood gone, the bundle is served whole.
		for code := range counts.m {
			if code != "200" && code != "503" {
				t.Errorf("bundle answers: %v, want only 200 and 503", counts.m)
			}
		}
		hc := &http.Client{Timeout: 2 * time.Minute}
		resp, err := hc.Get(fmt.Sprintf("%s/v1/bundle?index=%d&workflow=1", e.sp.url, last))
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Entries []json.RawMessage `json:"entries"`
		}
		err = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || len(b.Entries) < 16*longPerAgent {
			t.Errorf("after the flood, the workflow's bundle: %d, %d entries, %v", resp.StatusCode, len(b.Entries), err)
		}
		aftermath("bundles")
	})

	t.Run("workflow_page_flood", func(t *testing.T) {
		var counts statusCounts
		counts.m = map[string]int{}
		e.attack(t, "40 workflow page readers", baseline, nil, func(ctx context.Context) {
			getFlood(ctx, 40, e.sp.url+"/v1/workflows/wf_long?after=0", &counts)
		})
		counts.log(t, e, "workflow pages")
		counts.require(t, map[int]bool{http.StatusOK: true, http.StatusServiceUnavailable: true}, true)
		aftermath("workflow pages")
	})

	t.Run("combined", func(t *testing.T) {
		// Every attack above at once: 1,000 subscribers that never read,
		// 200 clients opening streams from the long workflow's start and
		// closing them, 40 clients asking for its whole bundle and 40
		// reading its pages. Honest appends must all succeed and the
		// server's heap stay bounded (attack checks both).
		var conns []net.Conn
		var mu sync.Mutex
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		var bundles, pages statusCounts
		bundles.m, pages.m = map[string]int{}, map[string]int{}
		e.attack(t, "all of them at once", baseline, func() {
			var wg sync.WaitGroup
			for i := range readerSubscribers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, status, err := subscribe(100+i%20, addr, e.honest[i%len(e.honest)].wf, 0)
					if err == nil && status == http.StatusOK {
						mu.Lock()
						conns = append(conns, c)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			t.Logf("%d of %d subscribers opened", len(conns), readerSubscribers)
		}, func(ctx context.Context) {
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				getFlood(ctx, 40, fmt.Sprintf("%s/v1/bundle?index=%d&workflow=1", e.sp.url, last), &bundles)
			}()
			go func() {
				defer wg.Done()
				getFlood(ctx, 40, e.sp.url+"/v1/workflows/wf_long?after=0", &pages)
			}()
			for i := range 200 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						c, status, err := subscribe(2+i%50, addr, "wf_long", 0)
						if err == nil && status == http.StatusOK {
							c.Close()
						} else {
							time.Sleep(20 * time.Millisecond)
						}
					}
				}()
			}
			wg.Wait()
		})
		bundles.log(t, e, "bundles (combined)")
		pages.log(t, e, "workflow pages (combined)")
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		aftermath("all of them")
	})

	t.Run("unknown_workflow_streams", func(t *testing.T) {
		// Streams on workflows that do not exist take no slot: 404.
		notFound := 0
		for i := range 1024 {
			c, status, err := subscribe(2+i%200, addr, fmt.Sprintf("wf_none_%d", i), 0)
			if c != nil {
				c.Close()
			}
			if err == nil && status == http.StatusNotFound {
				notFound++
			}
		}
		if notFound != 1024 {
			t.Errorf("%d of 1024 streams on unknown workflows answered 404", notFound)
		}
		c, status, err := subscribe(251, addr, e.honest[1].wf, last)
		if err != nil || status != http.StatusOK {
			t.Errorf("after the unknown-workflow streams, a runtime's stream: %d %v", status, err)
		} else {
			c.Close()
		}
	})

	if err := e.sp.terminate(); err != nil {
		t.Errorf("graceful shutdown: %v\n%s", err, e.sp.logTail())
	}
	t.Log("summary:\n" + strings.Join(e.figures, "\n"))
	_ = ed25519.PublicKeySize
}

// getFlood has workers clients GET url over and over until ctx ends, each
// from a client address of its own (attackerHost).
func getFlood(ctx context.Context, workers int, url string, counts *statusCounts) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := attackerTransport(attackerHost(w), 1)
			hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
			defer tr.CloseIdleConnections()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						counts.add("error")
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				counts.add(fmt.Sprint(resp.StatusCode))
				if resp.StatusCode == http.StatusServiceUnavailable {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}
