package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
)

// One sequencer per log.
//
// On a store many servers share (storage.Leaser: PostgreSQL), the server
// holding the sequencer lease decides and commits; the others serve reads
// from the store and refuse appends with a *NotLeaderError naming the
// leader. Every commit is fenced in its own transaction by the lease's
// epoch and the expected tree size, so a leader that was paused past its
// lease commits nothing, signs no checkpoint anyone sees, and steps down
// when its commit is refused. A server that takes the lease reloads the
// head, the tree edge and the authority state from the store before it
// decides anything.

// ErrNotLeader is returned (wrapped in a *NotLeaderError) by appends to a
// server that does not hold the sequencer lease.
var ErrNotLeader = errors.New("ledger: this server does not sequence the log")

// NotLeaderError says which server sequences the log, if any.
type NotLeaderError struct {
	Leader string // the leader's advertised URL ("" if unknown or none)
	Epoch  uint64
	Reason string
}

func (e *NotLeaderError) Error() string {
	s := "this server does not sequence the log"
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Leader != "" {
		s += fmt.Sprintf("; the sequencer (lease epoch %d) takes appends at %s", e.Epoch, e.Leader)
	} else {
		s += "; no server holds the sequencer lease right now, retry shortly"
	}
	return s
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Role is this server's part in sequencing the log.
type Role struct {
	// Shared is true on a store many servers share; on a data folder the
	// one process that opens it is always the sequencer.
	Shared bool
	Leader bool   // this server holds the lease
	Epoch  uint64 // the lease's epoch as last seen
	// LeaderURL is where the leader takes appends; Holder names it.
	LeaderURL, Holder string
	Expires           time.Time
	// Takeovers counts the times this server took the lease; Failovers
	// the takeovers of the log as the store counts them; StepDowns the
	// times this server stopped sequencing, for any reason; Lost the
	// step-downs it did not choose (taken over, not renewed in time, a
	// fenced commit); RenewedLate the renewals that came after more than
	// two thirds of the lease had passed (the loop renews every third); FencedCommits the batches the store
	// refused because the lease had moved on.
	Takeovers, StepDowns, Failovers  uint64
	Lost, RenewedLate, FencedCommits uint64
}

// leadership is the ledger's lease part: whether this server sequences
// the log, on a store many servers share (storage.Leaser), and the live
// state behind Role. It owns the lease (taking, renewing, handing over
// and giving it up), the epoch held, the last lease seen, the role
// changes and the lease counters and events. The lease loop (leaseLoop)
// drives it and, on a follower, also keeps the published head current.
//
// Locking: epoch and the counters are atomics, read by anyone (the
// sequencer checks the epoch before each decision); mu guards last,
// change and the epoch's context (held, endHeld). The times are each
// owned by one goroutine, as their comments say. The settings above
// epoch are set at open and read-only after. A ledger on a store without
// a lease has the zero leadership (no leaser): it always sequences.
type leadership struct {
	leaser storage.Leaser // nil: a folder store, always the sequencer
	// origin, advertise, ttl, wait and prefer are the log's origin and
	// Options.Advertise, LeaseTTL, LeaseWait and Prefer; preferrer is the
	// store's (nil: it cannot tell which servers prefer the log); logger
	// receives the lease events (nil: slog.Default()).
	origin    string
	advertise string
	ttl       time.Duration
	wait      func() time.Duration
	prefer    bool
	preferrer storage.Preferrer
	logger    *slog.Logger

	epoch  atomic.Uint64 // the epoch this server holds (0: none)
	mu     sync.Mutex
	last   storage.Lease
	change chan struct{} // closed and replaced at every change of role
	// held is the life of the epoch this server holds: set before the
	// epoch is, cancelled as soon as it steps down (under mu).
	held    context.Context
	endHeld context.CancelFunc

	takeovers, stepDowns                  atomic.Uint64
	lostCount, renewedLate, fencedCommits atomic.Uint64
	// seqEpoch is the epoch the sequencer's state was loaded under (owned
	// by the sequencer goroutine).
	seqEpoch uint64
	// renewed is when the last successful acquisition or renewal began
	// (written by the lease loop under mu; stepDown, which a commit may
	// call, reads it under mu).
	renewed time.Time
	// freeSince is when this server first saw the lease free since it
	// last saw it held (Options.LeaseWait; owned by tryLead's callers:
	// open, then the lease loop).
	freeSince time.Time
	// handedOff is when this server last handed the lease over to a
	// server that prefers the log (owned by the lease loop).
	handedOff time.Time
}

// newLeadership is the lease part of a ledger on a store with the lease
// ls, with the settings opts gives.
func newLeadership(ls storage.Leaser, origin string, opts *Options, caps storage.Capabilities) leadership {
	return leadership{leaser: ls, origin: origin, advertise: opts.Advertise, ttl: opts.LeaseTTL, wait: opts.LeaseWait,
		prefer: opts.Prefer, preferrer: caps.Prefer, logger: opts.Logger}
}

// lost reports whether this server shares its store and does not hold
// the lease: nothing it decides now may be committed.
func (ld *leadership) lost() bool { return ld.leaser != nil && ld.epoch.Load() == 0 }

// handOffQuiet is how long a server that handed its lease over to a
// server preferring the log waits before it does so again: if that
// server did not take the lease (it was paused, say) and this one took
// it back, handing it over again at once would leave the log without a
// sequencer over and over.
const handOffQuiet = 10 * time.Minute

// Role reports this server's part in sequencing the log.
func (l *Ledger) Role() Role { return l.lead.role() }

// Leading reports whether this server sequences the log now, and returns
// a channel closed at its next change of role: what a task that must run
// on the leader alone (a witness cosigner loop) waits on.
func (l *Ledger) Leading() (bool, <-chan struct{}) { return l.lead.leading() }

// LeadingChanges sends whether this server sequences the log now, then
// each change of role, until ctx ends (then it closes the channel). A
// slow reader misses intermediate changes, never the latest.
func (l *Ledger) LeadingChanges(ctx context.Context) <-chan bool { return l.lead.changes(ctx) }

// role is Ledger.Role.
func (ld *leadership) role() Role {
	if ld.leaser == nil {
		return Role{Leader: true}
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	r := Role{Shared: true, Leader: ld.epoch.Load() != 0, Epoch: ld.last.Epoch, LeaderURL: ld.last.URL,
		Holder: ld.last.Holder, Expires: ld.last.Expires, Takeovers: ld.takeovers.Load(),
		StepDowns: ld.stepDowns.Load(), Failovers: ld.last.Failovers,
		Lost: ld.lostCount.Load(), RenewedLate: ld.renewedLate.Load(), FencedCommits: ld.fencedCommits.Load()}
	if !ld.last.Live && !r.Leader {
		r.LeaderURL, r.Holder = "", ""
	}
	return r
}

// leading is Ledger.Leading.
func (ld *leadership) leading() (bool, <-chan struct{}) {
	if ld.leaser == nil {
		return true, nil
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.change == nil {
		ld.change = make(chan struct{})
	}
	return ld.epoch.Load() != 0, ld.change
}

func (ld *leadership) roleChanged() {
	ld.mu.Lock()
	if ld.change != nil {
		close(ld.change)
	}
	ld.change = make(chan struct{})
	ld.mu.Unlock()
}

// notLeader is the error appends get on a follower.
func (ld *leadership) notLeader(reason string) error {
	ld.mu.Lock()
	last := ld.last
	ld.mu.Unlock()
	e := &NotLeaderError{Epoch: last.Epoch, Reason: reason}
	if last.Live && !last.Mine {
		e.Leader = last.URL
	}
	return e
}

// tryLead acquires the lease if it is free. Called at open and by the
// lease loop.
func (ld *leadership) tryLead(ctx context.Context) error {
	if wait := ld.wait; wait != nil && ld.epoch.Load() == 0 {
		ls, err := ld.leaser.Lease(ctx)
		if err != nil {
			return err
		}
		ld.mu.Lock()
		ld.last = ls
		ld.mu.Unlock()
		if ls.Live {
			ld.freeSince = time.Time{}
			return nil
		}
		if ld.freeSince.IsZero() {
			ld.freeSince = time.Now()
		}
		if time.Since(ld.freeSince) < wait() {
			return nil
		}
		// Leave a free lease to a live server that prefers the log, for
		// as long as it should take to take it.
		if p := ld.preferrer; p != nil && !ld.prefer && time.Since(ld.freeSince) < 2*ld.ttl {
			if wanted, err := p.Preferred(ctx); err != nil || wanted {
				return err
			}
		}
	}
	start := time.Now()
	ls, err := ld.leaser.Acquire(ctx, ld.advertise, ld.ttl)
	if err != nil {
		return err
	}
	ld.mu.Lock()
	ld.last = ls
	ld.mu.Unlock()
	if ls.Mine {
		// Seen free again from scratch once this server lets it go.
		ld.freeSince = time.Time{}
	}
	if ls.Mine && ld.epoch.Load() != ls.Epoch {
		ld.mu.Lock()
		ld.renewed = start
		if ld.endHeld != nil {
			ld.endHeld()
		}
		ld.held, ld.endHeld = context.WithCancel(context.Background())
		ld.mu.Unlock()
		ld.epoch.Store(ls.Epoch)
		ld.takeovers.Add(1)
		ld.event("took", "lease taken", slog.Uint64("epoch", ls.Epoch), slog.Uint64("failovers", ls.Failovers),
			slog.Time("expires", ls.Expires))
		ld.roleChanged()
	}
	return nil
}

// commitContext is the context of a batch's commit: on a shared store it
// ends when this server's role changes (it lost or gave up the lease), so
// a commit stuck on a database that stopped answering (a partition that
// keeps the sockets open) ends at once, and its submitters are answered
// not_leader rather than held until the fault ends. A commit whose
// COMMIT was sent is then of unknown outcome, which resolveUnknown
// settles, or leaves to the next leader.
func (ld *leadership) commitContext() (context.Context, context.CancelFunc) {
	if ld.leaser == nil {
		return context.Background(), func() {}
	}
	lead, changed := ld.leading()
	ctx, cancel := context.WithCancel(context.Background())
	if !lead {
		return ctx, cancel
	}
	go func() {
		select {
		case <-changed:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// leaseContext is the context of the sequencer's reads that only matter
// while this server leads (reloading its state after a failed batch,
// reading back a commit of unknown outcome): on a shared store it ends
// the moment this server steps down, and has already ended when it does
// not lead, so that a database that stopped answering (a partition that
// keeps the sockets open) holds no submitter past the loss of the lease.
// A server that takes the lease again reloads everything (takeLead).
func (ld *leadership) leaseContext() context.Context {
	if ld.leaser == nil {
		return context.Background()
	}
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.held == nil || ld.epoch.Load() == 0 {
		return endedContext
	}
	return ld.held
}

// endedContext is a context that has ended: the lease context of a
// server that does not lead.
var endedContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotLeader)
	return ctx
}()

// event writes the one log line of a lease event (took, renewed late,
// lost, stepped down, fenced commit); the counters behind Role, and the
// server's metrics, count them.
func (ld *leadership) event(event, msg string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("lease_event", event), slog.String("log", ld.origin),
		slog.String("holder", ld.advertise)}, attrs...)
	level := slog.LevelInfo
	if event != "took" {
		level = slog.LevelWarn
	}
	lg := ld.logger
	if lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(context.Background(), level, msg, attrs...)
}

// fencedCommit records a batch the store refused under this server's
// epoch.
func (ld *leadership) fencedCommit(err error) {
	ld.fencedCommits.Add(1)
	ld.event("fenced_commit", "commit fenced: the lease moved on", slog.Uint64("epoch", ld.seqEpoch), slog.String("err", err.Error()))
}

// stepDown gives up sequencing: the store forgets the epoch, so nothing
// more is committed under it. lost says this server did not choose to.
//
// Everything held under the epoch ends at once: the store's reads and
// commits (Drop), the sequencer's lease context, the commit context, so
// that every submission this server holds is answered now, not when a
// database that stopped answering answers again. Only then does it ask
// the store who leads, for the refusals to name.
func (ld *leadership) stepDown(reason string, lost bool) {
	ld.leaser.Drop()
	held := ld.epoch.Swap(0)
	if held == 0 {
		return
	}
	ld.stepDowns.Add(1)
	if lost {
		ld.lostCount.Add(1)
	}
	ld.mu.Lock()
	since := time.Since(ld.renewed)
	if ld.endHeld != nil {
		ld.endHeld()
	}
	// Until the store says who leads, refusals name nobody (not this
	// server).
	ld.last.Mine, ld.last.Live, ld.last.URL = false, false, ""
	ld.mu.Unlock()
	ld.roleChanged()
	// Learn who leads now, so that refusals can name it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	ls, err := ld.leaser.Lease(ctx)
	cancel()
	ld.mu.Lock()
	if err == nil && ld.epoch.Load() == 0 {
		ld.last = ls
	}
	now := ld.last
	ld.mu.Unlock()
	event, msg := "stepped_down", "lease given up"
	if lost {
		event, msg = "lost", "lease lost"
	}
	ld.event(event, msg, slog.String("reason", reason), slog.Uint64("epoch", held),
		slog.Uint64("new_epoch", now.Epoch), slog.String("leader", now.URL),
		slog.Duration("since_renewal", since))
}

// leaseLoop renews the lease while this server holds it, tries to take it
// while it does not, and, on a follower, keeps the head current from the
// store.
func (l *Ledger) leaseLoop() {
	defer l.wg.Done()
	ttl := l.lead.ttl
	tick := time.NewTicker(ttl / 6)
	defer tick.Stop()
	poll := time.NewTicker(l.opts.HeadPoll)
	defer poll.Stop()
	// A store that announces commits (PostgreSQL's LISTEN/NOTIFY) wakes a
	// follower at once; the poll stays, for when the announcements stop.
	var headNote <-chan struct{} // the store says the head moved (nil: never)
	if w := l.caps.Watch; w != nil {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		headNote = w.WatchHead(ctx)
	}
	nextLease := time.Now()
	for {
		select {
		case <-l.closing:
			return
		case <-headNote:
			l.followHead()
			continue
		case <-poll.C:
			if l.lead.epoch.Load() == 0 {
				l.followHead()
			}
			continue
		case <-tick.C:
		}
		if time.Now().Before(nextLease) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		if l.lead.epoch.Load() != 0 {
			if next, ok := l.lead.renew(ctx); ok {
				nextLease = next
			}
		} else {
			if err := l.lead.tryLead(ctx); err == nil {
				nextLease = time.Now().Add(ttl / 3)
			}
		}
		cancel()
	}
}

// renew renews the lease this server holds, and then hands it over if it
// should (maybeHandOff); it steps down when the store refuses the
// renewal, or has not confirmed the lease for almost its whole life. It
// returns when to renew next, if the renewal went through.
func (ld *leadership) renew(ctx context.Context) (time.Time, bool) {
	ttl := ld.ttl
	start := time.Now()
	exp, err := ld.leaser.Renew(ctx, ttl)
	switch {
	case err == nil:
		if gap := start.Sub(ld.renewed); gap > ttl*2/3 {
			ld.renewedLate.Add(1)
			ld.event("renewed_late", "lease renewed late", slog.Uint64("epoch", ld.epoch.Load()),
				slog.Duration("since_renewal", gap), slog.Duration("lease", ttl))
		}
		ld.mu.Lock()
		ld.renewed = start
		ld.last.Expires, ld.last.Live = exp, true
		ld.mu.Unlock()
		ld.maybeHandOff()
		return start.Add(ttl / 3), true
	case errors.Is(err, storage.ErrFenced):
		ld.stepDown("lease taken over", true)
	case time.Since(ld.renewed) > ttl*9/10:
		// The database has not confirmed the lease for almost its whole
		// life: another server may hold it by now. Stop before it could
		// (the fence would refuse a commit anyway; this keeps answers
		// honest).
		ld.stepDown("lease not renewed in time", true)
	}
	return time.Time{}, false
}

// maybeHandOff hands the lease over when a live server prefers the log
// and this one does not (Options.Prefer): it releases the lease and steps
// down, and the preferring server takes it at its next try. A commit in
// flight ends first (the release waits for its lock on the lease row);
// a later one is fenced and answered with an error, never acknowledged.
func (ld *leadership) maybeHandOff() {
	p := ld.preferrer
	if p == nil || ld.prefer || ld.wait == nil {
		return
	}
	if !ld.handedOff.IsZero() && time.Since(ld.handedOff) < handOffQuiet {
		return
	}
	// A context of its own: the renewal before it may have used most of
	// its own, waiting behind the commits that lock the lease row.
	ctx, cancel := context.WithTimeout(context.Background(), ld.ttl/3)
	defer cancel()
	wanted, err := p.Preferred(ctx)
	if err != nil || !wanted {
		return
	}
	ld.handedOff = time.Now()
	ld.leaser.Release(ctx)
	ld.stepDown("handed over to a server that prefers this log", false)
}

// followHead reads the committed head on a follower and publishes it.
func (l *Ledger) followHead() {
	if l.lead.epoch.Load() != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.lead.ttl)
	defer cancel()
	sh, err := l.store.Head(ctx)
	if err != nil || sh == nil {
		return
	}
	h, err := l.headOf(sh)
	if err != nil {
		return
	}
	l.heads.advance(h, nil, nil)
}

// headOf checks a stored head and returns it as a Head.
func (l *Ledger) headOf(sh *storage.Head) (*Head, error) {
	edge, err := merkle.ParseEdge(sh.Edge)
	if err != nil {
		return nil, fmt.Errorf("stored tree edge: %w", err)
	}
	h := &Head{Size: edge.Size(), Root: edge.Root(), Checkpoint: sh.Checkpoint}
	if sh.Checkpoint != nil {
		c, err := l.keys.set.Open(sh.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("stored checkpoint: %w", err)
		}
		if c.Size != h.Size || c.Root != h.Root {
			return nil, fmt.Errorf("stored checkpoint (size %d) does not match the stored tree (size %d)", c.Size, h.Size)
		}
	}
	return h, nil
}

// takeLead makes the sequencer's state that of the store under the epoch
// held, reloading it after a change of leader. It returns an error for a
// batch that must not be decided: this server is not the leader, or the
// store could not be read.
func (l *sequencer) takeLead() error {
	if l.lead.leaser == nil {
		return nil
	}
	ep := l.lead.epoch.Load()
	if ep == 0 {
		return l.lead.notLeader("")
	}
	if ep == l.lead.seqEpoch {
		return nil
	}
	if err := l.drain(); err != nil && !errors.Is(err, storage.ErrFenced) {
		_ = err // the batch in flight was answered with its error
	}
	l.engine = l.newEngine()
	l.builder = nil
	if err := l.loadHead(true); err != nil {
		return fmt.Errorf("taking over the log: %w", err)
	}
	l.lead.seqEpoch = ep
	return nil
}

// changes is Ledger.LeadingChanges.
func (ld *leadership) changes(ctx context.Context) <-chan bool {
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		last := -1
		for {
			lead, changed := ld.leading()
			if v := map[bool]int{false: 0, true: 1}[lead]; v != last {
				select {
				case <-out: // drop an unread, older value
				default:
				}
				out <- lead
				last = v
			}
			if changed == nil {
				<-ctx.Done()
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
