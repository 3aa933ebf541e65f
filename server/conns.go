package server

import (
	"errors"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// # New connections of a client at its body budget
//
// Each connection the HTTP server takes costs it a goroutine and the
// reading, parsing and answering of its request, whatever the answer: a
// body refused its reading slot still costs about 140 µs of CPU and a
// dozen system calls. A client that opens thousands of connections at
// once (4,200 slow bodies, of which its budget holds MaxReadingPerAddr)
// thus fills the Go scheduler's run queue with hundreds of connection
// goroutines, and every step of an honest append (the sequencer, the
// commit, the answer) waits behind all of them: measured, 408 runnable
// goroutines on average and 0.1–1.4 s per honest append on two cores,
// though the server used only what CPU the machine gave it.
//
// So the listener judges each new connection by its client (the client
// key of clients.go) before the HTTP server sees it: while the client
// holds its whole budget of bodies being read (counting, as bodies, its
// connections passed on that have not sent a byte yet: a burst of them
// all arrive before any has taken a slot), its new connection is held
// unread (no goroutine, no read, no answer: an open file and a few bytes),
// passed on once one of the client's bodies is done (one for each slot
// freed), and closed unread after the header timeout (ReadHeaderTimeout:
// a held connection's client sees a server slow to read its request,
// then a close). Connections of every
// other client pass at once. At most MaxReading connections are held; past
// that a new one of a client at its budget is closed at once.

// gateListener holds the new connections of clients at their body
// budget (see above).
type gateListener struct {
	net.Listener
	cl    *clients
	max   int           // bodies being read per client (MaxReadingPerAddr)
	wait  time.Duration // how long a connection is held at most
	limit int           // connections held at most

	out  chan net.Conn // connections for the HTTP server
	done chan struct{} // closed once the listener failed or was closed
	err  error         // set before done is closed

	mu    sync.Mutex
	held  []heldConn        // guarded by mu; oldest first
	fresh map[string]int    // guarded by mu: connections passed on that have read nothing yet, per client
	addrs map[string]string // guarded by mu: the client of each of them, by remote address
	// nfresh is len(addrs), read without mu by connState: a request on a
	// connection already started (nearly all of them) costs no lock and
	// no formatting of its address.
	nfresh atomic.Int64
	kick   chan struct{}
}

type heldConn struct {
	c   net.Conn
	key string
	at  time.Time
}

func newGateListener(ln net.Listener, cl *clients, max int, wait time.Duration, limit int) *gateListener {
	g := &gateListener{Listener: ln, cl: cl, max: max, wait: wait, limit: limit,
		out: make(chan net.Conn), done: make(chan struct{}), kick: make(chan struct{}, 1),
		fresh: map[string]int{}, addrs: map[string]string{}}
	go g.accept()
	go g.release()
	return g
}

// Accept returns the next connection the HTTP server may serve.
func (g *gateListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.out:
		return c, nil
	case <-g.done:
		return nil, g.err
	}
}

// free is how many more bodies key may start: its budget less the bodies
// it has being read and the connections passed on that have not sent a
// byte yet (each may be one more body). g.mu must be held.
func (g *gateListener) free(key string) int {
	return g.max - g.cl.reading.count(key) - g.fresh[key]
}

// pass hands c, a connection of key, to the HTTP server.
func (g *gateListener) pass(c net.Conn, key string) {
	addr := c.RemoteAddr().String()
	g.mu.Lock()
	g.fresh[key]++
	g.addrs[addr] = key
	g.nfresh.Store(int64(len(g.addrs)))
	g.mu.Unlock()
	select {
	case g.out <- c:
	case <-g.done:
		g.started(addr)
		c.Close()
	}
}

// started counts the connection from addr as no longer fresh.
func (g *gateListener) started(addr string) {
	g.mu.Lock()
	key, ok := g.addrs[addr]
	if ok {
		delete(g.addrs, addr)
		g.nfresh.Store(int64(len(g.addrs)))
		if g.fresh[key]--; g.fresh[key] <= 0 {
			delete(g.fresh, key)
		}
	}
	g.mu.Unlock()
	if ok {
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
}

// connState is the HTTP server's ConnState hook: a connection that read
// the first byte of its request, or closed, is no longer fresh. (Idle
// comes only after a request, which made the connection active first.)
func (g *gateListener) connState(c net.Conn, st http.ConnState) {
	if st == http.StateNew || st == http.StateIdle || g.nfresh.Load() == 0 {
		return
	}
	g.started(c.RemoteAddr().String())
}

// accept takes connections from the kernel: it passes on at once those of
// clients below their body budget and holds the others.
func (g *gateListener) accept() {
	var backoff time.Duration
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // as net/http does: EMFILE and the like pass
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			g.err = err
			close(g.done)
			return
		}
		backoff = 0
		key := connKeyOf(c)
		g.mu.Lock()
		free := g.free(key)
		g.mu.Unlock()
		if free > 0 {
			g.pass(c, key)
			// Let the connections just passed on reach their request (and
			// take their reading slots) before the next one is judged.
			runtime.Gosched()
			continue
		}
		g.mu.Lock()
		if len(g.held) >= g.limit {
			g.mu.Unlock()
			c.Close()
			continue
		}
		g.held = append(g.held, heldConn{c, key, time.Now()})
		g.mu.Unlock()
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
}

// release passes on held connections, oldest first, as their clients get
// below their budget (one for each slot free, then it looks again), and
// closes those held for longer than wait.
func (g *gateListener) release() {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-g.kick:
		case <-g.done:
			g.closeHeld()
			return
		}
		for left := true; left; {
			var pass, drop []heldConn
			avail := map[string]int{} // bodies each client may still start
			g.mu.Lock()
			now := time.Now()
			keep := g.held[:0]
			for _, h := range g.held {
				n, ok := avail[h.key]
				if !ok {
					n = g.free(h.key)
				}
				switch {
				case now.Sub(h.at) > g.wait:
					drop = append(drop, h)
				case n > 0 && peerGone(h.c):
					// Its client closed it meanwhile (an attacker that
					// left leaves thousands): serving it would cost a
					// goroutine and a read for nothing.
					drop = append(drop, h)
				case n > 0:
					// As many as the client has slots free, so that one
					// freed slot does not let all of them through.
					pass = append(pass, h)
					n--
				default:
					keep = append(keep, h)
				}
				avail[h.key] = n
			}
			clear(g.held[len(keep):])
			g.held = keep
			left = len(keep) > 0
			g.mu.Unlock()
			for _, h := range drop {
				h.c.Close()
			}
			for _, h := range pass {
				g.pass(h.c, h.key)
			}
			if left {
				select {
				case <-tick.C:
				case <-g.done:
					g.closeHeld()
					return
				}
			}
		}
	}
}

func (g *gateListener) closeHeld() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.held {
		h.c.Close()
	}
	g.held = nil
}

// connKeyOf is the client key of a connection (clientKey of its requests).
func connKeyOf(c net.Conn) string {
	a := c.RemoteAddr().String()
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return keyOfAddr(a)
	}
	return keyOfAddr(host)
}
