package ledger

import (
	"sync"
	"sync/atomic"
)

// Commit is one committed batch as Watch reports it.
type Commit struct {
	Head // the head the batch committed
	// From is the tree size before the batch: a subscriber that last saw a
	// head of this size has missed nothing in between.
	From uint64
	// Workflows are the workflows the batch's leaves joined (their
	// back-link chains); a subscriber following one workflow that is not
	// here, and that missed nothing, need not look. Nil when unknown (a
	// server that does not sequence the log learns only the new head).
	Workflows map[string]bool
	// Indexes are the batch's leaves of each workflow in Workflows, in
	// log order (nil when unknown): a subscriber that missed nothing
	// reads them from here, not from the store.
	Indexes map[string][]uint64
	// Missed is set, for a subscriber of one workflow (WatchWorkflow),
	// when a commit of that workflow was not delivered to it (replaced by
	// a newer one while unread) or the commit does not say what it holds:
	// the subscriber must then read what it missed from the store.
	Missed bool
}

// heads is the ledger's watchers part: the published tree head and the
// subscribers told of each new one (Watch, WatchWorkflow). It owns the
// head and the broadcaster.
//
// Locking: the head is an atomic pointer, read without a lock by anyone
// (Head, the readers, the answers of an empty batch); mu orders its
// changes, so that a head only ever grows and subscribers see the heads
// in the order they were published. The broadcaster's own lock is taken
// inside mu, never the other way round.
type heads struct {
	cur      atomic.Pointer[Head]
	mu       sync.Mutex
	watchers broadcaster
}

// load is the published head (nil before the ledger has read one).
func (h *heads) load() *Head { return h.cur.Load() }

// set replaces the head without telling anyone: the head the ledger
// opened with, or took over with.
func (h *heads) set(hd *Head) {
	h.mu.Lock()
	h.cur.Store(hd)
	h.mu.Unlock()
}

// advance publishes hd if it is larger than the head held, and tells
// the subscribers; a follower does not know which workflows the new
// leaves joined (nil workflows and indexes).
func (h *heads) advance(hd *Head, workflows map[string]bool, indexes map[string][]uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.cur.Load()
	if old != nil && hd.Size <= old.Size {
		return
	}
	from := uint64(0)
	if old != nil {
		from = old.Size
	}
	h.cur.Store(hd)
	h.watchers.publish(Commit{Head: *hd, From: from, Workflows: workflows, Indexes: indexes})
}

// broadcaster tells subscribers about new commits. A slow subscriber never
// blocks the sequencer: each holds at most one pending commit, the newest
// (so From, or Missed, then says it missed some). A subscriber of one
// workflow is woken only by the commits of that workflow, so that many
// streams on many workflows cost a commit only the streams it concerns.
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan Commit]struct{} // every commit
	byWF map[string]map[chan Commit]*wfSub
	all  map[chan Commit]*wfSub // the workflow subscribers, for commits that do not say
}

type wfSub struct {
	wf     string
	missed bool // guarded by broadcaster.mu
}

// offer puts c in ch, replacing an unread commit; it reports whether one
// was replaced.
func offer(ch chan Commit, c Commit) (replaced bool) {
	select {
	case ch <- c:
		return false
	default:
	}
	select {
	case <-ch:
		replaced = true
	default:
	}
	select {
	case ch <- c:
	default:
	}
	return replaced
}

func (b *broadcaster) publish(c Commit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		offer(ch, c)
	}
	deliver := func(ch chan Commit, s *wfSub, missed bool) {
		wc := c
		wc.Missed = s.missed || missed
		select {
		case <-ch: // unread: lost, and this one says so
			wc.Missed = true
		default:
		}
		// Only publish sends, under mu: after the drain there is room.
		select {
		case ch <- wc:
			s.missed = false
		default:
			s.missed = true
		}
	}
	if c.Workflows == nil || c.Indexes == nil {
		for ch, s := range b.all {
			deliver(ch, s, true)
		}
		return
	}
	for wf := range c.Workflows {
		for ch, s := range b.byWF[wf] {
			deliver(ch, s, false)
		}
	}
}

// WatchWorkflow is Watch for one workflow: the channel receives the
// commits that hold leaves of wf (and those that do not say what they
// hold, with Missed set).
func (l *Ledger) WatchWorkflow(wf string) (<-chan Commit, func()) {
	return l.heads.watchers.watchWorkflow(wf)
}

// Watch returns a channel that receives each new commit (commits may be
// coalesced: a slow reader sees the newest, whose From then lies beyond
// the last head it saw), and a function to stop.
func (l *Ledger) Watch() (<-chan Commit, func()) { return l.heads.watchers.watch() }

// watchWorkflow subscribes to the commits of wf (Ledger.WatchWorkflow).
func (b *broadcaster) watchWorkflow(wf string) (<-chan Commit, func()) {
	ch := make(chan Commit, 1)
	b.mu.Lock()
	if b.byWF == nil {
		b.byWF, b.all = map[string]map[chan Commit]*wfSub{}, map[chan Commit]*wfSub{}
	}
	s := &wfSub{wf: wf}
	if b.byWF[wf] == nil {
		b.byWF[wf] = map[chan Commit]*wfSub{}
	}
	b.byWF[wf][ch], b.all[ch] = s, s
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.byWF[wf], ch)
			if len(b.byWF[wf]) == 0 {
				delete(b.byWF, wf)
			}
			delete(b.all, ch)
			b.mu.Unlock()
		})
	}
}

// watch subscribes to every commit (Ledger.Watch).
func (b *broadcaster) watch() (<-chan Commit, func()) {
	ch := make(chan Commit, 1)
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[chan Commit]struct{}{}
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, ch)
			b.mu.Unlock()
		})
	}
}
