package ledger

import (
	"context"
	"math"
	"sync"

	"github.com/custodylog/custody/authority"
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
}

// broadcaster tells subscribers about new commits. A slow subscriber never
// blocks the sequencer: each holds at most one pending commit, the newest
// (so From then says what it missed).
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan Commit]struct{}
}

func (b *broadcaster) publish(c Commit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- c:
		default:
			// Replace the unread commit with the newer one.
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- c:
			default:
			}
		}
	}
}

// Watch returns a channel that receives each new commit (commits may be
// coalesced: a slow reader sees the newest, whose From then lies beyond
// the last head it saw), and a function to stop.
func (l *Ledger) Watch() (<-chan Commit, func()) {
	ch := make(chan Commit, 1)
	l.watchers.mu.Lock()
	if l.watchers.subs == nil {
		l.watchers.subs = map[chan Commit]struct{}{}
	}
	l.watchers.subs[ch] = struct{}{}
	l.watchers.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.watchers.mu.Lock()
			delete(l.watchers.subs, ch)
			l.watchers.mu.Unlock()
		})
	}
}

// WorkflowIndexesAfter returns the indexes of a workflow's leaves above
// after, in log order (from the workflow index: see WorkflowRange, which
// bounds how many).
func (l *Ledger) WorkflowIndexesAfter(wf string, after uint64) ([]uint64, error) {
	idx, _, err := l.WorkflowRange(context.Background(), wf, after, math.MaxInt)
	return idx, err
}

func workflowKey(wf string) string { return authority.WorkflowRecordKey(wf) }
