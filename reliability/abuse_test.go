package reliability

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Bounds of the abuse tests. Each attack runs for about attackWindow while
// honest agents append; the figures are logged, the assertions are about
// correctness (honest appends succeed, /healthz answers, nothing refused
// is logged, memory bounded), never about speed.
const (
	abuseOrigin   = "abuse.test/custody"
	honestAgents  = 4
	attackWindow  = 3 * time.Second // honest appends are measured for this long under each attack
	settle        = 500 * time.Millisecond
	slowHeaders   = 300 // connections dribbling request headers
	slowBodies    = 200 // connections dribbling request bodies (below the default --max-inflight 1024)
	dribbleEvery  = time.Second
	dribbleMax    = 45 // a dribbler gives up after this many bytes: the server must have cut it long before
	idleConnsWant = 2000
	eventStreams  = 1000 // event streams asked for, each on a workflow of its own that does not exist
	// readerSubscribers are the streams that never read (TestReaderAttacks);
	// longPerAgent the receipts each of 16 agents adds to its long workflow.
	readerSubscribers = 1000
	longPerAgent      = 560
	// rssBoundKB bounds how much the server's resident memory may grow
	// under any one attack (generous: the point is "bounded", not a figure).
	rssBoundKB = 512 << 10
	// heapBound bounds the server's Go heap in use under any one attack
	// (go_memstats_heap_inuse_bytes): generous, a little above custody
	// serve's default soft limit (server.DefaultMemoryLimit, 384 MiB).
	heapBound = 448 << 20
	// serverReadHeaderTimeout and serverReadTimeout are custody serve's
	// defaults (server.ServeOptions); dribblers must be cut by then, give
	// or take the slack of a loaded machine.
	serverReadHeaderTimeout = 5 * time.Second
	serverReadTimeout       = 15 * time.Second
	cutSlack                = 15 * time.Second
)

// abuseEnv is a served ledger with honest agents and abusers.
type abuseEnv struct {
	t      *testing.T
	bin    string
	li     logInfo
	sp     *serverProc
	vkey   string
	honest []*honestAgent
	// abusers are confirmed agents whose keys sign denied statements.
	abusers   []*abuser
	hkeys     map[string]bool // key ids of honest agents
	figures   []string
	principal *client.Runtime // the owner, who confirms agents
}

// confirm has the owner grant a new agent key in workflow wf; it returns
// the key, the grant's id and its scope hash.
func (e *abuseEnv) confirm(name, wf string) (ed25519.PrivateKey, string, string) {
	e.t.Helper()
	pub, priv := newKey(e.t)
	id := strings.NewReplacer(":", "_", "/", "_").Replace(name)
	rec, err := e.principal.Confirm(context.Background(), client.Grant{ID: id, Workflow: wf, Grantee: name, GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, TTL: 24 * time.Hour, Revocable: true})
	if err != nil {
		e.t.Fatalf("confirming %s: %v", name, err)
	}
	return priv, id, rec.Statement.(*statement.ConfirmDoc).ScopeHash
}

type honestAgent struct {
	rt          *client.Runtime
	priv        ed25519.PrivateKey
	name        string
	grant, wf   string
	hash, keyID string
}

type abuser struct {
	name  string
	priv  ed25519.PrivateKey
	keyID string
	grant string
	wf    string
	hash  string
}

func newAbuseEnv(t *testing.T, extra ...string) *abuseEnv {
	t.Helper()
	bin := custodyBinary(t)
	dir := filepath.Join(t.TempDir(), "ledger")
	li := initLedger(t, bin, dir, abuseOrigin)
	sp := startServer(t, bin, dir, freeAddr(t), extra...)
	return newAbuseEnvOn(t, bin, li, sp)
}

// newAbuseEnvOn enrolls the owner and confirms the honest agents and the
// abusers on a running server.
func newAbuseEnvOn(t *testing.T, bin string, li logInfo, sp *serverProc) *abuseEnv {
	t.Helper()
	e := &abuseEnv{t: t, bin: bin, li: li, sp: sp, vkey: li.VerifierKey, hkeys: map[string]bool{}}
	ppriv := enrollPrincipal(t, bin, li, sp.url, "user:owner")
	setup := newClient(t, sp.url, li.VerifierKey, 3)
	e.principal = client.NewRuntime(setup, ppriv, "user:owner", nil)
	hc := newClient(t, sp.url, li.VerifierKey, 3) // the honest agents' own connections
	confirm := e.confirm
	for i := range honestAgents {
		name, wf := fmt.Sprintf("agent:honest/a%d", i), fmt.Sprintf("wf_honest_%d", i)
		priv, id, hash := confirm(name, wf)
		kid := sign.KeyID(priv.Public().(ed25519.PublicKey))
		e.honest = append(e.honest, &honestAgent{rt: client.NewRuntime(hc, priv, name, nil), priv: priv, name: name, grant: id, wf: wf, hash: hash, keyID: kid})
		e.hkeys[kid] = true
	}
	for i := range 3 {
		name, wf := fmt.Sprintf("agent:abuser/a%d", i), fmt.Sprintf("wf_abuse_%d", i)
		priv, id, hash := confirm(name, wf)
		e.abusers = append(e.abusers, &abuser{name: name, priv: priv, keyID: sign.KeyID(priv.Public().(ed25519.PublicKey)), grant: id, wf: wf, hash: hash})
	}
	return e
}

// honestRun is what honest agents achieved in one window.
type honestRun struct {
	n       int
	elapsed time.Duration
	errs    []error
}

func (h honestRun) rate() float64 { return float64(h.n) / h.elapsed.Seconds() }

// measureHonest has every honest agent append pending receipts, one after
// another, for d, and counts the verified acceptances.
func (e *abuseEnv) measureHonest(d time.Duration) honestRun {
	var n atomic.Int64
	var mu sync.Mutex
	var errs []error
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for _, a := range e.honest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100_000 && time.Now().Before(deadline); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				_, err := a.rt.Receipt(ctx, &statement.ReceiptDoc{ReceiptID: client.NewID("honest"), Workflow: a.wf, StepID: "step",
					Action: "act", Target: "t/x", AuthorizationRef: a.grant, Result: statement.ResultPending, ScopeHash: a.hash})
				cancel()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					if len(errs) > 20 {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return honestRun{n: int(n.Load()), elapsed: time.Since(start), errs: errs}
}

// rssSampler samples the server's RSS until stopped and keeps the peak,
// and the peak of its Go heap in use (from /metrics, every 500 ms).
type rssSampler struct {
	peak     atomic.Int64
	anonPeak atomic.Int64 // RssAnon: RSS less the mapped files (Badger's tables and value log)
	heapPeak atomic.Int64 // bytes
	stop     chan struct{}
	done     chan struct{}
}

func (e *abuseEnv) sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	pid := e.sp.pid()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			if v := procStatusKB(pid, "VmRSS"); v > s.peak.Load() {
				s.peak.Store(v)
			}
			if v := procStatusKB(pid, "RssAnon"); v > s.anonPeak.Load() {
				s.anonPeak.Store(v)
			}
			if n%5 == 0 {
				if v, err := metricValue(e.sp.url, "go_memstats_heap_inuse_bytes"); err == nil && int64(v) > s.heapPeak.Load() {
					s.heapPeak.Store(int64(v))
				}
			}
			select {
			case <-tick.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *rssSampler) end() int64 { close(s.stop); <-s.done; return s.peak.Load() }

// logSize is the size of the served log, from its signed checkpoint.
func (e *abuseEnv) logSize() uint64 {
	e.t.Helper()
	cp, _, err := newClient(e.t, e.sp.url, e.vkey, 3).Head(context.Background())
	if err != nil {
		e.t.Fatalf("checkpoint: %v", err)
	}
	return cp.Size
}

// newEntries fetches entries [from, to) over HTTP (each leaf checked
// against its hash by the client).
func (e *abuseEnv) newEntries(from, to uint64) []*api.Entry {
	e.t.Helper()
	c := newClient(e.t, e.sp.url, e.vkey, 3)
	out := make([]*api.Entry, to-from)
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Uint64{}
	next.Store(from)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= to {
					return
				}
				en, err := c.Entry(context.Background(), i)
				if err != nil {
					failed.Store(err)
					return
				}
				out[i-from] = en
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		e.t.Fatalf("reading the log: %v", err)
	}
	return out
}

// onlyHonest requires every entry logged in [from, to) to be an honest
// agent's statement: nothing an attacker sent was logged.
func (e *abuseEnv) onlyHonest(from, to uint64) {
	e.t.Helper()
	for _, en := range e.newEntries(from, to) {
		if !e.hkeys[en.KeyID] || en.Kind == string(statement.Denial) {
			e.t.Fatalf("entry %d (%s %s by %s) was logged during the attack; only honest receipts should be", en.Index, en.Kind, en.ID, en.Actor)
		}
	}
}

// attack runs prepare (if any), then the abuse fn (if any; it must return
// once ctx ends) while honest agents append for attackWindow, then checks
// the server: alive, /healthz, honest appends all succeeded, RSS bounded.
// It returns the honest run.
func (e *abuseEnv) attack(t *testing.T, name string, baseline honestRun, prepare func(), fn func(ctx context.Context)) honestRun {
	t.Helper()
	rssBefore := procStatusKB(e.sp.pid(), "VmRSS")
	sampler := e.sampleRSS()
	if prepare != nil {
		prepare()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if fn != nil {
			fn(ctx)
		}
	}()
	time.Sleep(settle)
	srvCPU, ownCPU := procCPU(e.sp.pid()), procCPU(os.Getpid())
	run := e.measureHonest(attackWindow)
	srvCPU, ownCPU = procCPU(e.sp.pid())-srvCPU, procCPU(os.Getpid())-ownCPU
	herr := healthy(e.sp.url)
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the attack did not stop within 60s of being cancelled", name)
	}
	peak := sampler.end()
	heapPeak := sampler.heapPeak.Load()
	if herr != nil {
		t.Errorf("%s: /healthz during the attack: %v", name, herr)
	}
	if !e.sp.alive() {
		t.Fatalf("%s: the server died:\n%s", name, e.sp.logTail())
	}
	if err := healthy(e.sp.url); err != nil {
		t.Fatalf("%s: /healthz after the attack: %v", name, err)
	}
	if run.n == 0 || len(run.errs) > 0 {
		t.Errorf("%s: honest agents: %d appends, %d errors (first: %v)", name, run.n, len(run.errs), firstErr(run.errs))
	}
	if peak-rssBefore > rssBoundKB {
		t.Errorf("%s: server RSS grew from %d to %d kB", name, rssBefore, peak)
	}
	if heapPeak > heapBound {
		t.Errorf("%s: the server's Go heap in use reached %d MiB (bound %d MiB)", name, heapPeak>>20, heapBound>>20)
	}
	fig := fmt.Sprintf("%-26s honest %7.1f appends/s (%3.0f%% of baseline %.1f), server RSS %d -> peak %d kB (anonymous peak %d kB), heap in use peak %d MiB; CPU in the window: server %.2fs, test process (attackers and honest agents) %.2fs",
		name, run.rate(), 100*run.rate()/baseline.rate(), baseline.rate(), rssBefore, peak, sampler.anonPeak.Load(), heapPeak>>20, srvCPU.Seconds(), ownCPU.Seconds())
	t.Log(fig)
	e.figures = append(e.figures, fig)
	return run
}

// procCPU is the CPU time (user and system) process pid has used.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// metricValue reads one unlabelled sample from the server's /metrics.
func metricValue(url, name string) (float64, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err
		}
	}
	return 0, fmt.Errorf("/metrics has no %s (%v)", name, sc.Err())
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// attackerHost is the loopback address (127.0.0.<host>) of the i-th
// attacking client: attackers connect from 127.0.0.2 to 127.0.0.251, as
// separate clients would, and the honest agents from 127.0.0.1, so that
// the server's per-client budgets (DESIGN: one budget per client) count
// them apart, as they would on a network.
func attackerHost(i int) int { return 2 + i%250 }

// attackerTransport is an HTTP transport whose connections come from
// 127.0.0.<host>.
func attackerTransport(host, idlePerHost int) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: idlePerHost}
}

// dribbler is one slow client: from the loopback address of host, it
// sends prefix, then one byte every dribbleEvery, until the server
// answers or closes the connection.
type dribbleResult struct {
	cut    bool          // the server ended it (answer, EOF or reset)
	after  time.Duration // from the connection's first byte to the cut
	status string        // the status line, if the server answered
}

func dribble(ctx context.Context, host int, addr, prefix string) dribbleResult {
	d := net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return dribbleResult{}
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, prefix); err != nil {
		return dribbleResult{cut: true}
	}
	ended := make(chan dribbleResult, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n') // blocks until an answer or the close
		ended <- dribbleResult{cut: true, after: time.Since(start), status: strings.TrimSpace(line)}
	}()
	tick := time.NewTicker(dribbleEvery)
	defer tick.Stop()
	for range dribbleMax {
		select {
		case r := <-ended:
			return r
		case <-tick.C:
			conn.Write([]byte("a")) // an error shows as the reader's EOF
		case <-ctx.Done():
			// Stopped by the test, not cut by the server, unless it was
			// cut meanwhile.
			select {
			case r := <-ended:
				return r
			default:
				return dribbleResult{after: time.Since(start)}
			}
		}
	}
	return dribbleResult{after: time.Since(start)}
}

// TestAbuse attacks one running `custody serve` in several ways while
// honest agents keep appending, and reports honest appends/s under each
// attack against a baseline. Each attack must leave the server up and
// answering /healthz, the honest appends all succeeding, its memory
// bounded, and nothing the attacker sent in the log (except DENIALs up to
// the per-key rate limit).
func TestAbuse(t *testing.T) {
	if testing.Short() {
		t.Skip("abuse test: skipped in -short mode")
	}
	e := newAbuseEnv(t)
	addr := e.sp.addr
	e.measureHonest(time.Second) // warm up connections and caches
	baseline := e.measureHonest(attackWindow)
	if baseline.n == 0 || len(baseline.errs) > 0 {
		t.Fatalf("baseline: %d appends, errors %v", baseline.n, baseline.errs)
	}
	rss := procStatusKB(e.sp.pid(), "VmRSS")
	fig := fmt.Sprintf("%-26s honest %7.1f appends/s (%d agents, one append after another), server RSS %d kB",
		"baseline", baseline.rate(), honestAgents, rss)
	t.Log(fig)
	e.figures = append(e.figures, fig)

	t.Run("slow_clients", func(t *testing.T) {
		// Slowloris: connections that dribble their headers, and others
		// that send complete headers and dribble a body. The server's
		// ReadHeaderTimeout and ReadTimeout must cut every one of them;
		// meanwhile honest appends keep flowing (a slow body holds one
		// body-reading slot, and there are fewer of them than slots). Each
		// dribbler is a client of its own (attackerHost).
		from := e.logSize()
		var mu sync.Mutex
		var hdr, body []dribbleResult
		var wg sync.WaitGroup
		stopAll := make(chan struct{})
		launch := func(n int, prefix string, into *[]dribbleResult) {
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					go func() {
						select {
						case <-stopAll:
							cancel()
						case <-ctx.Done():
						}
					}()
					r := dribble(ctx, attackerHost(i), addr, prefix)
					mu.Lock()
					*into = append(*into, r)
					mu.Unlock()
				}()
			}
		}
		e.attack(t, "slow clients", baseline, func() {
			launch(slowHeaders, "POST /v1/entries HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nX-Slow: ", &hdr)
			launch(slowBodies, "POST /v1/entries HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", &body)
		}, nil)
		// The dribblers are not cancelled with the measurement: they must
		// be cut by the server's own timeouts. Wait for that, bounded.
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(serverReadTimeout + cutSlack + 10*time.Second):
			close(stopAll)
			<-waited
		}
		check := func(kind string, rs []dribbleResult, limit time.Duration) {
			cut, worst := 0, time.Duration(0)
			statuses := map[string]int{}
			for _, r := range rs {
				if r.cut {
					cut++
					worst = max(worst, r.after)
					statuses[r.status]++
				}
			}
			fig := fmt.Sprintf("%-26s %d of %d cut by the server, the last after %v (answers: %v)", "  slow "+kind, cut, len(rs), worst.Round(100*time.Millisecond), statuses)
			t.Log(fig)
			e.figures = append(e.figures, fig)
			if cut != len(rs) || worst > limit {
				t.Errorf("slow %s: %d of %d connections cut by the server, the last after %v (limit %v)", kind, cut, len(rs), worst, limit)
			}
		}
		check("headers", hdr, serverReadHeaderTimeout+cutSlack)
		check("bodies", body, serverReadTimeout+cutSlack)
		e.onlyHonest(from, e.logSize())
	})

	t.Run("oversized_bodies", func(t *testing.T) {
		// Bodies over the 128 KiB cap, and envelopes under it whose leaf
		// could never fit 65,535 bytes: 413, nothing logged.
		from := e.logSize()
		big := bytes.Repeat([]byte("x"), 200<<10)
		// A well-formed envelope of about 100 KiB (signature irrelevant:
		// the size is checked first).
		payload := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("{"), 72<<10))
		mid, _ := json.Marshal(map[string]any{"payloadType": "application/vnd.custody.receipt.v1+json", "payload": payload,
			"signatures": []map[string]string{{"keyid": e.abusers[0].keyID, "sig": base64.StdEncoding.EncodeToString(make([]byte, 64))}}})
		counts := &statusCounts{m: map[string]int{}}
		e.attack(t, "oversized bodies", baseline, nil, func(ctx context.Context) {
			flood(ctx, 8, e.sp.url, func(i int) []byte {
				if i%2 == 0 {
					return big
				}
				return mid
			}, counts)
		})
		counts.log(t, e, "  oversized: answers")
		counts.require(t, map[int]bool{413: true}, true)
		e.onlyHonest(from, e.logSize())
	})

	t.Run("invalid_signatures", func(t *testing.T) {
		// Well-formed envelopes naming a bound key (or an unknown one)
		// with a signature that does not verify: 400, nothing logged.
		from := e.logSize()
		ab := e.abusers[0]
		counts := &statusCounts{m: map[string]int{}}
		e.attack(t, "invalid signatures", baseline, nil, func(ctx context.Context) {
			flood(ctx, 16, e.sp.url, func(i int) []byte {
				st := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(time.Now()),
					Log: abuseOrigin, Actor: ab.name, Seq: 1}, ReceiptID: fmt.Sprintf("forged_%d", i), Workflow: ab.wf, StepID: "step",
					Action: "act", Target: "t/x", AuthorizationRef: ab.grant, Result: statement.ResultPending, ScopeHash: ab.hash}
				env, _, err := statement.Sign(ab.priv, st)
				if err != nil {
					panic(err)
				}
				sig := make([]byte, 64)
				rand.Read(sig)
				env.Signatures[0].Sig = base64.StdEncoding.EncodeToString(sig)
				if i%4 == 3 {
					kid := make([]byte, 32)
					rand.Read(kid)
					env.Signatures[0].KeyID = fmt.Sprintf("%x", kid)
				}
				raw, _ := env.Canonical()
				return raw
			}, counts)
		})
		counts.log(t, e, "  invalid signatures: answers")
		counts.require(t, map[int]bool{400: true}, false)
		e.onlyHonest(from, e.logSize())
	})

	t.Run("denied_flood", func(t *testing.T) {
		// Valid signatures on statements the rules deny (out of scope),
		// from 3 keys: each key gets its burst of logged DENIALs, then
		// 429 rate_limited, not logged.
		from := e.logSize()
		counts := &statusCounts{m: map[string]int{}}
		per := make([]atomic.Int64, len(e.abusers)) // 403s per abuser
		var first, last atomic.Int64
		e.attack(t, "denied flood", baseline, nil, func(ctx context.Context) {
			first.Store(time.Now().UnixNano())
			flood(ctx, 12, e.sp.url, func(i int) []byte {
				ab := e.abusers[i%len(e.abusers)]
				st := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(time.Now()),
					Log: abuseOrigin, Actor: ab.name, Seq: 1}, ReceiptID: fmt.Sprintf("denied_%d", i), Workflow: ab.wf, StepID: "step",
					Action: "act", Target: "elsewhere/x", AuthorizationRef: ab.grant, Result: statement.ResultPending, ScopeHash: ab.hash}
				_, raw, err := statement.Sign(ab.priv, st)
				if err != nil {
					panic(err)
				}
				return raw
			}, counts, func(i, status int) {
				if status == http.StatusForbidden {
					per[i%len(e.abusers)].Add(1)
				}
			})
			last.Store(time.Now().UnixNano())
		})
		counts.log(t, e, "  denied flood: answers")
		counts.require(t, map[int]bool{403: true, 429: true}, false)
		if counts.status(429) == 0 {
			t.Errorf("no rate_limited answer in %d denied submissions", counts.total())
		}
		// Walk what was logged: honest receipts, and DENIALs of the
		// abusers' statements, as many per key as 403s were answered,
		// and no more than the limiter allows: 100 at once, then 10/s.
		elapsed := time.Duration(last.Load() - first.Load())
		bound := int64(100 + 10*elapsed.Seconds() + 1)
		logged := map[string]int64{}
		for _, en := range e.newEntries(from, e.logSize()) {
			if e.hkeys[en.KeyID] && en.Kind == string(statement.Receipt) {
				continue
			}
			if en.Kind != string(statement.Denial) {
				t.Fatalf("entry %d: a %s by %s was logged during the flood", en.Index, en.Kind, en.Actor)
			}
			var d statement.DenialDoc
			if err := json.Unmarshal(en.Statement, &d); err != nil {
				t.Fatal(err)
			}
			if d.ReasonCode != "out_of_scope" {
				t.Errorf("DENIAL %d: %s, want out_of_scope", en.Index, d.ReasonCode)
			}
			logged[d.SignerKeyID]++
		}
		for i, ab := range e.abusers {
			n := logged[ab.keyID]
			if n != per[i].Load() {
				t.Errorf("abuser %d: %d DENIALs logged, %d answered 403", i, n, per[i].Load())
			}
			if n > bound {
				t.Errorf("abuser %d: %d DENIALs logged in %v, the rate limit allows %d", i, n, elapsed, bound)
			}
			fig := fmt.Sprintf("%-26s abuser %d: %d DENIALs logged in %v (limit %d)", "", i, n, elapsed.Round(100*time.Millisecond), bound)
			t.Log(fig)
			e.figures = append(e.figures, fig)
		}
	})

	t.Run("idle_connections", func(t *testing.T) {
		// Thousands of keep-alive connections, each idle after one
		// request (they live until the server's 120 s IdleTimeout).
		if lim, err := raiseNoFile(idleConnsWant + 1000); err != nil {
			testenv.Need(t, "cannot open %d connections: %v (RLIMIT_NOFILE %d; CI runs as root, which may raise it)", idleConnsWant, err, lim)
		}
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		fdsBefore := openFDs(e.sp.pid())
		var opened int
		e.attack(t, fmt.Sprintf("%d idle connections", idleConnsWant), baseline, func() {
			start := time.Now()
			conns = openIdle(addr, idleConnsWant)
			opened = len(conns)
			fig := fmt.Sprintf("%-26s %d opened in %v, server fds %d -> %d", "  idle", opened,
				time.Since(start).Round(100*time.Millisecond), fdsBefore, openFDs(e.sp.pid()))
			t.Log(fig)
			e.figures = append(e.figures, fig)
		}, nil)
		if opened < idleConnsWant {
			t.Errorf("only %d of %d idle connections opened", opened, idleConnsWant)
		}
		// They are still open, and the server still answers.
		alive := 0
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
				alive++
			}
		}
		t.Logf("%d of %d idle connections still open after the measurement", alive, len(conns))
	})

	t.Run("event_streams", func(t *testing.T) {
		// Many event streams, each on a workflow of its own that does not
		// exist: each is answered 404 and takes no slot (it used to hold a
		// slot and a goroutine each, until 1,024 of them refused every
		// runtime its stream). TestReaderAttacks has the streams on real
		// workflows.
		var notFound atomic.Int64
		e.attack(t, fmt.Sprintf("%d unknown-workflow streams", eventStreams), baseline, nil, func(ctx context.Context) {
			start := time.Now()
			notFound.Store(int64(unknownStreams(ctx, addr, eventStreams)))
			fig := fmt.Sprintf("%-26s %d of %d answered 404 in %v", "  streams", notFound.Load(), eventStreams, time.Since(start).Round(100*time.Millisecond))
			t.Log(fig)
			e.figures = append(e.figures, fig)
		})
		if notFound.Load() < eventStreams {
			t.Errorf("only %d of %d streams on unknown workflows were answered 404", notFound.Load(), eventStreams)
		}
	})

	// The server survived everything: it appends, and shuts down cleanly.
	final := e.measureHonest(attackWindow)
	if final.n == 0 || len(final.errs) > 0 {
		t.Errorf("after the attacks: %d appends, errors %v", final.n, firstErr(final.errs))
	}
	fig = fmt.Sprintf("%-26s honest %7.1f appends/s, server RSS %d kB (peak %d kB)", "after all attacks", final.rate(),
		procStatusKB(e.sp.pid(), "VmRSS"), procStatusKB(e.sp.pid(), "VmHWM"))
	t.Log(fig)
	e.figures = append(e.figures, fig)
	if err := e.sp.terminate(); err != nil {
		t.Errorf("graceful shutdown: %v\n%s", err, e.sp.logTail())
	}
	t.Log("summary:\n" + strings.Join(e.figures, "\n"))
}

// TestSlowBodiesAtTheInFlightCap: an append's body is read before it takes
// one of --max-inflight slots (and under its own deadline), so more slow
// senders than slots cannot stop honest appends. It runs a server with
// --max-inflight 32 against 48 slow bodies, each from a client address of
// its own (so that none is refused by its client's own budget, as
// TestSlowBodiesPerClient in package server has), and requires honest
// appends to be accepted all the while, and the server to stay up.
func TestSlowBodiesAtTheInFlightCap(t *testing.T) {
	if testing.Short() {
		t.Skip("abuse test: skipped in -short mode")
	}
	t.Parallel() // it mostly waits for the read timeout; TestAbuse runs alone
	const slots, slow = 32, 48
	e := newAbuseEnv(t, "--max-inflight", fmt.Sprint(slots))
	addr := e.sp.addr
	a := e.honest[0]
	rt := client.NewRuntime(newClient(t, e.sp.url, e.vkey, -1), a.priv, a.name, nil) // no retries: see every 503
	once := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := rt.Receipt(ctx, &statement.ReceiptDoc{ReceiptID: client.NewID("honest"), Workflow: a.wf, StepID: "step",
			Action: "act", Target: "t/x", AuthorizationRef: a.grant, Result: statement.ResultPending, ScopeHash: a.hash})
		return err
	}
	if err := once(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dribble(ctx, attackerHost(i), addr, "POST /v1/entries HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 100000\r\n\r\n{")
		}()
	}
	time.Sleep(2 * time.Second)
	ok, overloaded, other := 0, 0, 0
	for time.Since(start) < serverReadTimeout-3*time.Second {
		err := once()
		var he *client.HTTPError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &he) && he.Status == http.StatusServiceUnavailable:
			overloaded++
		default:
			other++
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("with %d slow bodies and --max-inflight %d: %d appends accepted, %d answered 503 overloaded, %d other errors",
		slow, slots, ok, overloaded, other)
	if ok == 0 || overloaded > 0 || other > 0 {
		t.Errorf("slow bodies held append slots: %d accepted, %d overloaded, %d other errors", ok, overloaded, other)
	}
	// The read timeout ends the slow bodies; appends must then flow again.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(serverReadTimeout + cutSlack + 10*time.Second):
		cancel()
		<-done
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := once()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends did not recover after the slow bodies were cut: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("appends flow again %v after the slow bodies started", time.Since(start).Round(100*time.Millisecond))
	if err := healthy(e.sp.url); err != nil {
		t.Fatal(err)
	}
}

// statusCounts counts answers by status (or transport error).
type statusCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (s *statusCounts) add(k string) { s.mu.Lock(); s.m[k]++; s.mu.Unlock() }
func (s *statusCounts) status(code int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[fmt.Sprint(code)]
}
func (s *statusCounts) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.m {
		n += v
	}
	return n
}

func (s *statusCounts) log(t *testing.T, e *abuseEnv, what string) {
	s.mu.Lock()
	fig := fmt.Sprintf("%-26s %v", what, s.m)
	s.mu.Unlock()
	t.Log(fig)
	e.figures = append(e.figures, fig)
}

// require fails unless every answer has an allowed status; transport
// errors are allowed only if errorsOK (a server may close a connection
// whose body it refused before the client has sent it all).
func (s *statusCounts) require(t *testing.T, allowed map[int]bool, errorsOK bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.m {
		var code int
		if _, err := fmt.Sscan(k, &code); err != nil {
			if !errorsOK {
				t.Errorf("%d requests failed in transport (%s)", v, k)
			}
			continue
		}
		if !allowed[code] {
			t.Errorf("%d answers %d, want only %v", v, code, allowed)
		}
		n += v
	}
	if n == 0 {
		t.Errorf("no answer at all")
	}
}

// flood has workers POST body(i) for i = 0, 1, ... until ctx ends, and
// counts the answers. Each worker has its own connection, from a client
// address of its own (attackerHost). A request
// started before ctx ends is carried to its answer, so that every
// submission the server may have logged is counted.
func flood(ctx context.Context, workers int, url string, body func(i int) []byte, counts *statusCounts, seen ...func(i, status int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 30 * time.Second, Transport: attackerTransport(attackerHost(w), 1)}
			defer hc.CloseIdleConnections()
			for n := 0; n < 1_000_000 && ctx.Err() == nil; n++ {
				i := int(next.Add(1) - 1)
				req, _ := http.NewRequest(http.MethodPost, url+api.PathEntries, bytes.NewReader(body(i)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req) // bounded by the client's timeout
				if err != nil {
					counts.add("transport error")
					continue
				}
				io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				counts.add(fmt.Sprint(resp.StatusCode))
				for _, f := range seen {
					f(i, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
}

// openIdle opens up to n keep-alive connections, each after one complete
// request, from the attackers' addresses (attackerHost), and returns them
// open.
func openIdle(addr string, n int) []net.Conn {
	var mu sync.Mutex
	var conns []net.Conn
	var next atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= n && time.Now().Before(deadline); i = int(next.Add(1)) {
				c, err := dialFrom(attackerHost(i), addr)
				if err != nil {
					continue
				}
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
					c.Close()
					continue
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					c.Close()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				c.SetDeadline(time.Time{})
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return conns
}

// unknownStreams asks for n event streams, each on a workflow of its own
// that does not exist, and returns how many were answered 404.
func unknownStreams(ctx context.Context, addr string, n int) int {
	var notFound, next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1))
				if i > n {
					return
				}
				c, status, err := subscribe(2+i%200, addr, fmt.Sprintf("wf_watch_%d", i), 0)
				if c != nil {
					c.Close()
				}
				if err == nil && status == http.StatusNotFound {
					notFound.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(notFound.Load())
}
