package server

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/custodylog/custody/ledger"
)

// # How a commit reaches event streams
//
// The cost of a commit must not depend on how many streams watch, nor on
// what their clients do. So a commit never touches a stream:
//
//   - Each workflow that has open streams has one topic. The topic alone
//     subscribes to the ledger (WatchWorkflow), so a commit wakes one
//     goroutine per workflow it concerns, not one per stream. The topic
//     encodes the commit's new entries once and appends them to its ring
//     of recent events, then wakes its streams (one channel close).
//   - Each stream's own goroutine copies the events after its cursor out
//     of the ring and writes them, at most once every streamFlushEvery:
//     a busy workflow's events go out in batches, so the writes a stream
//     costs per second are bounded, whatever the commit rate.
//   - A write has a deadline (Options.StreamWriteTimeout). A stream that
//     falls further behind than its topic keeps (Options.StreamLag events,
//     or the hub's byte budget) is cut: told to resume with Last-Event-ID
//     from its last entry when the connection can still take it, its
//     blocked write ended at once otherwise. A client that does not read
//     holds its goroutine and the bytes its socket buffers take (the send
//     buffer is set small, streamSendBuffer), never a copy of the events.
//   - Every topic's events count against one budget (Options.StreamBuffer
//     bytes, streamHeldMax events): past it the oldest events of all
//     topics are dropped first, and streams still needing them are cut.
//     So all streams together hold at most that much besides their
//     per-connection buffers.
//
// A stream that starts behind its topic (from a workflow's first entry,
// or a Last-Event-ID before the topic's ring) catches up from the store
// in pages, one heavy-read token a page (readcap.go), before it reads the
// ring.

// streamEvent is one entry encoded as a server-sent event.
type streamEvent struct {
	idx uint64
	b   []byte
}

// streamHeldMax bounds the events all topics hold together (besides the
// byte budget), so that a flood of tiny entries cannot grow the queue.
const streamHeldMax = 1 << 16

// hub is the server's set of topics.
type hub struct {
	s        *Server
	maxBytes int // Options.StreamBuffer
	lag      int // Options.StreamLag

	wg sync.WaitGroup // the topics' goroutines

	mu     sync.Mutex
	closed bool              // guarded by mu: the server is stopping
	topics map[string]*topic // guarded by mu
	held   []heldEvent       // guarded by mu: every event held, oldest first
	bytes  int               // guarded by mu: their size
}

// heldEvent names one event a topic holds, for the hub's budget.
type heldEvent struct {
	t   *topic
	idx uint64
	n   int
}

// topic is the ring of recent events of one workflow, and its streams.
type topic struct {
	wf   string
	stop context.CancelFunc

	mu     sync.Mutex
	evs    []streamEvent            // guarded by mu: in log order; never changed in place
	base   uint64                   // guarded by mu: every event of wf in (base, last] is in evs
	last   uint64                   // guarded by mu
	wake   chan struct{}            // guarded by mu: closed (and replaced) when events arrive
	subs   map[*subscriber]struct{} // guarded by mu
	closed bool                     // guarded by mu
	err    error                    // guarded by mu: the topic could not follow the log
}

// subscriber is one stream's place in its topic.
type subscriber struct {
	cursor atomic.Uint64 // the last index the stream has written (or had nothing to write up to)
	live   atomic.Bool   // it has caught up with the topic's ring once
	behind atomic.Bool   // it fell out of the ring: it must be cut
	kick   chan struct{} // closed when it is cut
	cut    func()        // ends a write blocked on the client
}

// join adds sub to wf's topic, creating the topic (and its goroutine) if
// it is the first.
func (h *hub) join(wf string, sub *subscriber) *topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.topics == nil {
		h.topics = map[string]*topic{}
	}
	t := h.topics[wf]
	if t == nil && h.closed {
		// The server is stopping: a topic that follows nothing, whose
		// streams end with the server.
		t = &topic{wf: wf, wake: make(chan struct{}), subs: map[*subscriber]struct{}{}, stop: func() {}}
	} else if t == nil {
		// Subscribe before reading the head: a commit after the head was
		// read is then in the ring, one before it in the store.
		commits, unwatch := h.s.l.WatchWorkflow(wf)
		var last uint64
		if size := h.s.l.Head().Size; size > 0 {
			last = size - 1
		}
		ctx, cancel := context.WithCancel(context.Background())
		t = &topic{wf: wf, base: last, last: last, wake: make(chan struct{}), subs: map[*subscriber]struct{}{},
			stop: func() { cancel(); unwatch() }}
		h.topics[wf] = t
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.follow(ctx, t, commits, last)
		}()
	}
	t.mu.Lock()
	t.subs[sub] = struct{}{}
	t.mu.Unlock()
	return t
}

// leave removes sub; the last stream of a topic ends it and frees its
// events.
func (h *hub) leave(t *topic, sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	delete(t.subs, sub)
	if len(t.subs) > 0 || t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	for _, e := range t.evs {
		h.bytes -= len(e.b)
	}
	t.evs = nil
	t.mu.Unlock()
	if h.topics[t.wf] == t {
		delete(h.topics, t.wf)
	}
	t.stop()
	// Its entries in h.held are skipped when they come up.
}

// close stops every topic and waits for their goroutines, so that none
// reads the store after the server has stopped (the ledger is closed
// next). Streams still open see no more events and end with the server.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	for _, t := range h.topics {
		t.stop()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// follow is a topic's goroutine: it turns the workflow's commits into
// events, each entry read and encoded once for every stream.
func (h *hub) follow(ctx context.Context, t *topic, commits <-chan ledger.Commit, last uint64) {
	for {
		var c ledger.Commit
		select {
		case <-ctx.Done():
			return
		case c = <-commits:
		}
		var idx []uint64
		if !c.Missed {
			for _, i := range c.Indexes[t.wf] {
				if i > last {
					idx = append(idx, i)
				}
			}
		} else {
			// A commit of this workflow went by unread: read what is new
			// from the store, once for every stream.
			for after, more := last, true; more; {
				release, ok := h.s.heavyWait(ctx)
				if !ok {
					return
				}
				var page []uint64
				var err error
				page, more, err = h.s.l.WorkflowRange(ctx, t.wf, after, streamPage)
				release()
				if err != nil {
					if ctx.Err() == nil {
						h.fail(t, err)
					}
					return
				}
				for _, i := range page {
					if i >= c.Size {
						more = false
						break
					}
					idx = append(idx, i)
					after = i
				}
			}
		}
		if len(idx) == 0 {
			continue
		}
		raw, err := h.s.encodeEvents(idx, c.Size)
		if err != nil {
			if ctx.Err() == nil {
				h.fail(t, err)
			}
			return
		}
		evs := make([]streamEvent, len(raw))
		for k, b := range raw {
			evs[k] = streamEvent{idx: idx[k], b: b}
		}
		if len(evs) > 0 {
			last = evs[len(evs)-1].idx
			h.add(t, evs)
		}
	}
}

// fail ends a topic that could not follow the log: its streams are told
// to resume, and a new stream starts a new topic.
func (h *hub) fail(t *topic, err error) {
	h.s.log.Warn("event streams: cannot follow the workflow", "workflow", t.wf, "err", err)
	h.mu.Lock()
	if h.topics[t.wf] == t {
		delete(h.topics, t.wf)
	}
	h.mu.Unlock()
	t.mu.Lock()
	t.err = err
	close(t.wake)
	t.wake = make(chan struct{})
	t.mu.Unlock()
}

// add appends a commit's events to t's ring and wakes its streams, then
// drops the oldest events past the topic's lag and the hub's budget,
// cutting the streams that still needed them.
func (h *hub) add(t *topic, evs []streamEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	for _, e := range evs {
		t.evs = append(t.evs, e)
		h.held = append(h.held, heldEvent{t: t, idx: e.idx, n: len(e.b)})
		h.bytes += len(e.b)
	}
	t.last = evs[len(evs)-1].idx
	close(t.wake)
	t.wake = make(chan struct{})
	dropped := false
	for len(t.evs) > h.lag {
		h.bytes -= len(t.evs[0].b)
		t.base = t.evs[0].idx
		t.evs = t.evs[1:]
		dropped = true
	}
	if dropped {
		t.cutBehind()
	}
	t.mu.Unlock()

	for len(h.held) > 0 && (h.bytes > h.maxBytes || len(h.held) > streamHeldMax) {
		e := h.held[0]
		h.held = h.held[1:]
		o := e.t
		o.mu.Lock()
		if !o.closed && len(o.evs) > 0 && o.evs[0].idx == e.idx {
			h.bytes -= e.n
			o.base = e.idx
			o.evs = o.evs[1:]
			o.cutBehind()
		}
		o.mu.Unlock()
	}
	if len(h.held) == 0 {
		h.held = nil // let the array go
	}
}

// cutBehind cuts every stream that was following the ring and now needs
// an event no longer in it. t.mu is held.
func (t *topic) cutBehind() {
	for sub := range t.subs {
		if sub.live.Load() && sub.cursor.Load() < t.base && !sub.behind.Swap(true) {
			close(sub.kick)
			sub.cut()
		}
	}
}

// since returns the events after the stream's cursor that t holds, the
// channel closed when more arrive, and whether the stream must first read
// from the store (its cursor is before the ring).
func (t *topic) since(cursor uint64) (evs []streamEvent, wake chan struct{}, fromStore bool, base uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return nil, nil, false, 0, t.err
	}
	if cursor < t.base {
		return nil, t.wake, true, t.base, nil
	}
	k := sort.Search(len(t.evs), func(k int) bool { return t.evs[k].idx > cursor })
	return t.evs[k:len(t.evs):len(t.evs)], t.wake, false, t.base, nil
}
