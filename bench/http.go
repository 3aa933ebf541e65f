package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	var wg sync.WaitGroup
	var acc, den atomic.Int64
	var errOnce sync.Once
	var firstErr error
	lat := make([][]time.Duration, len(ab.chains))
	pend := make([][]time.Duration, len(ab.chains)) // accepted pending receipts
	total := ab.total()
	s0 := ab.w.l.Stats()
	allocs0 := mallocs()
	cpu0 := cpuTime()
	start := time.Now()
	for ci, c := range ab.chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := dialHTTP(ctx, url)
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			defer conn.Close()
			post := func(env []byte, pending bool) error {
				t0 := time.Now()
				status, body, err := conn.post(env)
				if err != nil {
					return err
				}
				d := time.Since(t0)
				lat[ci] = append(lat[ci], d)
				if pending && status == http.StatusOK {
					pend[ci] = append(pend[ci], d)
				}
				switch status {
				case http.StatusOK:
					acc.Add(1)
				case http.StatusForbidden:
					den.Add(1)
				default:
					return fmt.Errorf("POST %s: %d: %s", url, status, bytes.TrimSpace(body))
				}
				return nil
			}
			r := 0
			for i, env := range c.envs {
				if i%19 == 18 && r < len(c.rogue) {
					if err := post(c.rogue[r], false); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					r++
				}
				// envs alternate pending receipts and their outcomes.
				if err := post(env, i%2 == 0); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
			for ; r < len(c.rogue); r++ {
				if err := post(c.rogue[r], false); err != nil {
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
	var pall []time.Duration
	for _, l := range pend {
		pall = append(pall, l...)
	}
	pp50, pp99 := percentiles(pall)
	r := AppendResult{Submissions: total, Accepted: int(acc.Load()), Denied: int(den.Load()), Inflight: len(ab.chains),
		Seconds: elapsed.Seconds(), PerSec: float64(total) / elapsed.Seconds(), P50Ms: p50, P99Ms: p99, CPUUs: cpuPerOp(cpu0, total),
		Allocs: allocsPerOp(allocs0, total), PendingP50Ms: pp50, PendingP99Ms: pp99}
	r.withCommits(s0, ab.w.l.Stats())
	return r, nil
}

// httpConn is a minimal HTTP/1.1 client on one persistent connection, one
// request at a time, as a load generator such as wrk is: the request is one
// write and the answer is read on the calling goroutine, so the figure is
// the server's, not the cost of net/http's client transport (two more
// goroutines and their wake-ups per request) sharing its cores.
type httpConn struct {
	conn net.Conn
	br   *bufio.Reader
	head []byte // the request line and headers up to Content-Length's value
	buf  []byte
}

// dialHTTP connects to the host of url (http://host:port/path) for POSTs
// to its path.
func dialHTTP(ctx context.Context, url string) (*httpConn, error) {
	rest, ok := strings.CutPrefix(url, "http://")
	if !ok {
		return nil, fmt.Errorf("%s: want http://host:port/path", url)
	}
	host, path, _ := strings.Cut(rest, "/")
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: ", path, host)
	return &httpConn{conn: conn, br: bufio.NewReaderSize(conn, 16<<10), head: []byte(head)}, nil
}

// post sends body and returns the answer's status and body.
func (c *httpConn) post(body []byte) (int, []byte, error) {
	c.buf = append(c.buf[:0], c.head...)
	c.buf = strconv.AppendInt(c.buf, int64(len(body)), 10)
	c.buf = append(c.buf, "\r\n\r\n"...)
	c.buf = append(c.buf, body...)
	if _, err := c.conn.Write(c.buf); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, nil, err
	}
	if resp.Close {
		return 0, nil, fmt.Errorf("the server closed the connection after a %s answer: %s", resp.Status, bytes.TrimSpace(b))
	}
	return resp.StatusCode, b, nil
}

func (c *httpConn) Close() error { return c.conn.Close() }
