package pgstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/storage"
)

// # Followers learn of new heads at once
//
// Every commit notifies the channel custody_head, in its transaction, with
// the payload "SCHEMA SIZE" (the log's schema, so that the servers of one
// log ignore the commits of the other logs in the database; PostgreSQL
// delivers a notification only once its transaction commits). WatchHead
// keeps one connection of its own (not the pool's: LISTEN belongs to a
// session) listening, and signals each notification for this log. When
// that connection breaks it is made again, first after 100 ms, then after
// up to 5 s, and a signal is sent once it listens again, for what it may
// have missed; meanwhile the ledger's poll of the head (every HeadPoll)
// keeps followers current.

// NotifyChannel is the channel every commit notifies.
const NotifyChannel = "custody_head"

// listenAppName is the application_name of the listening connection, so
// that an operator (or a test) can tell it from the pool's.
const listenAppName = "custody-listen"

var _ storage.HeadWatcher = (*Store)(nil)

// watchers tracks the listening goroutines, so that Close waits for them.
type watchers struct {
	mu      sync.Mutex
	stop    chan struct{} // closed by Close
	wg      sync.WaitGroup
	stopped bool
}

func (w *watchers) stopCh() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil {
		w.stop = make(chan struct{})
	}
	return w.stop
}

// start runs f in a goroutine that Close waits for, with a context that
// ends with ctx or at Close; it reports false, running nothing, once the
// store is closed.
func (w *watchers) start(ctx context.Context, f func(ctx context.Context)) bool {
	stop := w.stopCh()
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false
	}
	w.wg.Add(1)
	w.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer w.wg.Done()
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		f(ctx)
	}()
	return true
}

func (w *watchers) close() {
	ch := w.stopCh()
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(ch)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// WatchHead signals on the returned channel soon after any server
// commits to this log (see storage.HeadWatcher), until ctx ends or the
// store is closed.
func (s *Store) WatchHead(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.watch.start(ctx, func(ctx context.Context) {
		wait := backoff.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}
		for {
			if s.listen(ctx, ch) {
				wait.Reset() // it listened before it broke
			}
			if !wait.Wait(ctx) {
				return
			}
		}
	})
	return ch
}

// listen holds one listening connection until it breaks or ctx ends,
// signalling ch for each commit to this log; it reports whether it got as
// far as listening.
func (s *Store) listen(ctx context.Context, ch chan struct{}) bool {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenAppName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return false
	}
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return false
	}
	s.listening.Store(true)
	defer s.listening.Store(false)
	signal(ch) // what was committed while no connection listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		// A payload without a schema (a server before this one) wakes
		// every log's followers; that costs a read of the head, no more.
		if sch, _, ok := strings.Cut(n.Payload, " "); ok && sch != schema {
			continue
		}
		signal(ch)
	}
}

// Listening reports whether a WatchHead connection is listening now.
func (s *Store) Listening() bool { return s.listening.Load() }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
