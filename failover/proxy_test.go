package failover

import (
	"bytes"
	be "encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// pgProxy is a TCP proxy between one custody server and PostgreSQL that
// can hold a transaction's COMMIT and cut every connection while keeping
// the sockets open: the faults of a leader frozen between its batch and
// COMMIT, and of a partition the kernel does not report.
type pgProxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	armed  bool          // the next COMMIT is held
	held   chan struct{} // closed when a COMMIT is held
	frozen bool          // nothing passes, in either direction
	hold   bool          // the held COMMIT waits
	conns  []net.Conn
}

// newPGProxy starts a proxy to the database of store and returns it with
// the store URL that goes through it.
func newPGProxy(t *testing.T, store string) (*pgProxy, string) {
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{t: t, ln: ln, target: u.Host}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.frozen, p.hold = false, false
		for _, c := range p.conns {
			c.Close()
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.upstream(c, up)
		go p.downstream(c, up)
	}
}

// arm makes the proxy hold the next COMMIT; the returned channel is
// closed once it holds one.
func (p *pgProxy) arm() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.hold, p.held = true, true, make(chan struct{})
	return p.held
}

// freeze stops all traffic (the sockets stay open); thaw resumes it and
// lets a held COMMIT go.
func (p *pgProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *pgProxy) thaw() {
	p.mu.Lock()
	p.frozen, p.hold, p.armed = false, false, false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// wait blocks while the proxy is frozen (or, for a held COMMIT, while it
// holds it).
func (p *pgProxy) wait(commit bool) {
	p.mu.Lock()
	for p.frozen || (commit && p.hold) {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

// upstream copies the client's messages to the database, message by
// message, holding a COMMIT when armed.
func (p *pgProxy) upstream(c, up net.Conn) {
	defer up.Close()
	defer c.Close()
	// The startup message has no type byte.
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return
	}
	msg := make([]byte, be.BigEndian.Uint32(n[:])-4)
	if _, err := io.ReadFull(c, msg); err != nil {
		return
	}
	if _, err := up.Write(append(n[:], msg...)); err != nil {
		return
	}
	for {
		var h [5]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		body := make([]byte, be.BigEndian.Uint32(h[1:])-4)
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		commit := false
		if h[0] == 'Q' && bytes.HasPrefix(bytes.ToLower(body), []byte("commit")) {
			p.mu.Lock()
			if p.armed {
				p.armed, commit = false, true
				close(p.held)
			}
			p.mu.Unlock()
		}
		p.wait(commit)
		if _, err := up.Write(append(h[:], body...)); err != nil {
			return
		}
	}
}

// downstream copies the database's answers back, unless frozen.
func (p *pgProxy) downstream(c, up net.Conn) {
	defer c.Close()
	defer up.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.wait(false)
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
