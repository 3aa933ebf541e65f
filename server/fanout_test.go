package server

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/custodylog/custody/ledger"
)

// newHubServer is a server on a fresh ledger with the given stream bounds.
func newHubServer(t *testing.T, lag, buffer int) *Server {
	t.Helper()
	l, err := ledger.Init(t.TempDir(), "test.example/custody", ledger.InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return New(l, Options{StreamLag: lag, StreamBuffer: buffer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func newSub(after uint64, cuts *int) *subscriber {
	sub := &subscriber{kick: make(chan struct{}), cut: func() { *cuts++ }}
	sub.cursor.Store(after)
	return sub
}

func events(from, n uint64, size int) []streamEvent {
	var out []streamEvent
	for i := from; i < from+n; i++ {
		out = append(out, streamEvent{idx: i, b: bytes.Repeat([]byte{'x'}, size)})
	}
	return out
}

// TestHubLagCut: a topic keeps StreamLag events; a stream that was
// following it and needs an event it dropped is cut (its blocked write
// ended, its wait kicked) once, and a stream still catching up from the
// store is not; since() sends the first back to the store, which the
// stream takes as having fallen behind.
func TestHubLagCut(t *testing.T) {
	s := newHubServer(t, 4, 1<<20)
	h := &s.hub
	var slowCuts, fastCuts, newCuts int
	slow, fast, fresh := newSub(0, &slowCuts), newSub(0, &fastCuts), newSub(0, &newCuts)
	tp := h.join("wf", slow)
	h.join("wf", fast)
	h.join("wf", fresh)
	base := tp.base
	slow.live.Store(true)
	fast.live.Store(true)
	h.add(tp, events(base+1, 3, 10))
	slow.cursor.Store(base + 1)
	fast.cursor.Store(base + 3)
	h.add(tp, events(base+4, 3, 10)) // 6 held, lag 4: base+1 and base+2 dropped
	if slowCuts != 1 || !slow.behind.Load() {
		t.Fatalf("a stream that needs a dropped event: cut %d times, behind %v", slowCuts, slow.behind.Load())
	}
	select {
	case <-slow.kick:
	default:
		t.Fatal("the cut stream was not kicked")
	}
	if fastCuts != 0 || newCuts != 0 {
		t.Fatalf("cut a stream that kept up (%d) or one catching up from the store (%d)", fastCuts, newCuts)
	}
	h.add(tp, events(base+7, 4, 10))
	if slowCuts != 1 {
		t.Fatalf("a stream was cut %d times", slowCuts)
	}
	// Held now: base+7..base+10. fast, at base+3, must go back to the
	// store (and, live, is then cut by its own goroutine).
	if _, _, fromStore, _, err := tp.since(fast.cursor.Load()); !fromStore || err != nil {
		t.Fatalf("since(%d): fromStore %v, %v", fast.cursor.Load(), fromStore, err)
	}
	evs, _, fromStore, _, _ := tp.since(base + 8)
	if fromStore || len(evs) != 2 || evs[0].idx != base+9 {
		t.Fatalf("since(base+8): %v events from %v, fromStore %v", len(evs), evs, fromStore)
	}
}

// TestHubBudget: the events all topics hold stay within StreamBuffer
// bytes, the oldest of any topic dropped first; the last stream of a topic
// frees its events.
func TestHubBudget(t *testing.T) {
	const size = 1000
	s := newHubServer(t, 1024, 10*size)
	h := &s.hub
	var cuts int
	a, b := newSub(0, &cuts), newSub(0, &cuts)
	ta, tb := h.join("wf_a", a), h.join("wf_b", b)
	a.live.Store(true)
	a.cursor.Store(ta.base)
	h.add(ta, events(ta.base+1, 6, size))
	h.add(tb, events(tb.base+100, 6, size))
	if h.bytes > 10*size {
		t.Fatalf("held %d bytes, budget %d", h.bytes, 10*size)
	}
	ta.mu.Lock()
	na := len(ta.evs)
	ta.mu.Unlock()
	tb.mu.Lock()
	nb := len(tb.evs)
	tb.mu.Unlock()
	if na != 4 || nb != 6 {
		t.Fatalf("held %d of wf_a's and %d of wf_b's events: the oldest (wf_a's) should go first", na, nb)
	}
	if cuts != 1 || !a.behind.Load() {
		t.Fatalf("the stream needing wf_a's dropped events: %d cuts", cuts)
	}
	h.leave(tb, b)
	if h.bytes != 4*size {
		t.Fatalf("after wf_b's last stream left: %d bytes held", h.bytes)
	}
	h.mu.Lock()
	_, ok := h.topics["wf_b"]
	h.mu.Unlock()
	if ok {
		t.Fatal("a topic with no streams is still there")
	}
	h.leave(ta, a)
	if h.bytes != 0 {
		t.Fatalf("with no streams: %d bytes held", h.bytes)
	}
	// Topics with no streams are gone; their queued entries are skipped.
	c := newSub(0, &cuts)
	tc := h.join("wf_c", c)
	for i := range 40 {
		h.add(tc, events(tc.base+1+uint64(i)*3, 3, size))
	}
	if h.bytes > 10*size || len(h.held) > 40*3 {
		t.Fatalf("held %d bytes, %d queued", h.bytes, len(h.held))
	}
	h.leave(tc, c)
}
