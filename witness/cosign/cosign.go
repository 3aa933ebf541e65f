// Package cosign gathers witness cosignatures for a log's checkpoints: it
// sends each new checkpoint to the witnesses of a policy with C2SP
// tlog-witness add-checkpoint requests, and merges the cosignature lines
// they answer with into the checkpoint, whose body never changes.
//
// # How it keeps latency low
//
// Each witness has its own loop and at most one request in flight (the
// protocol chains requests: each names the size the witness cosigned
// last). A checkpoint goes to every idle witness the moment it is
// published; a witness that is busy takes the newest checkpoint when it
// answers, skipping those in between, so one cosignature covers every
// entry committed meanwhile. HTTP connections are kept alive. A
// per-witness minimum interval (Options.Interval) keeps the log within
// the rate public witnesses ask for.
//
// # What it tells
//
// Every answer that is not a cosignature is logged with the witness, the
// status and what to do, and counted in custody_witness_requests_total by
// outcome. A 409 whose size shows the witness holds another tree of this
// log (a larger size, or the same size with another root) and a 422 (the
// log's consistency proof from the witness's size does not verify; it is
// also what omniwitness and litewitness answer for the same size with
// another root) mean a split view or a forked log; they are logged at
// ERROR and counted as "fork". A 409 that names a smaller size is a
// witness that is behind (or a cosigner that restarted): the cosigner
// resyncs to that size and asks again at once.
//
// # What it keeps
//
// With Options.Store, the newest checkpoint that met the quorum, with
// every cosignature gathered for it, is kept durably in the log's store
// and read back by Restore at start, after checking it against the log
// and the policy (store.go), so that a restart does not serve it
// uncosigned until the witnesses answer again.
package cosign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/witness"
)

// Log is what the cosigner needs of the log.
type Log interface {
	// ConsistencyProof proves that the tree of size old is a prefix of
	// the tree of size new (0 < old <= new).
	ConsistencyProof(old, new uint64) ([]merkle.Hash, error)
}

// A Checkpoint is a checkpoint the log signed: its size and root, and the
// signed note.
type Checkpoint struct {
	Size uint64
	Root merkle.Hash
	Text []byte
}

// Options tune a Cosigner. The zero value is sensible.
type Options struct {
	// Timeout bounds one add-checkpoint request (default 5s).
	Timeout time.Duration
	// Interval is the least time between two requests to one witness
	// (default 0: none). The public witness network asks logs for about
	// one checkpoint a second.
	Interval time.Duration
	// MaxBackoff caps the wait before retrying a witness that failed
	// (default 5s; the wait doubles from 250ms), so that a witness that
	// comes back is used again within a finality timeout.
	MaxBackoff time.Duration
	// HTTPClient makes the requests (default: keep-alive connections,
	// Timeout per request).
	HTTPClient *http.Client
	// Logger receives what the witnesses answer (default slog.Default()).
	Logger *slog.Logger
	// Registerer, if set, registers the cosigner's metrics.
	Registerer prometheus.Registerer
	// UserAgent is sent with each request (default "custody").
	UserAgent string
	// Store, if set, keeps the newest witnessed checkpoint, with every
	// cosignature gathered for it, durably across restarts (store.go):
	// Run writes it each time it changes, Restore reads it back.
	Store FileStore
}

// maxAnswer bounds a witness's answer: a few signature lines.
const maxAnswer = 64 << 10

// maxRecords bounds the checkpoints whose cosignatures are kept while they
// gather.
const maxRecords = 64

// A Cosigner sends a log's checkpoints to the witnesses of a policy and
// collects their cosignatures. Its methods are safe for concurrent use.
type Cosigner struct {
	policy *witness.Policy
	log    Log
	opts   Options
	hc     *http.Client
	lg     *slog.Logger
	peers  []*peer
	m      *metrics

	mu      sync.Mutex
	head    *record            // the newest checkpoint published, guarded by mu
	headCh  chan struct{}      // closed when head changes, guarded by mu
	recs    map[uint64]*record // cosignatures gathering, by size, guarded by mu
	best    *record            // the newest record that meets the quorum, guarded by mu
	bestCh  chan struct{}      // closed when best changes, guarded by mu
	running bool               // Run is running, guarded by mu
	// target is the checkpoint every witness is asked to cosign this
	// round, and targetAt when it became the target (pick), guarded by mu.
	target   uint64 // its size (records are replaced as they gather; 0: none)
	targetAt time.Time
	stats    Stats // guarded by mu

	saveCh  chan struct{} // buffered 1: the newest witnessed checkpoint changed
	written []byte        // what the store holds; used by persist (in Run) and by Restore (before Run)
}

// Stats count what the cosigner did.
type Stats struct {
	// Witnessed is how many checkpoints met the quorum (each newer than
	// the last).
	Witnessed int
	// Answers is how many answers the witnesses gave, and AnswerSeconds
	// the time they took, in all.
	Answers       int
	AnswerSeconds float64
	// QuorumSeconds is the time from Publish to meeting the quorum,
	// summed over the Witnessed checkpoints.
	QuorumSeconds float64
	// PerWitness counts answers and their time by witness.
	PerWitness map[string]WitnessStats
}

// WitnessStats count one witness's answers.
type WitnessStats struct {
	Answers       int
	AnswerSeconds float64
}

// record is one checkpoint and the cosignatures gathered for it.
type record struct {
	cp        Checkpoint
	published time.Time
	lines     map[string]string // witness name -> its signature line (without "\n")
	text      []byte            // cp.Text with the lines appended, in policy order
	ev        witness.Evaluation
}

// peer is one witness and what the cosigner knows of its state.
type peer struct {
	w    *witness.Witness
	size uint64 // the size the witness last cosigned, when known
	// known is whether size was learnt from the witness (a cosignature or
	// a 409) since Run started.
	known bool
	root  merkle.Hash // the root at size, when known from a cosignature
	last  time.Time   // when the last request went out
}

// New returns a cosigner for the policy's witnesses (those its quorum
// counts; each needs a URL). Call Publish with each new checkpoint and Run
// to send them.
func New(p *witness.Policy, l Log, opts Options) (*Cosigner, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "custody"
	}
	c := &Cosigner{policy: p, log: l, opts: opts, lg: opts.Logger, hc: opts.HTTPClient,
		headCh: make(chan struct{}), bestCh: make(chan struct{}), recs: map[uint64]*record{}, saveCh: make(chan struct{}, 1)}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 4
		t.IdleConnTimeout = 5 * time.Minute
		c.hc = &http.Client{Transport: t, Timeout: opts.Timeout}
	}
	for _, w := range p.Required() {
		if w.URL == "" {
			return nil, fmt.Errorf("witness %s has no URL in the policy: a log needs one to send it checkpoints (witness NAME VKEY URL)", w.Name)
		}
		c.peers = append(c.peers, &peer{w: w})
	}
	c.m = newMetrics(opts.Registerer, c)
	return c, nil
}

// Policy is the cosigner's policy.
func (c *Cosigner) Policy() *witness.Policy { return c.policy }

// Publish makes cp the newest checkpoint: idle witnesses get it at once.
// Older checkpoints than the newest are ignored.
func (c *Cosigner) Publish(cp Checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.head != nil && cp.Size <= c.head.cp.Size {
		return
	}
	r := &record{cp: cp, published: time.Now(), lines: map[string]string{}, text: cp.Text}
	r.ev = c.policy.Evaluate(r.text)
	c.head = r
	c.recs[cp.Size] = r
	c.prune()
	close(c.headCh)
	c.headCh = make(chan struct{})
	if r.ev.Satisfied { // quorum none
		c.setBest(r)
	}
}

// prune drops records the witnesses will not add to: those older than the
// newest witnessed one, and the oldest beyond maxRecords. Caller holds mu.
func (c *Cosigner) prune() {
	var oldest uint64
	for size := range c.recs {
		if c.best != nil && size < c.best.cp.Size {
			delete(c.recs, size)
		}
	}
	for len(c.recs) > maxRecords {
		oldest = ^uint64(0)
		for size := range c.recs {
			if size != c.target { // the round's target gathers until it is met
				oldest = min(oldest, size)
			}
		}
		delete(c.recs, oldest)
	}
}

func (c *Cosigner) setBest(r *record) {
	if c.best != nil && c.best.cp.Size == r.cp.Size && c.best.cp.Root == r.cp.Root && len(r.lines) > len(c.best.lines) {
		// More cosignatures on the witnessed checkpoint: keep them all.
		c.best = r
		c.save()
		return
	}
	if c.best != nil && c.best.cp.Size >= r.cp.Size {
		return
	}
	c.best = r
	c.stats.Witnessed++
	c.stats.QuorumSeconds += time.Since(r.published).Seconds()
	close(c.bestCh)
	c.bestCh = make(chan struct{})
	c.m.witnessed.Set(float64(r.cp.Size))
	c.save()
}

// Latest returns the newest checkpoint published, with the cosignatures
// gathered for it so far (size 0 and nil before the first Publish).
func (c *Cosigner) Latest() (size uint64, text []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.head == nil {
		return 0, nil
	}
	return c.head.cp.Size, c.head.text
}

// A Witnessed checkpoint meets the policy's quorum.
type Witnessed struct {
	Checkpoint
	// Text is the checkpoint with the cosignature lines that meet the
	// quorum (and any others gathered) appended.
	Cosigned   []byte
	Evaluation witness.Evaluation
}

// Best returns the newest checkpoint that meets the quorum, if any.
func (c *Cosigner) Best() (Witnessed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.best == nil {
		return Witnessed{}, false
	}
	return c.best.witnessed(), true
}

func (r *record) witnessed() Witnessed {
	return Witnessed{Checkpoint: r.cp, Cosigned: r.text, Evaluation: r.ev}
}

// ErrNotWitnessed is returned by Wait when ctx ends before a checkpoint of
// the size meets the quorum.
var ErrNotWitnessed = errors.New("no checkpoint that large met the witness quorum in time")

// Wait waits until a checkpoint of at least size meets the quorum and
// returns the newest such checkpoint. It fails with an error wrapping
// ErrNotWitnessed (and ctx's error) when ctx ends first.
func (c *Cosigner) Wait(ctx context.Context, size uint64) (Witnessed, error) {
	for {
		c.mu.Lock()
		if c.best != nil && c.best.cp.Size >= size {
			w := c.best.witnessed()
			c.mu.Unlock()
			return w, nil
		}
		ch := c.bestCh
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Witnessed{}, fmt.Errorf("%w (%w)", ErrNotWitnessed, ctx.Err())
		}
	}
}

// Stats returns the cosigner's counters.
func (c *Cosigner) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.PerWitness = maps.Clone(st.PerWitness)
	return st
}

// Status describes each witness for people: the size it last cosigned.
func (c *Cosigner) Status() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]uint64{}
	for _, p := range c.peers {
		if p.known {
			out[p.w.Name] = p.size
		}
	}
	return out
}

// Run sends checkpoints to the witnesses until ctx ends. Run it only on
// the server that sequences the log (the leader); after it returns it may
// run again (say, when this server leads again), and starts by learning
// each witness's size anew.
func (c *Cosigner) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("cosign: Run is already running")
	}
	c.running = true
	for _, p := range c.peers {
		p.known = false
	}
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.running = false; c.mu.Unlock() }()
	var wg sync.WaitGroup
	for _, p := range c.peers {
		wg.Add(1)
		go func() { defer wg.Done(); c.runPeer(ctx, p) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); c.persist(ctx) }()
	c.mu.Lock()
	if c.best != nil {
		c.save() // what was witnessed before Run, if not stored yet
	}
	c.mu.Unlock()
	wg.Wait()
	return ctx.Err()
}

// next waits until there is a checkpoint the witness has not cosigned,
// and returns the newest.
func (c *Cosigner) next(ctx context.Context, p *peer) (*record, bool) {
	for {
		c.mu.Lock()
		h, ch := c.head, c.headCh
		todo := h != nil && (!p.known || h.cp.Size > p.size || (h.cp.Size == p.size && h.cp.Root != p.root))
		c.mu.Unlock()
		if todo {
			return h, true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, false
		}
	}
}

func (c *Cosigner) runPeer(ctx context.Context, p *peer) {
	// After a failure the next request waits (250 ms, doubling up to
	// MaxBackoff); after a success or a resync it goes at once.
	retry := backoff.Backoff{First: 250 * time.Millisecond, Max: c.opts.MaxBackoff}
	wait := time.Duration(0)
	for {
		r, ok := c.next(ctx, p)
		if !ok {
			return
		}
		if !backoff.Sleep(ctx, time.Until(p.last.Add(c.opts.Interval))) {
			return
		}
		if !backoff.Sleep(ctx, wait) {
			return
		}
		for {
			next, witnessed, moved, until := c.pick(p)
			if next != nil {
				r = next
				break
			}
			t := time.NewTimer(time.Until(until))
			select {
			case <-witnessed:
			case <-moved:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
		}
		if p.known && p.size > r.cp.Size {
			// The witness holds a larger tree of this log than the log
			// has: wait for the log to grow past it.
			wait = retry.Next()
			continue
		}
		err := c.add(ctx, p, r)
		if ctx.Err() != nil {
			return
		}
		var re *resync
		switch {
		case err == nil:
			retry.Reset()
			wait = 0
		case errors.As(err, &re):
			// Learnt the witness's size: ask again at once.
			retry.Reset()
			wait = 0
		default:
			wait = retry.Next()
		}
	}
}

// pick returns the checkpoint to ask p to cosign: the round's target, so
// that under continuous appends the witnesses cosign the same checkpoint
// and a quorum is reached (each asked for whatever was newest when its
// own turn came, no size would gather two cosignatures). A new round
// targets the newest checkpoint once the target met the quorum, or after
// Options.Timeout without it (the witnesses that could complete it are
// away). If p has already cosigned the target, pick returns nil and what
// to wait on: a change of the witnessed checkpoint or of the newest
// one, or until.
func (c *Cosigner) pick(p *peer) (r *record, wait, moved <-chan struct{}, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.recs[c.target]
	if t == nil || (c.best != nil && c.best.cp.Size >= t.cp.Size) || time.Since(c.targetAt) > c.opts.Timeout {
		c.target, c.targetAt = c.head.cp.Size, time.Now()
		t = c.head
	}
	done := p.known && (p.size > t.cp.Size || (p.size == t.cp.Size && p.root == t.cp.Root))
	if !done {
		return t, nil, nil, time.Time{}
	}
	if t.cp.Size != c.head.cp.Size && time.Since(c.targetAt) > c.opts.Timeout {
		return c.head, nil, nil, time.Time{}
	}
	return nil, c.bestCh, c.headCh, c.targetAt.Add(c.opts.Timeout + time.Millisecond)
}

// resync is the error of a 409 that taught the witness's size.
type resync struct{ size uint64 }

func (e *resync) Error() string { return "resync to size " + strconv.FormatUint(e.size, 10) }

// add sends one add-checkpoint request and handles the answer.
func (c *Cosigner) add(ctx context.Context, p *peer, r *record) error {
	name := p.w.Name
	old := uint64(0)
	if p.known {
		old = p.size
	}
	var proof []merkle.Hash
	if old > 0 && old < r.cp.Size {
		var err error
		if proof, err = c.log.ConsistencyProof(old, r.cp.Size); err != nil {
			c.m.outcome(name, "error")
			c.lg.Error("witness: cannot prove consistency for the witness", "witness", name, "from", old, "to", r.cp.Size, "err", err)
			return err
		}
	}
	start := time.Now()
	p.last = start
	res, err := AddCheckpoint(ctx, c.hc, p.w.URL, c.opts.UserAgent, old, proof, r.cp.Text, c.opts.Timeout)
	took := time.Since(start).Seconds()
	c.m.latency.WithLabelValues(name).Observe(took)
	if err == nil {
		c.mu.Lock()
		c.stats.Answers++
		c.stats.AnswerSeconds += took
		if c.stats.PerWitness == nil {
			c.stats.PerWitness = map[string]WitnessStats{}
		}
		ws := c.stats.PerWitness[name]
		ws.Answers++
		ws.AnswerSeconds += took
		c.stats.PerWitness[name] = ws
		c.mu.Unlock()
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		outcome := "error"
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			outcome = "timeout"
		}
		c.m.outcome(name, outcome)
		c.lg.Warn("witness: no answer", "witness", name, "url", p.w.URL, "size", r.cp.Size, "err", err)
		return err
	}
	switch res.Status {
	case http.StatusOK:
		line, err := c.merge(p, r, res.Body)
		if err != nil {
			c.m.outcome(name, "bad_answer")
			c.lg.Error("witness: answered 200 without a valid cosignature by its key", "witness", name, "key", p.w.Key.VerifierKey(), "size", r.cp.Size, "err", err)
			return err
		}
		c.mu.Lock()
		p.size, p.root, p.known = r.cp.Size, r.cp.Root, true
		c.mu.Unlock()
		c.m.size.WithLabelValues(name).Set(float64(r.cp.Size))
		c.m.outcome(name, "cosigned")
		c.lg.Debug("witness: cosigned", "witness", name, "size", r.cp.Size, "line", line)
		return nil
	case http.StatusConflict:
		size, perr := ParseSize(res.Body)
		if perr != nil {
			c.m.outcome(name, "bad_answer")
			c.lg.Error("witness: answered 409 without its size", "witness", name, "err", perr)
			return perr
		}
		switch {
		case size > r.cp.Size:
			c.m.outcome(name, "fork")
			c.lg.Error("witness: the witness has cosigned a larger tree of this log than the log has: a fork (another history signed with this log's key) or a log that lost entries",
				"witness", name, "witness_size", size, "log_size", r.cp.Size)
			c.mu.Lock()
			p.size, p.known = size, true
			c.mu.Unlock()
			return fmt.Errorf("witness %s holds size %d, the log %d", name, size, r.cp.Size)
		case p.known && size == old:
			// It holds the size we named, and still refuses: at equal
			// sizes, its root differs from ours.
			c.m.outcome(name, "fork")
			c.lg.Error("witness: the witness holds another root for this log at the same size: a split view or a forked log",
				"witness", name, "size", size)
			return fmt.Errorf("witness %s holds another root at size %d", name, size)
		}
		c.m.outcome(name, "conflict")
		c.lg.Info("witness: resynchronised to the size the witness holds", "witness", name, "witness_size", size, "sent_old_size", old)
		c.mu.Lock()
		p.size, p.known, p.root = size, true, merkle.Hash{}
		c.mu.Unlock()
		return &resync{size: size}
	case http.StatusUnprocessableEntity:
		c.m.outcome(name, "fork")
		c.lg.Error("witness: the witness rejected the log's consistency proof from the size it holds: its tree at that size is not this log's (a split view or a forked log)",
			"witness", name, "witness_size", old, "log_size", r.cp.Size, "answer", snippet(res.Body))
		c.mu.Lock()
		p.known = false // ask its size again next time
		c.mu.Unlock()
		return fmt.Errorf("witness %s: consistency proof refused (422)", name)
	case http.StatusNotFound:
		c.m.outcome(name, "unknown_log")
		c.lg.Error("witness: the witness does not know this log (404): register its origin and verifier key with the witness's operator",
			"witness", name, "url", p.w.URL)
		return errors.New("404")
	case http.StatusForbidden:
		c.m.outcome(name, "forbidden")
		c.lg.Error("witness: the witness does not accept this log's signature (403): it knows the origin with another verifier key",
			"witness", name, "url", p.w.URL)
		return errors.New("403")
	case http.StatusBadRequest:
		c.m.outcome(name, "bad_request")
		c.lg.Error("witness: the witness refused the request as malformed (400)", "witness", name, "answer", snippet(res.Body))
		return errors.New("400")
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		c.m.outcome(name, "busy")
		c.lg.Warn("witness: the witness asks to slow down", "witness", name, "status", res.Status)
		return errors.New("busy")
	default:
		c.m.outcome(name, "error")
		c.lg.Warn("witness: unexpected answer", "witness", name, "status", res.Status, "answer", snippet(res.Body))
		return fmt.Errorf("HTTP %d", res.Status)
	}
}

func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}

// merge adds the witness's cosignature from its answer to the record, if
// it verifies over the record's checkpoint, and re-evaluates the quorum.
func (c *Cosigner) merge(p *peer, r *record, answer []byte) (string, error) {
	line, err := CosignatureFor(p.w.Key, r.cp.Text, answer)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	base, ok := c.recs[r.cp.Size]
	if !ok {
		return line, nil // pruned: a newer checkpoint is witnessed already
	}
	r2 := &record{cp: base.cp, published: base.published, lines: map[string]string{}}
	for k, v := range base.lines {
		r2.lines[k] = v
	}
	r2.lines[p.w.Name] = line
	var b bytes.Buffer
	b.Write(r.cp.Text)
	for _, w := range c.policy.Witnesses() {
		if l, ok := r2.lines[w.Name]; ok {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	r2.text = b.Bytes()
	r2.ev = c.policy.Evaluate(r2.text)
	// Records are replaced, never changed: readers hold them unlocked.
	c.recs[r.cp.Size] = r2
	if c.head != nil && c.head.cp.Size == r.cp.Size {
		c.head = r2
	}
	if r2.ev.Satisfied {
		c.setBest(r2)
		c.prune()
	}
	return line, nil
}

// CosignatureFor returns the signature line (without its newline) in a
// witness's add-checkpoint answer that is a valid cosignature by key over
// the checkpoint. Other lines are ignored, as the protocol asks.
func CosignatureFor(key *witness.Key, checkpoint, answer []byte) (string, error) {
	if len(answer) == 0 || !bytes.HasSuffix(answer, []byte("\n")) {
		return "", errors.New("the answer is not signature lines ending in a newline")
	}
	for _, l := range strings.SplitAfter(string(answer), "\n") {
		if l != "" && !strings.HasPrefix(l, "— ") {
			return "", fmt.Errorf("the answer holds a line that is not a signature line: %q", snippet([]byte(l)))
		}
	}
	n, err := note.Open(append(bytes.Clone(checkpoint), answer...), note.VerifierList(key))
	if err != nil {
		return "", err
	}
	if len(n.Sigs) != 1 {
		return "", errors.New("no cosignature by the witness's key")
	}
	return "— " + n.Sigs[0].Name + " " + n.Sigs[0].Base64, nil
}
