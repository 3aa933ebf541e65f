package server

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// # One budget per client
//
// What one client may hold (event streams open, new streams a second,
// append bodies being read) is counted per client key, across every log
// the process serves (NewLogs gives all its servers one clients), not per
// log: a server of several logs gives a client the same budget as a
// server of one.
//
// The client key is the IPv4 address, or the /64 of an IPv6 address: a
// single IPv6 host usually holds a whole /64 and can use any address in
// it, so per-address caps would give it 2^64 budgets. (An IPv4-mapped
// IPv6 address is its IPv4 address.)

// clients is what every client key holds, shared by the servers of one
// process.
type clients struct {
	streams addrStreams // open event streams and stream openings
	reading keyCount    // append bodies being read
	steps   keyCount    // streams a runtime opened for its own step, per (key, step)
}

// keyCount counts what each key holds.
type keyCount struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

// take counts one more for key, unless it holds max already.
func (c *keyCount) take(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	if c.n[key] >= max {
		return false
	}
	c.n[key]++
	return true
}

// count is what key holds now.
func (c *keyCount) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *keyCount) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// clientKey is the key a request's budget is counted under: its IPv4
// address, or the /64 of its IPv6 address.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return keyOfAddr(host)
}

func keyOfAddr(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if a.Is4() {
		// ParseAddr takes an IPv4 address only in its one written form,
		// so host is already the key: nothing to allocate per request.
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a.String()
	}
	return p.String()
}

// takeReading takes a body-reading slot for r: one of MaxReading shared
// by everyone, and one of MaxReadingPerAddr of its client's, so that one
// client's slow bodies cannot take the slots every other client needs.
// The message says which cap refused it; a refused request's connection
// is closed after the answer, its body never read (Go's server would
// otherwise read it, as slowly as it comes, before answering or after).
func (s *Server) takeReading(w http.ResponseWriter, r *http.Request) (release func(), refused string) {
	key := clientKey(r)
	refuse := func(why string) (func(), string) {
		closeUnread(w)
		return nil, why
	}
	if !s.cl.reading.take(key, s.opts.MaxReadingPerAddr) {
		return refuse("too many appends being received from " + key + "; retry later")
	}
	select {
	case s.reading <- struct{}{}:
	default:
		s.cl.reading.release(key)
		return refuse("too many appends being received; retry later")
	}
	return func() { <-s.reading; s.cl.reading.release(key) }, ""
}
