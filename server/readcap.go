package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/custodylog/custody/server/api"
)

// # What readers may take
//
// Appends and reads share two cores. Reads whose cost grows with what they
// return (bundles, workflow pages, an event stream catching up) each take
// a heavy-read token (Options.MaxHeavyReads of them, default half the
// cores): past that they wait, for at most HeavyReadWait, then get 503
// with Retry-After. So all readers together use at most that many cores'
// worth of work and that many bundles' worth of memory (a bundle holds at
// most ledger.MaxBundleEntries entries), and the sequencer and the
// signature workers keep theirs.
//
// Event streams are capped in total (MaxStreams) and per client address
// (MaxStreamsPerAddr open at once, StreamOpensPerAddr new ones a second
// with MaxStreamsPerAddr of them at once), and a stream on a workflow that does not exist is
// answered 404: idle streams from one address, or on made-up workflows,
// cannot take the slots a runtime needs for the workflow it holds a grant
// in. Entries are encoded once for every stream that sends them (a small
// shared cache), and a stream stops working as soon as its client goes.

// A heavy read holds its token while it builds its answer, not while the
// client takes it: the answer's bytes then count against the budget of
// large answers being sent (Options.MaxAnswerBytes), and a client that
// does not read holds that memory (until the server's WriteTimeout), never
// the token a runtime's stream needs to catch up.

// answerBudget bounds the bytes of large answers being written at once.
type answerBudget struct {
	mu   sync.Mutex
	max  int
	used int // guarded by mu
}

// take counts n more bytes unless the budget would pass max; a lone
// answer always fits, whatever its size.
func (b *answerBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *answerBudget) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// writeLarge writes a large answer built under a heavy-read token
// (released first), within the answer budget: past it, 503.
func (s *Server) writeLarge(w http.ResponseWriter, release func(), contentType string, body []byte) {
	release()
	if !s.answers.take(len(body)) {
		s.m.heavyRefused.Inc()
		s.unavailable(w, api.CodeOverloaded, "too many large answers being sent at once; retry later")
		return
	}
	defer s.answers.release(len(body))
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// heavyRead takes a heavy-read token, waiting at most HeavyReadWait; it
// answers 503 itself and returns false when none came.
func (s *Server) heavyRead(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	select {
	case s.heavy <- struct{}{}:
		return func() { <-s.heavy }, true
	default:
	}
	t := time.NewTimer(s.opts.HeavyReadWait)
	defer t.Stop()
	select {
	case s.heavy <- struct{}{}:
		return func() { <-s.heavy }, true
	case <-t.C:
	case <-r.Context().Done():
		return nil, false
	}
	s.m.heavyRefused.Inc()
	s.unavailable(w, api.CodeOverloaded, "too many bundle, workflow and catch-up reads at once; retry later")
	return nil, false
}

// heavyWait takes a heavy-read token for a stream, waiting as long as it
// takes (or until ctx ends).
func (s *Server) heavyWait(ctx context.Context) (release func(), ok bool) {
	select {
	case s.heavy <- struct{}{}:
		return func() { <-s.heavy }, true
	case <-ctx.Done():
		return nil, false
	}
}

// addrStreams counts open event streams per client address, and the
// streams each address opens: a client that opens and closes streams as
// fast as it can (each costs the server a request, a lookup and a first
// page) never holds many at once, so the cap on open streams alone does
// not bound the work it makes.
type addrStreams struct {
	mu    sync.Mutex
	n     map[string]int          // guarded by mu
	opens map[string]*streamOpens // guarded by mu
}

// streamOpens is one address's bucket of new-stream tokens.
type streamOpens struct {
	tokens float64
	at     time.Time
}

// maxOpenBuckets bounds the addresses whose stream openings are tracked;
// past it, those whose buckets have filled again are forgotten, and while
// none has, a new address gets no token (503, retry).
const maxOpenBuckets = 4096

// open takes one of addr's new-stream tokens: it has burst of them and
// gains rate a second. A rate of zero or less takes none.
func (a *addrStreams) open(addr string, now time.Time, rate float64, burst int) bool {
	if rate <= 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opens == nil {
		a.opens = map[string]*streamOpens{}
	}
	full := func(o *streamOpens) float64 {
		return min(float64(burst), o.tokens+now.Sub(o.at).Seconds()*rate)
	}
	o := a.opens[addr]
	if o == nil {
		if len(a.opens) >= maxOpenBuckets {
			for k, v := range a.opens {
				if full(v) >= float64(burst) {
					delete(a.opens, k)
				}
			}
			if len(a.opens) >= maxOpenBuckets {
				return false
			}
		}
		o = &streamOpens{tokens: float64(burst), at: now}
		a.opens[addr] = o
	}
	o.tokens, o.at = full(o), now
	if o.tokens < 1 {
		return false
	}
	o.tokens--
	return true
}

// take counts one more stream from addr, unless it has max already.
func (a *addrStreams) take(addr string, max int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	if a.n[addr] >= max {
		return false
	}
	a.n[addr]++
	return true
}

func (a *addrStreams) release(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[addr]--; a.n[addr] <= 0 {
		delete(a.n, addr)
	}
}

// eventCache keeps recently encoded stream events by index: entries never
// change, so every stream on a workflow sends the same bytes, encoded once.
type eventCache struct {
	mu    sync.Mutex
	max   int
	byIdx map[uint64][]byte // guarded by mu
	order []uint64          // guarded by mu: insertion order, for eviction
}

func (c *eventCache) get(i uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byIdx[i]
}

func (c *eventCache) put(i uint64, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byIdx == nil {
		c.byIdx = map[uint64][]byte{}
	}
	if _, ok := c.byIdx[i]; ok {
		return
	}
	for len(c.order) >= c.max {
		delete(c.byIdx, c.order[0])
		c.order = c.order[1:]
	}
	c.byIdx[i] = b
	c.order = append(c.order, i)
}
