package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/server"
)

// HTTPAppends measures about n authorised durable appends over HTTP: a
// custody server (package server) on a loopback port in this process, and
// clients concurrent clients, one per depth-3 chain, each posting its leaf
// agent's receipts in seq order with its rogue agent's denied ones
// interleaved (1 in 20), one request in flight at a time. An append counts
// when the server answers 200 (accepted) or 403 (denied, a DENIAL logged):
// the server sends either only once the decision is durable under a signed
// checkpoint. The clients do not verify the answer's checkpoint and proof
// (a real client does, on its own cores; here it would take the server's).
func HTTPAppends(ctx context.Context, dir string, n, clients int) (AppendResult, error) {
	ab, err := newAuthBench(ctx, dir, n, clients)
	if err != nil {
		return AppendResult{}, fmt.Errorf("setting up chains: %w", err)
	}
	defer ab.w.l.Close()
	srv := server.New(ab.w.l, server.Options{MaxInFlight: max(1024, 2*clients),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return AppendResult{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, server.ServeOptions{}) }()
	res, err := ab.runHTTP(ctx, "http://"+ln.Addr().String()+"/v1/entries")
	stop()
	return res, errors.Join(err, <-served)
}

func (ab *authBench) runHTTP(ctx context.Context, url string) (AppendResult, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * len(ab.chains),
		MaxIdleConnsPerHost: 2 * len(ab.chains), IdleConnTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	var acc, den atomic.Int64
	var errOnce sync.Once
	var firstErr error
	lat := make([][]time.Duration, len(ab.chains))
	total := ab.total()
	s0 := ab.w.l.Stats()
	cpu0 := cpuTime()
	start := time.Now()
	for ci, c := range ab.chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post := func(env []byte) error {
				t0 := time.Now()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(env))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				lat[ci] = append(lat[ci], time.Since(t0))
				switch resp.StatusCode {
				case http.StatusOK:
					acc.Add(1)
				case http.StatusForbidden:
					den.Add(1)
				default:
					return fmt.Errorf("POST %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
				}
				return nil
			}
			r := 0
			for i, env := range c.envs {
				if i%19 == 18 && r < len(c.rogue) {
					if err := post(c.rogue[r]); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					r++
				}
				if err := post(env); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
			for ; r < len(c.rogue); r++ {
				if err := post(c.rogue[r]); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return AppendResult{}, firstErr
	}
	if int(den.Load()) != ab.denied || int(acc.Load()+den.Load()) != total {
		return AppendResult{}, fmt.Errorf("accepted %d and denied %d of %d submissions; want %d denied", acc.Load(), den.Load(), total, ab.denied)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	p50, p99 := percentiles(all)
	r := AppendResult{Submissions: total, Accepted: int(acc.Load()), Denied: int(den.Load()), Inflight: len(ab.chains),
		Seconds: elapsed.Seconds(), PerSec: float64(total) / elapsed.Seconds(), P50Ms: p50, P99Ms: p99, CPUUs: cpuPerOp(cpu0, total)}
	r.withCommits(s0, ab.w.l.Stats())
	return r, nil
}
