package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
)

// Options tune a Publisher.
type Options struct {
	// Parallel is how many objects are written at once (default 8).
	Parallel int
	// Retry is the wait after a failed pass before the next (default 1s;
	// doubled up to 30s while passes keep failing).
	Retry time.Duration
	// Logger receives what publication does and every alarm (default
	// slog.Default()).
	Logger *slog.Logger
}

// Publisher copies a log's tiles, entry bundles and checkpoint to a bucket.
type Publisher struct {
	l    *ledger.Ledger
	b    *Bucket
	opts Options

	mu sync.Mutex // one pass at a time
	// What this publisher knows the bucket's checkpoint is, after reading
	// or writing it: valid while known.
	known bool
	size  uint64
	cp    []byte
	etag  string

	published atomic.Uint64 // the size of the bucket's checkpoint, as last known
	pending   atomic.Int64  // unix nanoseconds of the oldest commit seen unpublished (0: none)

	objects *prometheus.CounterVec
	passes  prometheus.Counter
	errs    prometheus.Counter
	alarms  prometheus.Counter
	delay   prometheus.Histogram
}

// New returns a Publisher of l's log to b.
func New(l *ledger.Ledger, b *Bucket, opts Options) *Publisher {
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Publisher{l: l, b: b, opts: opts,
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_publish_objects_total",
			Help: "Objects written to the publication bucket, by kind (tile, entries, checkpoint)."}, []string{"kind"}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "custody_publish_passes_total",
			Help: "Publication passes begun by this server (only while it sequences the log)."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "custody_publish_errors_total",
			Help: "Publication passes that failed (retried)."}),
		alarms: prometheus.NewCounter(prometheus.CounterOpts{Name: "custody_publish_alarms_total",
			Help: "Publication passes that found an object in the bucket with other bytes than the log's, or another log's checkpoint (never overwritten)."}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "custody_publish_delay_seconds",
			Help:    "Time from a commit being seen to its checkpoint being in the bucket.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}),
	}
}

// Register adds the publisher's metrics to reg: custody_publish_size (the
// tree size of the bucket's checkpoint), custody_publish_lag_entries and
// custody_publish_lag_seconds (how far the bucket is behind the log), and
// the counters and histogram above.
func (p *Publisher) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{p.objects, p.passes, p.errs, p.alarms, p.delay,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_publish_size", Help: "Tree size of the checkpoint in the publication bucket, as last written or read."},
			func() float64 { return float64(p.published.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_publish_lag_entries", Help: "Committed entries not yet under the bucket's checkpoint."},
			func() float64 { return float64(p.Lag()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "custody_publish_lag_seconds", Help: "Age of the oldest commit not yet under the bucket's checkpoint (0: up to date)."},
			func() float64 { return p.LagTime().Seconds() }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Published is the tree size of the bucket's checkpoint as last known.
func (p *Publisher) Published() uint64 { return p.published.Load() }

// Lag is the number of committed entries not yet published.
func (p *Publisher) Lag() uint64 {
	if s, pub := p.l.Head().Size, p.published.Load(); s > pub {
		return s - pub
	}
	return 0
}

// LagTime is the age of the oldest commit not yet published (0 when the
// bucket is up to date).
func (p *Publisher) LagTime() time.Duration {
	t := p.pending.Load()
	if t == 0 || p.Lag() == 0 {
		return 0
	}
	return time.Since(time.Unix(0, t))
}

// Result says what one pass did.
type Result struct {
	From, Size uint64 // the bucket's checkpoint size before and after
	Written    int    // objects created (the checkpoint included)
	Existing   int    // immutable objects already there with the same bytes
}

// Once publishes the log as of its latest committed checkpoint: every
// tile and entry bundle the bucket's checkpoint lacks (each written with
// If-None-Match: *, an existing one read back and compared), then the
// checkpoint. It refuses, writing nothing, a bucket whose checkpoint is
// not this log's or is not extended by this log's head; it stops at the
// first object with other bytes (ErrAlarm), before the checkpoint.
func (p *Publisher) Once(ctx context.Context) (Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	head := p.l.Head()
	if head.Checkpoint == nil || head.Size == 0 {
		return Result{}, errors.New("publish: the log has no checkpoint yet")
	}
	if !p.known {
		if err := p.read(ctx, head); err != nil {
			return Result{}, err
		}
	}
	res := Result{From: p.size, Size: p.size}
	if p.size > head.Size {
		// A newer leader published past this server's head.
		return res, fmt.Errorf("publish: %s holds a checkpoint of size %d, past this server's head %d", p.b, p.size, head.Size)
	}
	if p.size == head.Size && bytes.Equal(p.cp, head.Checkpoint) {
		p.pending.Store(0)
		return res, nil
	}
	refs := slices.Concat(merkle.NewTiles(p.size, head.Size), merkle.NewEntryBundles(p.size, head.Size))
	created, existing, err := p.putAll(ctx, refs)
	res.Written, res.Existing = created, existing
	if err != nil {
		p.known = false
		return res, err
	}
	// Every object the checkpoint commits to is in the bucket: now, and
	// only now, the checkpoint.
	if err := p.b.putCheckpoint(ctx, head.Checkpoint, p.etag); err != nil {
		p.known = false
		return res, fmt.Errorf("publish: %w", err)
	}
	p.objects.WithLabelValues("checkpoint").Inc()
	res.Written++
	res.Size = head.Size
	p.size, p.cp = head.Size, head.Checkpoint
	// The ETag of what was written: read it back rather than trust a
	// store to return it on PUT.
	if _, etag, err := p.b.Get(ctx, CheckpointPath); err == nil {
		p.etag = etag
	} else {
		p.known = false
	}
	p.published.Store(head.Size)
	if t := p.pending.Load(); t != 0 {
		p.delay.Observe(time.Since(time.Unix(0, t)).Seconds())
	}
	p.pending.Store(0)
	return res, nil
}

// read learns the bucket's checkpoint and checks it is this log's.
func (p *Publisher) read(ctx context.Context, head ledger.Head) error {
	old, etag, err := p.b.Get(ctx, CheckpointPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.size, p.cp, p.etag = 0, nil, ""
	case err != nil:
		return fmt.Errorf("publish: %w", err)
	default:
		size, err := p.l.PublishedSize(old, p.b.String(), head)
		if err != nil {
			if ae := (*ledger.AheadError)(nil); errors.As(err, &ae) {
				// Most likely a newer leader's; retried, not an alarm.
				return fmt.Errorf("publish: %w", err)
			}
			p.alarms.Inc()
			return fmt.Errorf("%w: %v", ErrAlarm, err)
		}
		p.size, p.cp, p.etag = size, old, etag
	}
	p.known = true
	p.published.Store(p.size)
	return nil
}

// putAll writes refs, Parallel at a time.
func (p *Publisher) putAll(ctx context.Context, refs []merkle.TileRef) (created, existing int, err error) {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, p.opts.Parallel)
	for _, ref := range refs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := p.put(ctx, ref)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if first == nil || (errors.Is(err, ErrAlarm) && !errors.Is(first, ErrAlarm)) {
					first = err
				}
				cancel()
			case c:
				created++
			default:
				existing++
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if errors.Is(first, ErrAlarm) {
		p.alarms.Inc()
	}
	return created, existing, first
}

func (p *Publisher) put(ctx context.Context, ref merkle.TileRef) (bool, error) {
	var (
		data []byte
		err  error
		kind = "tile"
	)
	if ref.Entries {
		data, err = p.l.EntryBundle(ref.Index, ref.Width)
		kind = "entries"
	} else {
		data, err = p.l.Tile(ref.Level, ref.Index, ref.Width)
	}
	if err != nil {
		return false, fmt.Errorf("publish: reading %s: %w", ref.Path(), err)
	}
	created, err := p.b.putOnce(ctx, ref.Path(), data)
	if err != nil {
		return false, fmt.Errorf("publish: %w", err)
	}
	if created {
		p.objects.WithLabelValues(kind).Inc()
	}
	return created, nil
}

// Run publishes behind the sequencer until ctx ends: after each commit
// (commits that come during a pass are published by the next), on the
// server that sequences the log only. A server that takes the lease
// reads the bucket's checkpoint again and goes on from there; one that
// loses it stops its pass at once. A failed pass is retried with backoff;
// an alarm is logged at ERROR each time and nothing is overwritten.
func (p *Publisher) Run(ctx context.Context) {
	commits, stop := p.l.Watch()
	defer stop()
	log := p.opts.Logger.With("bucket", p.b.String())
	wait := backoff.Backoff{First: p.opts.Retry, Max: 30 * time.Second}
	var retry <-chan time.Time
	wasLeading := false
	for {
		lead, changed := p.l.Leading()
		if lead && !wasLeading {
			p.mu.Lock()
			p.known = false // another leader may have published meanwhile
			p.mu.Unlock()
			log.Info("this server sequences the log: publishing from the bucket's checkpoint on")
		}
		wasLeading = lead
		if lead && p.Lag() > 0 && p.pending.Load() == 0 {
			p.pending.Store(time.Now().UnixNano())
		}
		if lead && retry == nil {
			start := time.Now()
			pctx, cancel := context.WithCancel(ctx)
			if changed != nil {
				go func() {
					select {
					case <-changed:
					case <-pctx.Done():
					}
					cancel()
				}()
			}
			p.passes.Inc()
			res, err := p.Once(pctx)
			cancel()
			switch {
			case err == nil:
				wait.Reset()
				if res.Size != res.From {
					log.Debug("published", "size", res.Size, "objects", res.Written, "existing", res.Existing, "took", time.Since(start))
				}
				if p.Lag() > 0 {
					// Commits came during the pass.
					p.pending.Store(start.UnixNano())
					continue
				}
			case ctx.Err() != nil:
				return
			default:
				p.errs.Inc()
				d := wait.Next()
				if errors.Is(err, ErrAlarm) {
					log.Error("publication stopped: the bucket holds what this log did not write; nothing was overwritten", "err", err, "retry_in", d)
				} else if pctx.Err() == nil || ctx.Err() != nil {
					log.Warn("publication failed; retrying", "err", err, "retry_in", d)
				}
				retry = time.After(d)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-commits:
			if lead && p.pending.Load() == 0 {
				p.pending.Store(time.Now().UnixNano())
			}
		case <-retry:
			retry = nil
		}
	}
}
