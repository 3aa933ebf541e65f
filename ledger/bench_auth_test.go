package ledger

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// verifyCeiling measures parallel Ed25519 verifies/s on all cores for d:
// the hardware ceiling authorised appends are compared with.
func verifyCeiling(d time.Duration) float64 {
	pub, priv, _ := sign.GenerateKey()
	env, _ := sign.Sign(priv, "receipt", []byte(`{"x":1}`))
	raw, _ := env.Canonical()
	p, _ := sign.ParseEnvelope(raw)
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < runtime.GOMAXPROCS(0); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				for i := 0; i < 64; i++ {
					if p.Verify(pub) != nil {
						panic("verify failed")
					}
				}
				n.Add(64)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// authBench is a ledger with chains of depth 3 and pre-signed submissions.
type authBench struct {
	w      *world
	agents [][][]byte // per submitting agent, its envelopes in seq order
	denied int
}

// newAuthBench builds 16 depth-3 chains and pre-signs n submissions: each
// leaf agent alternates pending receipts (reserving budget) and their
// outcomes; 1 in 20 submissions comes from a rogue agent outside its scope
// and is denied.
func newAuthBench(tb testing.TB, n int) *authBench {
	w := newWorld(tb, Options{DenialsPerMinute: 1 << 30, DenialBurst: 1 << 30})
	ab := &authBench{w: w}
	alice := newActor(tb, "user:alice")
	w.enroll(alice)
	const chains = 16
	var leaves, rogues []*actor
	var auth, hashes []string
	for k := 0; k < chains; k++ {
		wf := fmt.Sprintf("wf_bench_%d", k)
		pl, co, lf := newActor(tb, fmt.Sprintf("agent:p%d", k)), newActor(tb, fmt.Sprintf("agent:p%d/c", k)), newActor(tb, fmt.Sprintf("agent:p%d/c/l", k))
		c := w.confirm(alice, "bc"+wf, grant(pl, wf, []string{"shop/*"}, []string{"buy", "sell"}, nil, map[string]int64{"usd": 1 << 50}, 86400))
		w.must(alice, c, authority.Accepted, "")
		d1 := w.delegate(pl, "bd1"+wf, "bc"+wf, c.ScopeHash, grant(co, wf, []string{"shop/*"}, []string{"buy"}, nil, map[string]int64{"usd": 1 << 49}, 80000))
		w.must(pl, d1, authority.Accepted, "")
		d2 := w.delegate(co, "bd2"+wf, "bd1"+wf, d1.ScopeHash, grant(lf, wf, []string{"shop/a"}, []string{"buy"}, nil, map[string]int64{"usd": 1 << 48}, 70000))
		w.must(co, d2, authority.Accepted, "")
		leaves, auth, hashes = append(leaves, lf), append(auth, "bd2"+wf), append(hashes, d2.ScopeHash)
		rg := newActor(tb, fmt.Sprintf("agent:rogue%d", k))
		rc := w.confirm(alice, "brc"+wf, grant(rg, wf, []string{"shop/b"}, []string{"look"}, nil, nil, 86400))
		w.must(alice, rc, authority.Accepted, "")
		rogues = append(rogues, rg)
	}
	per := n / chains
	for k := 0; k < chains; k++ {
		wf := fmt.Sprintf("wf_bench_%d", k)
		var envs, rogueEnvs [][]byte
		lf := leaves[k]
		for i := 0; len(envs)+len(rogueEnvs) < per; i++ {
			if i%20 == 19 {
				rg := rogues[k]
				r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(w.clock.Now()),
					Log: testOrigin, Actor: rg.name, Seq: rg.seq + 1}, ReceiptID: fmt.Sprintf("rogue_%d_%d", k, i), Workflow: wf,
					StepID: "s", Action: "buy", Target: "shop/a", AuthorizationRef: "brc" + wf, Result: statement.ResultPending, ScopeHash: hashes[k]}
				_, raw, err := statement.Sign(rg.priv, r)
				if err != nil {
					tb.Fatal(err)
				}
				rogueEnvs = append(rogueEnvs, raw)
				continue
			}
			id := fmt.Sprintf("br_%d_%d", k, i)
			var st statement.Statement
			if i%2 == 0 {
				st = w.pending(lf, id, wf, auth[k], hashes[k], "s", "buy", "shop/a", map[string]int64{"usd": 3})
			} else {
				st = &statement.ReceiptDoc{Header: w.header(lf, statement.Receipt), ReceiptID: id, Workflow: wf, StepID: "s",
					Action: "buy", Target: "shop/a", AuthorizationRef: auth[k], Result: statement.ResultSuccess, ScopeHash: hashes[k],
					PendingRef: fmt.Sprintf("br_%d_%d", k, i-1), Consumed: map[string]int64{"usd": 3}}
			}
			_, raw, err := statement.Sign(lf.priv, st)
			if err != nil {
				tb.Fatal(err)
			}
			envs = append(envs, raw)
		}
		ab.agents = append(ab.agents, envs, rogueEnvs)
		ab.denied += len(rogueEnvs)
	}
	return ab
}

// run submits every agent's envelopes, each agent pipelining up to window
// of its own in seq order, and returns accepted and denied counts.
func (ab *authBench) run(tb testing.TB, window int) (acc, den int64) {
	var wg sync.WaitGroup
	var a, d atomic.Int64
	for _, envs := range ab.agents {
		wg.Add(1)
		go func(envs [][]byte) {
			defer wg.Done()
			ctx := context.Background()
			var q []*Pending
			drain := func() {
				res, err := q[0].Wait(ctx)
				q = q[1:]
				switch {
				case err != nil:
					tb.Error(err)
				case res.Verdict == authority.Accepted:
					a.Add(1)
				default:
					d.Add(1)
				}
			}
			for _, e := range envs {
				if len(q) == window {
					drain()
				}
				p, err := ab.w.l.Submit(ctx, e)
				if err != nil {
					tb.Error(err)
					return
				}
				q = append(q, p)
			}
			for len(q) > 0 {
				drain()
			}
		}(envs)
	}
	wg.Wait()
	return a.Load(), d.Load()
}

// BenchmarkAuthorizedAppends measures durable appends of receipts under
// depth-3 chains, with their signatures verified and every authority
// check on, against the parallel Ed25519 verify ceiling measured in the
// same run. ns/op is per submission.
func BenchmarkAuthorizedAppends(b *testing.B) {
	ceiling := verifyCeiling(time.Second)
	ab := newAuthBench(b, max(b.N, 32))
	b.ResetTimer()
	acc, den := ab.run(b, 256)
	b.StopTimer()
	if int(den) != ab.denied || acc+den < int64(b.N)-32 {
		b.Fatalf("accepted %d, denied %d (want %d denied)", acc, den, ab.denied)
	}
	rate := float64(acc+den) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "appends/s")
	b.ReportMetric(ceiling, "verifies/s")
	b.ReportMetric(rate/ceiling, "ratio")
}
