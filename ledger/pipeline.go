package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
)

// Result is the ledger's answer to a submission that was logged, either as
// the statement itself (Accepted) or as a DENIAL of it (Denied).
type Result struct {
	Verdict authority.Verdict
	Index   uint64 // the statement's leaf, or its DENIAL's
	Code    authority.Code
	Reason  string
	// Duplicate is true when these exact bytes were decided before; the
	// result is that first decision and nothing new was appended.
	Duplicate bool
	Notes     []string
	// Hold is set when the statement is a pending receipt an approval
	// rule held (DESIGN §7): its deadline and matched rules.
	Hold *authority.HoldInfo
	// Head is a checkpoint that includes Index, and Proof the inclusion
	// proof of Index in it.
	Head  Head
	Proof []merkle.Hash
	// Leaf is the leaf at Index as logged, when this submission logged it
	// (nil for a Duplicate: read it with LeafBytes).
	Leaf []byte
}

// sequencer is the ledger's sequencer part: the append pipeline, from
// the queues to the answers (DESIGN §4, §5). It owns the queues and the
// verify workers with their cache of bound keys; the one sequencer
// goroutine (run) that takes submissions in arrival order, deduplicates
// and decides them, and gathers batches; and each batch's commit
// goroutine (commitJob), which writes the batch to the store and its
// checkpoint to the signed-head file, publishes the head and answers. It
// also (re)loads the state it decides on from the store: at open, and
// when this server takes the lease (loadHead, takeLead).
//
// Locking: the fields above the queues are set at open and read-only
// after (the peer parts it uses, each with its own rule). Submit holds
// closeMu for reading while it queues, and Close holds it for writing,
// so nothing is queued once closed is set; the workers read the queue
// and write only the request they hold. The fields below "Owned by the
// sequencer goroutine" are touched by that goroutine alone (and by the
// open before it starts). A batch's commit goroutine writes only its
// job, the signed-head file (one commit at a time: each waits for the
// one before) and failed; it hands its outcome to the sequencer through
// the job's channels (drain, drainStored).
type sequencer struct {
	loc, origin string
	opts        *Options
	store       storage.Store
	caps        storage.Capabilities
	keys        *signingKeys
	read        *reader
	heads       *heads
	lead        *leadership
	stats       *stats
	closing     chan struct{} // closed by Close: finish what is queued, then stop
	wg          *sync.WaitGroup

	seqQ    chan *request
	verifyQ chan *request
	closed  atomic.Bool
	closeMu sync.RWMutex // held for reading while enqueuing, for writing by Close
	bound   sync.Map     // key id -> sign.Key (Ed25519 or passkey), for the verify workers

	// Owned by the sequencer goroutine.
	inflight *job     // the batch whose commit is running, if any
	carry    *request // the submission that starts the next batch (it did not fit in the last)
	next     uint64   // the index the next leaf gets (past the batch in flight)
	engine   *authority.Engine
	builder  *merkle.Builder
	limiter  *limiter
	lastAt   time.Time
	wfx      wfIndexer // the workflow index of the batches in flight
	// txnBudget is the most a batch's transaction may weigh (the
	// store's Weigh): its Budget, smaller in tests of split.
	txnBudget int

	// hf is the signed-head file (signedhead.go), written by the commit
	// goroutine before a head is shown; nil when ReadOnly.
	hf *headFile
	// failed is set when a batch was committed but its checkpoint could
	// not be made durable in the signed-head file: nothing more is
	// committed or shown until a restart.
	failed atomic.Pointer[error]
}

// request is one submission travelling through the pipeline.
type request struct {
	data     []byte
	raw      bool // a LogOnly leaf: data is the leaf itself
	env      *sign.Parsed
	canon    []byte              // the envelope's canonical JSON, for the leaf
	stmt     statement.Statement // set with parseErr only once verified
	parseErr error
	parsed   bool
	refusal  *authority.DecisionError // set by the worker for steps 1–2
	verified bool
	hash     [32]byte
	ready    chan struct{} // closed when the worker is done
	done     chan answer   // buffered 1

	// prev is the submission before this one in its Batch (nil outside
	// one), fixed before the request is queued. took is set by the
	// sequencer alone: this submission was accepted, its seq consumed.
	prev *request
	took bool
}

type answer struct {
	res *Result
	err error
	// prover proves res from the committed batch's tiles, in memory, when
	// res is in that batch.
	prover *merkle.Prover
}

// leafOverhead bounds the bytes a leaf adds around its envelope; the
// verifier checks a DENIAL's omitted envelope with the same constant.
const leafOverhead = statement.LeafOverhead

// MaxSubmission is the largest envelope accepted on the wire, before
// canonicalisation; larger ones are refused as too_large unread.
const MaxSubmission = 2 * statement.MaxLeafSize

// Append submits one DSSE envelope and waits until it is durably logged.
// It returns a Result for a logged decision (accepted or denied), or an
// error when nothing was logged: a refusal (*authority.DecisionError),
// ctx's error, ErrClosed, or a storage failure.
//
// If ctx ends after the submission was queued, the entry may still be
// logged; the caller only stops waiting. A runtime must then treat the step
// as not authorised.
func (l *Ledger) Append(ctx context.Context, envelope []byte) (*Result, error) {
	p, err := l.Submit(ctx, envelope)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is a queued submission.
type Pending struct {
	prover *merkle.Prover // the ledger's (reader.prover)
	req    *request
}

// Submit queues one envelope and returns at once. Submissions made one
// after another by one goroutine are sequenced in that order, so a caller
// can keep many of its own statements in flight (each seq after the last)
// and still have them batched together.
func (l *Ledger) Submit(ctx context.Context, envelope []byte) (*Pending, error) {
	return l.seq.submit(ctx, envelope, nil)
}

// Batch ties together the submissions of one batch request (POST
// /v1/entries/batch), made one after another by one goroutine with
// SubmitBatched. Within a batch, a statement whose seq is too high only
// because earlier statements of the same key in the batch were not
// accepted (denied, refused, or withdrawn themselves) is withdrawn: it is
// not decided and not logged, and its answer is the refusal
// authority.Withdrawn naming the seq to sign it with again. Denied
// statements consume no seq (DESIGN §4), so without this one denial would
// cost every later statement of the key in the batch a seq_mismatch
// DENIAL. Statements of other keys, and a seq that is wrong for any other
// reason (lower than the next, or higher than the batch can explain), are
// decided as usual. See docs/DECISIONS.md.
type Batch struct {
	last *request
}

// SubmitBatched is Submit for a submission of batch b; b's submissions
// are sequenced in the order they were made.
func (l *Ledger) SubmitBatched(ctx context.Context, b *Batch, envelope []byte) (*Pending, error) {
	return l.seq.submit(ctx, envelope, b)
}

func (l *sequencer) submit(ctx context.Context, envelope []byte, group *Batch) (*Pending, error) {
	// The ledger keeps its own copy: the worker reads it later, and when it
	// is already canonical these very bytes become the leaf's envelope, so
	// a caller reusing its buffer (or giving up waiting) must not be able
	// to change them. An oversized one is refused unread: no copy.
	if len(envelope) <= MaxSubmission {
		envelope = bytes.Clone(envelope)
	}
	if l.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	req := &request{data: envelope, ready: make(chan struct{}), done: make(chan answer, 1)}
	if group != nil {
		req.prev = group.last
	}
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	select {
	case l.seqQ <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.verifyQ <- req // workers drain it independently of the sequencer
	if group != nil {
		group.last = req
	}
	return &Pending{prover: l.read.prover, req: req}, nil
}

// stop stops the intake: nothing is queued from now on, and the workers
// and the sequencer finish what is queued and stop (closing). It reports
// whether this call stopped it (false: a Close before did).
func (l *sequencer) stop() bool {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed.Swap(true) {
		return false
	}
	if !l.opts.ReadOnly {
		close(l.closing)
	}
	return true
}

// Wait waits for the submission's decision; see Append.
func (p *Pending) Wait(ctx context.Context) (*Result, error) {
	select {
	case a := <-p.req.done:
		if a.err != nil || a.res == nil {
			return nil, a.err
		}
		prover := p.prover
		if a.prover != nil {
			prover = a.prover // the batch's own tiles, in memory
		}
		proof, err := prover.InclusionProof(a.res.Index, a.res.Head.Size)
		if err != nil {
			return nil, fmt.Errorf("entry %d is durable, but its inclusion proof failed: %w", a.res.Index, err)
		}
		a.res.Proof = proof
		return a.res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ErrNotLogOnly is returned by AppendLeaves on a ledger opened without
// Options.LogOnly.
var ErrNotLogOnly = errors.New("ledger: AppendLeaves needs Options.LogOnly")

// AppendLeaves durably appends raw leaves with no envelope or authority
// checks, for measuring the log alone; see Options.LogOnly. It returns the
// index of the first leaf and the head that includes them all.
func (l *Ledger) AppendLeaves(ctx context.Context, leaves [][]byte) (uint64, Head, error) {
	return l.seq.appendLeaves(ctx, leaves)
}

func (l *sequencer) appendLeaves(ctx context.Context, leaves [][]byte) (uint64, Head, error) {
	if !l.opts.LogOnly {
		return 0, Head{}, ErrNotLogOnly
	}
	reqs := make([]*request, len(leaves))
	l.closeMu.RLock()
	if l.closed.Load() {
		l.closeMu.RUnlock()
		return 0, Head{}, ErrClosed
	}
	for i, leaf := range leaves {
		if len(leaf) > statement.MaxLeafSize {
			l.closeMu.RUnlock()
			return 0, Head{}, fmt.Errorf("leaf %d of %d bytes exceeds the %d-byte limit", i, len(leaf), statement.MaxLeafSize)
		}
		reqs[i] = &request{data: bytes.Clone(leaf), raw: true, ready: make(chan struct{}), done: make(chan answer, 1)}
		close(reqs[i].ready)
		select {
		case l.seqQ <- reqs[i]:
		case <-ctx.Done():
			l.closeMu.RUnlock()
			return 0, Head{}, ctx.Err()
		}
	}
	l.closeMu.RUnlock()
	var first uint64
	var head Head
	for i, r := range reqs {
		a := <-r.done
		if a.err != nil {
			return 0, Head{}, a.err
		}
		if i == 0 {
			first = a.res.Index
		}
		if a.res.Head.Size > head.Size {
			head = a.res.Head
		}
	}
	return first, head, nil
}

// QueueDepth is the number of submissions waiting to be sequenced.
func (l *Ledger) QueueDepth() int { return len(l.seq.seqQ) }

func refusal(code authority.Code, format string, args ...any) *authority.DecisionError {
	return &authority.DecisionError{Verdict: authority.Refused, Code: code, Reason: fmt.Sprintf(format, args...)}
}

// worker performs DESIGN §4 steps 1–2 for queued submissions in parallel.
func (l *sequencer) worker() {
	defer l.wg.Done()
	for {
		select {
		case req := <-l.verifyQ:
			l.check(req)
		case <-l.closing:
			// Finish what is queued, then stop.
			for {
				select {
				case req := <-l.verifyQ:
					l.check(req)
				default:
					return
				}
			}
		}
	}
}

func (l *sequencer) check(req *request) {
	defer close(req.ready)
	if req.raw {
		return
	}
	if len(req.data) > MaxSubmission {
		req.refusal = refusal(authority.TooLarge, "submission of %d bytes exceeds the %d-byte limit", len(req.data), MaxSubmission)
		return
	}
	// canonical is req.data itself (the ledger's copy) when the client sent
	// the canonical form, the usual case.
	env, canonical, err := sign.ParseEnvelopeCanonical(req.data)
	if err != nil {
		req.refusal = refusal(authority.BadEnvelope, "%v", err)
		return
	}
	if n := len(canonical) + leafOverhead; n > statement.MaxLeafSize {
		req.refusal = refusal(authority.TooLarge, "the leaf would be about %d bytes; a leaf holds at most %d", n, statement.MaxLeafSize)
		return
	}
	req.env, req.hash, req.canon = env, env.DedupHash(), canonical
	// The log's own keys (the log key, every checkpoint key, current or
	// retired) sign DENIALs and checkpoints only: an envelope one of them
	// signed is never a submission (DESIGN §1). The engine decides this
	// (Engine.RefuseKeys, newEngine); refusing here too spares the
	// sequencer, and a signature check, the work.
	if l.keys.own[env.KeyID] {
		req.refusal = refusal(authority.BadSignature, "key %s is one of this log's own keys, which sign DENIALs and checkpoints only; an envelope it signed is never a submission", env.KeyID)
		return
	}
	if r := l.foreignDenialKey(env); r != nil { // denialkey.go
		req.refusal = r
		return
	}
	key, ok := l.signingKey(env.KeyID)
	if !ok {
		// An unknown key may be bound by an earlier entry of the same
		// batch: the sequencer verifies and parses those itself.
		return
	}
	// One check for Ed25519 and passkey signatures alike (sign.VerifyKey,
	// DESIGN §1).
	if err := env.VerifyKey(key); err != nil {
		req.refusal = refusal(authority.BadSignature, "signature by key %s does not verify: %v", env.KeyID, err)
		return
	}
	req.verified = true
	// Verify first, then parse the same bytes (DESIGN §1): an unsigned
	// payload never reaches the parser. Parsing here, in parallel, spares
	// the sequencer; Decide still applies every rule in order.
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	req.stmt, req.parseErr = statement.Parse(kind, env.Payload)
	req.parsed = true
}

// signingKey finds a bound key in committed state, caching it. A key id
// is the SHA-256 of its key, so the cache cannot map an id to a wrong key;
// a passkey's rp_id and origins never change once bound.
func (l *sequencer) signingKey(keyID string) (sign.Key, bool) {
	if v, ok := l.bound.Load(keyID); ok {
		return v.(sign.Key), true
	}
	// Only while this server leads (leaseContext): a follower refuses the
	// submission anyway, and the sequencer verifies a submission whose key
	// the workers did not find.
	raw, err := l.store.Record(l.lead.leaseContext(), authority.KeyRecordKey(keyID))
	if err != nil || raw == nil {
		return sign.Key{}, false
	}
	var rec authority.KeyRec
	if json.Unmarshal(raw, &rec) != nil {
		return sign.Key{}, false
	}
	var key sign.Key
	if rec.IsPasskey() {
		pk, err := sign.NewPasskey(rec.KeyType, rec.PublicKey, rec.RPID, rec.Origins)
		if err != nil {
			return sign.Key{}, false
		}
		key.Passkey = pk
	} else {
		pub, err := sign.ParsePublicKey(rec.PublicKey)
		if err != nil {
			return sign.Key{}, false
		}
		key.Ed25519 = pub
	}
	l.bound.Store(keyID, key)
	return key, true
}

// unverifiedRepeat checks the signature of a passkey submission the
// workers could not verify (its key was not yet committed) before it is
// answered as a repeat: a passkey repeat is recognised by payload and
// keyid, not signature bytes (DESIGN §1), so its signature must still
// verify before it learns the first decision. nil means it may.
func (l *sequencer) unverifiedRepeat(req *request) *authority.DecisionError {
	if req.verified || !sign.IsPasskeySig(req.env.Sig) {
		return nil
	}
	key, ok := l.engine.SigningKey(req.env.KeyID)
	if !ok {
		return refusal(authority.UnknownKey, "key %s is not bound in this log", req.env.KeyID)
	}
	if err := req.env.VerifyKey(key); err != nil {
		return refusal(authority.BadSignature, "signature by key %s does not verify: %v", req.env.KeyID, err)
	}
	return nil
}

// sequencer orders submissions, decides them and commits batches.
func (l *sequencer) run() {
	defer l.wg.Done()
	defer l.drain() // the last batch's commit finishes before Close returns
	for {
		var first *request
		if l.carry != nil {
			first, l.carry = l.carry, nil
		} else {
			select {
			case first = <-l.seqQ:
			case <-l.closing:
				// Drain: everything already queued is still decided.
				select {
				case first = <-l.seqQ:
				default:
					return
				}
			}
		}
		batch, bytes := []*request{first}, len(first.data)
		var timer <-chan time.Time
		if l.opts.MaxDelay > 0 {
			timer = time.After(l.opts.MaxDelay)
		}
	collect:
		for len(batch) < l.opts.MaxBatch {
			var next *request
			select {
			case next = <-l.seqQ:
			default:
				if timer == nil {
					break collect
				}
				select {
				case next = <-l.seqQ:
				case <-timer:
					break collect
				}
			}
			if bytes+len(next.data) > l.opts.MaxBatchBytes {
				l.carry = next
				break
			}
			batch, bytes = append(batch, next), bytes+len(next.data)
		}
		l.process(batch)
	}
}

// pending is a batch entry waiting for its commit.
type pendingAnswer struct {
	req   *request
	res   *Result
	err   error
	dupOf int // index into the batch of an identical submission, or -1
}

// process decides a batch and commits it in one transaction: it checks
// the sequencer may decide (begin), decides each submission in order on
// the state the previous ones leave (decide), and hands the batch to its
// commit (seal). Any step that cannot go on has already answered every
// submitter and returns false.
func (l *sequencer) process(batch []*request) {
	l.wfx.job++
	if !l.begin(batch) {
		return
	}
	d := l.newDraft(batch)
	for i, req := range batch {
		if !l.decide(d, i, req) {
			return
		}
	}
	if !l.absorb(d) {
		return
	}
	l.seal(d)
}

// absorb decides into the draft the submissions that arrive while the
// batch in flight is still being stored, until it is (or the draft is
// full, or the next submission would pass MaxBatchBytes: that one starts
// the next batch). This batch could not commit before then anyway, and
// each of them would otherwise wait in the queue for the batch after it.
// So under load a batch holds what arrived during one store commit, and
// what a batch pays once (the store's syncs, the signed head, the
// checkpoint's signature) is shared by more entries. The price: the
// batch's prepare runs after the wait, not during it. Submissions are
// still decided in the order they were queued. It returns false when the
// whole batch failed and every submitter has its answer.
func (l *sequencer) absorb(d *draft) bool {
	j := l.inflight
	if j == nil || l.carry != nil {
		return true
	}
	for len(d.batch) < l.opts.MaxBatch {
		var req *request
		select {
		case <-j.stored:
			return true
		case req = <-l.seqQ:
		}
		// With it, whatever else is queued, as one group: on a store that
		// looks dedup hashes up together, one query for the group.
		var group []*request
		for req != nil {
			if d.bytes+len(req.data) > l.opts.MaxBatchBytes {
				l.carry = req // it starts the next batch
				break
			}
			d.bytes += len(req.data)
			group = append(group, req)
			req = nil
			if len(d.batch)+len(group) < l.opts.MaxBatch {
				select {
				case req = <-l.seqQ:
				default:
				}
			}
		}
		if len(group) > 0 {
			d.known = l.prefetchDedup(group)
		}
		for _, req := range group {
			d.batch = append(d.batch, req)
			d.answers = append(d.answers, pendingAnswer{})
			if !l.decide(d, len(d.batch)-1, req) {
				return false
			}
		}
		if l.carry != nil {
			return true
		}
	}
	return true
}

// begin makes the sequencer ready to decide batch: not failed, holding
// the lease on a shared store, recovered from a batch in flight that
// failed, and with the engine's cache trimmed when it has grown large.
func (l *sequencer) begin(batch []*request) bool {
	if f := l.failed.Load(); f != nil {
		l.drain()
		l.refuseAll(batch, *f)
		return false
	}
	// On a shared store: only the lease holder decides, on the state the
	// store holds under its epoch.
	if err := l.takeLead(); err != nil {
		l.refuseAll(batch, err)
		return false
	}
	// If the batch in flight has already failed, recover before deciding
	// anything on the state it left (without waiting if it is still running).
	if j := l.inflight; j != nil {
		select {
		case <-j.finished:
			l.inflight = nil
			if j.err != nil {
				l.recoverState()
			}
		default:
		}
	}
	if l.engine.CacheLarge() {
		// Trimming the engine's cache is safe only when every record it
		// holds is committed: wait for the batch in flight.
		if err := l.drain(); err != nil {
			l.fail(batch, make([]pendingAnswer, len(batch)), err)
			return false
		}
		l.engine.Committed()
	}
	return true
}

// draft is a batch being decided: its answers so far and what its
// transaction will write.
type draft struct {
	batch     []*request
	answers   []pendingAnswer
	at        time.Time // one time for the whole batch
	loggedAt  string    // at, as leaves carry it
	next      uint64    // the index the next logged submission takes
	seen      map[[32]byte]int
	workflows map[string]bool     // the workflows its leaves join
	wfNew     map[string][]uint64 // and their leaves in each
	b         *storage.Batch
	hashes    []merkle.Hash
	known     *dedupBatch // the dedup hashes of the submissions being decided, looked up together
	bytes     int         // the submissions' size, against MaxBatchBytes
}

func (l *sequencer) newDraft(batch []*request) *draft {
	at := l.opts.Clock().UTC()
	if at.Before(l.lastAt) {
		at = l.lastAt // logged_at never goes backwards
	}
	return &draft{
		batch:     batch,
		answers:   make([]pendingAnswer, len(batch)),
		at:        at,
		loggedAt:  statement.FormatLoggedAt(at),
		next:      l.next,
		seen:      make(map[[32]byte]int, len(batch)),
		workflows: map[string]bool{},
		wfNew:     map[string][]uint64{},
		b:         &storage.Batch{From: l.next},
		known:     l.prefetchDedup(batch),
		bytes:     size(batch),
	}
}

// size is the submissions' total size, as MaxBatchBytes counts it.
func size(batch []*request) int {
	n := 0
	for _, req := range batch {
		n += len(req.data)
	}
	return n
}

// abandon ends a draft that cannot be logged: it waits for the batch in
// flight, then fails every submission of this one (fail discards the
// engine's changes and reloads). It returns false, for decide's callers.
func (l *sequencer) abandon(d *draft, err error) bool {
	l.drain()
	l.fail(d.batch, d.answers, err)
	return false
}

// decide decides the i-th submission of the draft: a refusal, a repeat
// (of one in this batch, one in flight, or one committed), or a decision
// of the engine that is logged. It returns false when the whole batch
// failed and every submitter has its answer.
func (l *sequencer) decide(d *draft, i int, req *request) bool {
	if l.lead.lost() {
		// The lease was lost while this batch was being decided: each
		// read of the rest would wait on a store this server may no
		// longer reach. Its submitters go to the next leader.
		l.fail(d.batch, d.answers, l.lead.notLeader("it lost the lease while deciding"))
		return false
	}
	<-req.ready
	a := &d.answers[i]
	a.req, a.dupOf = req, -1
	req.took = false
	if req.refusal != nil {
		a.err = req.refusal
		return true
	}
	if req.raw {
		d.b.Leaves = append(d.b.Leaves, req.data)
		d.hashes = append(d.hashes, merkle.LeafHash(req.data))
		a.res = &Result{Verdict: authority.Accepted, Index: d.next}
		d.next++
		return true
	}
	if handled, ok := l.repeat(d, a, req); !ok || handled {
		return ok
	}
	dec := l.engine.Decide(authority.Submission{Env: req.env, Verified: req.verified,
		Parsed: req.parsed, Stmt: req.stmt, ParseErr: req.parseErr}, d.next, d.at)
	if err := l.engine.Err(); err != nil {
		// The engine could not read its state: nothing in this batch may
		// be logged.
		return l.abandon(d, err)
	}
	if dec.Verdict == authority.Denied && dec.Code == authority.SeqMismatch && req.prev != nil {
		if w := l.withdrawn(req, dec.Statement); w != nil {
			a.err = w
			return true
		}
	}
	var (
		leafEnv []byte
		link    authority.Link
	)
	switch dec.Verdict {
	case authority.Refused:
		a.err = &authority.DecisionError{Verdict: dec.Verdict, Code: dec.Code, Reason: dec.Reason}
		return true
	case authority.Accepted:
		req.took = true
		leafEnv = req.canon
		link = l.engine.Link(d.next, d.at, dec.Statement)
		if err := l.joinWorkflow(d, dec.Statement.WorkflowID(), link, dec.Statement); err != nil {
			return l.abandon(d, err)
		}
	case authority.Denied:
		if !l.limiter.allow(dec.SignerKey, d.at) {
			a.err = refusal(authority.RateLimited, "key %s has had too many denials; this one was not logged (%s: %s)", dec.SignerKey, dec.Code, dec.Reason)
			return true
		}
		doc, env, err := l.denial(&dec, req.env, d.next, d.at)
		if e := l.engine.Err(); e != nil {
			// The engine could not read the log key's record (a read
			// ended by a lost lease, say): as after Decide, nothing of
			// this batch may be logged.
			return l.abandon(d, e)
		}
		if err != nil {
			a.err = err
			return true
		}
		leafEnv = env
		l.engine.AcceptDenial(doc, d.next)
		link = l.engine.Link(d.next, d.at, doc)
		if err := l.joinWorkflow(d, doc.Workflow, link, doc); err != nil {
			return l.abandon(d, err)
		}
	}
	if err := l.engine.Err(); err != nil {
		// A read of the links (the workflow's last entry) failed: the
		// leaf would miss its link. Nothing of this batch is logged.
		return l.abandon(d, err)
	}
	leaf, err := statement.MarshalLeaf(&statement.Leaf{Envelope: leafEnv, LoggedAt: d.loggedAt,
		PrevInWorkflow: link.PrevInWorkflow, TrustHead: link.TrustHead})
	if err != nil {
		// The worker bounded the envelope's size, so this is a bug; the
		// engine has already applied the decision, so the batch must go.
		return l.abandon(d, fmt.Errorf("building leaf %d: %w", d.next, err))
	}
	d.b.Leaves = append(d.b.Leaves, leaf)
	d.b.Dedup = append(d.b.Dedup, storage.Dedup{Hash: req.hash, Index: d.next})
	d.hashes = append(d.hashes, merkle.LeafHash(leaf))
	a.res = &Result{Verdict: dec.Verdict, Index: d.next, Code: dec.Code, Reason: dec.Reason, Notes: dec.Notes, Hold: dec.Hold, Leaf: leaf}
	d.seen[req.hash] = i
	d.next++
	return true
}

// repeat answers a submission already decided: identical to one earlier
// in this batch, or to one logged before (in flight or committed). It
// reports whether the submission was handled, and ok false when the whole
// batch failed.
func (l *sequencer) repeat(d *draft, a *pendingAnswer, req *request) (handled, ok bool) {
	if j, dup := d.seen[req.hash]; dup {
		if r := l.unverifiedRepeat(req); r != nil {
			a.err = r
			return true, true
		}
		a.dupOf = j
		return true, true
	}
	if _, pending := l.inflightHash(req.hash); pending {
		// A repeat of a submission whose commit is in flight: its
		// decision is known only once that commit is. Wait for it.
		if err := l.drain(); err != nil {
			l.fail(d.batch, d.answers, err)
			return true, false
		}
	}
	prior, err := d.known.prior(l, req.hash)
	if err == nil && prior == nil {
		return false, true
	}
	// A passkey repeat is recognised by payload and keyid, not signature
	// bytes (DESIGN §1): its signature must still verify before it learns
	// the first decision.
	if r := l.unverifiedRepeat(req); err == nil && r != nil {
		a.err = r
		return true, true
	}
	a.res, a.err = prior, err
	return true, true
}

// joinWorkflow records that the leaf about to be logged at d.next, a
// statement of workflow wf (none when wf is empty), joins it: in the
// draft and in the workflow index.
func (l *sequencer) joinWorkflow(d *draft, wf string, link authority.Link, st statement.Statement) error {
	if wf == "" {
		return nil
	}
	d.workflows[wf] = true
	d.wfNew[wf] = append(d.wfNew[wf], d.next)
	return l.wfx.add(l, wf, d.next, link.PrevInWorkflow, st, d.loggedAt)
}

// seal hands a decided draft to its commit: it extends the tree and
// gathers the transaction (prepare), waits for the previous batch's store
// commit, and starts this one's, or answers at once when nothing is to be
// logged.
func (l *sequencer) seal(d *draft) {
	batch, answers := d.batch, d.answers
	j := &job{answers: answers, n: len(d.hashes), hashes: d.seen, workflows: d.workflows, wfNew: d.wfNew,
		stored: make(chan struct{}), finished: make(chan struct{})}
	if len(d.hashes) > 0 {
		if err := l.prepare(j, d.b, d.hashes); err != nil {
			if errors.Is(err, errTxnTooBig) {
				l.split(batch, answers, err)
				return
			}
			l.abandon(d, err)
			return
		}
	}
	// One store commit at a time: this batch was decided on the state the
	// previous one leaves, so it may go only once that one is in the
	// store. The previous batch's signed-head write and answers may still
	// be running; this one's wait for them (commitJob).
	if err := l.drainStored(); err != nil {
		l.fail(batch, answers, err)
		return
	}
	l.wfx.committed(l.wfx.job - 1)
	l.next, l.lastAt = d.next, d.at
	if len(d.hashes) == 0 {
		// Answered with the published head, which must include every
		// batch before: wait for them all.
		if err := l.drain(); err != nil {
			l.fail(batch, answers, err)
			return
		}
		l.answer(j, l.heads.load())
		return
	}
	j.prev, l.inflight = l.inflight, j
	go l.commitJob(j)
}

// job is a decided batch on its way to disk.
type job struct {
	answers   []pendingAnswer
	n         int                 // leaves
	hashes    map[[32]byte]int    // dedup hashes of the submissions it logs
	workflows map[string]bool     // the workflows its leaves join
	wfNew     map[string][]uint64 // and their leaves in each
	prover    *merkle.Prover      // proves its answers from the tiles it writes
	batch     *storage.Batch      // everything its transaction writes
	head      *Head               // the head it commits
	// prev is the batch committed before this one, whose signed-head
	// write and answers go first (nil once they have).
	prev *job
	// stored is closed once the store's commit has returned, with its
	// error in storeErr; finished once the answers are sent (on failure:
	// before they are, so that a submitter retrying at once finds the
	// sequencer's state recovered), with the batch's outcome (the
	// commit's or the signed-head write's error) in err. Each is written
	// before its channel is closed.
	stored   chan struct{}
	storeErr error
	finished chan struct{}
	err      error
}

// prepare extends the tree with a batch's leaves and gathers everything its
// transaction writes: leaves, indexes, new tiles, the engine's changed
// records, the edge and the newly signed checkpoint.
func (l *sequencer) prepare(j *job, b *storage.Batch, hashes []merkle.Hash) error {
	if err := l.builder.AppendBatch(hashes); err != nil {
		return fmt.Errorf("extending the tree: %w", err)
	}
	size, root := l.builder.Size(), l.builder.Root()
	cp, err := l.keys.sign(size, root)
	if err != nil {
		return fmt.Errorf("signing the checkpoint: %w", err)
	}
	edge, err := l.builder.Edge().MarshalBinary()
	if err != nil {
		return err
	}
	flushed := append(l.builder.Flush(), l.builder.Summaries()...) // summaries: see merkle.SummaryTileLevel
	tiles := &recentTiles{tiles: make(map[[2]uint64][]byte, len(flushed)), base: storeTiles{l.store}}
	for _, t := range flushed {
		b.Tiles = append(b.Tiles, storage.Tile{Level: t.Level, Index: t.Index, Data: t.Data})
		tiles.tiles[[2]uint64{t.Level, t.Index}] = t.Data
	}
	j.prover = l.read.prover.Over(tiles)
	l.engine.Dirty(func(k string, v []byte) { b.Records = append(b.Records, storage.Record{Key: k, Value: v}) })
	l.engine.DirtyHints(func(k string, v []byte) { b.Records = append(b.Records, storage.Record{Key: k, Value: v}) })
	l.engine.Written()
	l.wfx.written(func(k string, v []byte) { b.Records = append(b.Records, storage.Record{Key: k, Value: v}) })
	b.Edge, b.Checkpoint = edge, cp
	if b.From == 0 {
		b.Origin = l.origin
	}
	if n := l.store.Weigh(b); n > l.txnBudget {
		return fmt.Errorf("%w: %d entries weigh %d bytes against a budget of %d",
			errTxnTooBig, len(hashes), n, l.txnBudget)
	}
	j.batch, j.head = b, &Head{Size: size, Root: root, Checkpoint: cp}
	return nil
}

// errTxnTooBig is prepare's error for a batch whose transaction would pass
// Badger's size limit.
var errTxnTooBig = errors.New("the batch's transaction is too big")

// split decides again, as two batches, a batch whose transaction would be
// too big: its decisions are undone first (prepare may already have
// extended the tree and taken the engine's records; reloading the
// committed state forgets both). A single submission that is too big on
// its own is refused as too_large, and nothing of it is logged. Rare: a
// full batch of ordinary receipts (MaxBatch 1024) weighs about two thirds
// of the budget, but one statement can change many records (a revocation,
// for one).
func (l *sequencer) split(batch []*request, answers []pendingAnswer, cause error) {
	if err := l.drain(); err != nil {
		l.fail(batch, answers, err)
		return
	}
	if err := l.recoverState(); err != nil {
		l.fail(batch, answers, err)
		return
	}
	l.stats.split()
	if len(batch) == 1 {
		batch[0].done <- answer{err: refusal(authority.TooLarge, "the statement changes too much state to commit in one transaction (%v)", cause)}
		return
	}
	mid := len(batch) / 2
	l.process(batch[:mid])
	l.process(batch[mid:])
}

// inflightHash reports whether the batch in flight logs a submission with
// this dedup hash.
func (l *sequencer) inflightHash(h [32]byte) (int, bool) {
	if l.inflight == nil {
		return 0, false
	}
	i, ok := l.inflight.hashes[h]
	return i, ok
}

// drain waits for the batches in flight, if any, to be answered, and
// returns the last one's error (a batch is answered only after the one
// before it). After an error, everything decided since that batch rests on
// state that was never committed: the caller must fail it.
func (l *sequencer) drain() error {
	j := l.inflight
	if j == nil {
		return nil
	}
	l.inflight = nil
	<-j.finished
	return j.err
}

// drainStored waits until the batch in flight, if any, is in the store:
// the next batch may commit then. If its commit failed, it drains.
func (l *sequencer) drainStored() error {
	j := l.inflight
	if j == nil {
		return nil
	}
	<-j.stored
	if j.storeErr != nil {
		return l.drain()
	}
	return nil
}

// commitJob writes a prepared batch in one transaction with SyncWrites,
// then, once the batch before it is answered, keeps its checkpoint in the
// signed-head file, publishes the new head, and only then answers its
// submissions. So the next batch's store commit can run while this one's
// signed head is synced, and heads are written and published in order.
func (l *sequencer) commitJob(j *job) {
	err := l.commit(j)
	j.storeErr = err
	close(j.stored)
	if p := j.prev; p != nil {
		<-p.finished
		j.prev = nil
	}
	if err == nil {
		if f := l.failed.Load(); f != nil {
			// The batch before could not keep its signed head: this one
			// is in the store, but its checkpoint is never shown.
			err = *f
		} else if err = l.writeHead(j); err != nil {
			err = fmt.Errorf("entries %d..%d are committed, but their checkpoint could not be kept in the signed-head file (%w); the ledger stops appending: restart it",
				j.head.Size-uint64(j.n), j.head.Size-1, err)
			l.failed.Store(&err)
		}
	}
	if err != nil {
		if l.lead.leaser != nil && errors.Is(err, storage.ErrFenced) {
			// Another server sequences the log now: step down, and tell
			// the submitters where to go.
			l.lead.fencedCommit(err)
			l.lead.stepDown("fenced commit", true)
			err = fmt.Errorf("%w: %w", l.lead.notLeader("its commit was fenced"), err)
		} else if l.lead.lost() && !errors.Is(err, ErrNotLeader) {
			// The lease was lost while the batch was being committed.
			err = fmt.Errorf("%w: %w", l.lead.notLeader("it lost the lease during the commit"), err)
		}
		// The sequencer learns of the failure before any submitter does:
		// a submitter that retries at once must find the state recovered,
		// not be refused with this batch's error while its answers are
		// still being sent.
		j.err = err
		close(j.finished)
		for i := range j.answers {
			a := &j.answers[i]
			if a.err == nil {
				a.err, a.res = err, nil
			}
			a.req.done <- answer{err: a.err}
		}
		return
	}
	l.heads.advance(j.head, j.workflows, j.wfNew)
	l.answer(j, j.head)
	close(j.finished)
}

// testHeadWrite, set by tests only, runs before each signed-head write.
var testHeadWrite func(*Head)

// writeHead makes the batch's checkpoint durable in the signed-head file
// (signedhead.go), before anyone sees it.
func (l *sequencer) writeHead(j *job) error {
	start := time.Now()
	if testHeadWrite != nil {
		testHeadWrite(j.head)
	}
	err := l.hf.write(j.head.Checkpoint)
	l.stats.recordHead(time.Since(start))
	return err
}

// answer sends a batch's answers, with the head that includes them.
func (l *sequencer) answer(j *job, head *Head) {
	for i := range j.answers {
		a := &j.answers[i]
		if a.dupOf >= 0 {
			if src := j.answers[a.dupOf].res; src != nil {
				cp := *src
				cp.Duplicate = true
				a.res = &cp
			}
		}
		var prover *merkle.Prover
		if a.res != nil {
			a.res.Head = *head
			if head == j.head {
				prover = j.prover
			}
		}
		a.req.done <- answer{res: a.res, err: a.err, prover: prover}
	}
}

// denial builds and signs the DENIAL for decision d; it leaves the denied
// envelope out only if the DENIAL would not fit in a leaf with it.
func (l *sequencer) denial(d *authority.Decision, env *sign.Parsed, index uint64, at time.Time) (*statement.DenialDoc, []byte, error) {
	for _, with := range []bool{true, false} {
		doc := l.engine.Denial(d, env, index, at, with)
		if doc == nil {
			return nil, nil, fmt.Errorf("DENIAL %d: the log has no GENESIS, or no record of its log key", index)
		}
		payload, err := statement.Marshal(doc)
		if err != nil {
			return nil, nil, fmt.Errorf("building DENIAL %d: %w", index, err)
		}
		key := l.denialKey()
		if key == nil {
			return nil, nil, fmt.Errorf("DENIAL %d: the ledger holds no private key for the DENIAL key %s", index, l.engine.DenialKeyID())
		}
		e, err := sign.Sign(key, statement.Denial.Lower(), payload)
		if err != nil {
			return nil, nil, fmt.Errorf("signing DENIAL %d: %w", index, err)
		}
		c, err := e.Canonical()
		if err != nil {
			return nil, nil, err
		}
		if len(c)+leafOverhead <= statement.MaxLeafSize {
			return doc, c, nil
		}
	}
	return nil, nil, fmt.Errorf("DENIAL %d does not fit in a leaf even without the envelope", index)
}

// commit writes a prepared batch in one transaction; it is durable once
// this returns nil. A commit whose outcome is unknown (the connection to
// the database broke during COMMIT) is resolved by reading the head back
// before anything else is decided: the batch is answered as committed
// only if the store holds its leaves.
func (l *sequencer) commit(j *job) error {
	start := time.Now()
	ctx, cancel := l.lead.commitContext()
	err := l.store.Commit(ctx, j.batch)
	cancel()
	if errors.Is(err, storage.ErrCommitUnknown) {
		err = l.resolveUnknown(j, err)
	}
	if err != nil {
		return err
	}
	l.stats.record(j.n, time.Since(start))
	return nil
}

// resolveUnknown reads the head back after a commit of unknown outcome,
// retrying while the store is unreachable (for at most unknownPatience).
// It returns nil if the batch is committed, an error otherwise.
func (l *sequencer) resolveUnknown(j *job, cause error) error {
	b := j.batch
	deadline := time.Now().Add(unknownPatience)
	// The reads back end when this server loses the lease.
	lease := l.lead.leaseContext()
	for {
		if lease.Err() != nil {
			// This server lost the lease: the next leader reads the
			// outcome from the store, and answers a resent submission
			// with its decision; the submitters need not wait here.
			return fmt.Errorf("%w: %w", l.lead.notLeader("the outcome of its last commit is unknown to this server"), cause)
		}
		ok, err := l.settleAndCheck(lease, b)
		if err == nil {
			if ok {
				return nil
			}
			return fmt.Errorf("%w (read back: the batch is not in the log)", cause)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w; reading the head back also failed: %v", cause, err)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-lease.Done():
		case <-l.closing:
			return fmt.Errorf("%w; closing before the head could be read back", cause)
		}
	}
}

// unknownPatience is how long a commit of unknown outcome waits for the
// store to answer before its submissions get an error (which, like any
// error, promises nothing either way).
const unknownPatience = 30 * time.Second

// settleAndCheck waits out the transaction of unknown outcome, on a
// store that can (storage.Settler), and reports whether b committed; it
// gives up when ctx ends.
func (l *sequencer) settleAndCheck(ctx context.Context, b *storage.Batch) (bool, error) {
	if st := l.caps.Settle; st != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := st.SettleUnknown(sctx)
		cancel()
		if err != nil {
			return false, err
		}
	}
	return l.committed(ctx, b)
}

// committed reports whether the store holds batch b: a head at least as
// large, and b's leaves at their indexes.
func (l *sequencer) committed(ctx context.Context, b *storage.Batch) (bool, error) {
	h, err := l.store.Head(ctx)
	if err != nil {
		return false, err
	}
	if h == nil || h.Size < b.Size() {
		return false, nil
	}
	got, err := l.store.Leaves(ctx, b.From, len(b.Leaves))
	if err != nil {
		return false, err
	}
	if len(got) != len(b.Leaves) {
		return false, nil
	}
	for i := range got {
		if !bytes.Equal(got[i], b.Leaves[i]) {
			return false, nil
		}
	}
	return true, nil
}

// refuseAll answers every submission of a batch that is not decided.
func (l *sequencer) refuseAll(batch []*request, err error) {
	for _, r := range batch {
		<-r.ready
		r.done <- answer{err: err}
	}
}

// fail answers a batch that could not be committed and rebuilds the
// in-memory state from what is stored, so the ledger keeps working.
func (l *sequencer) fail(batch []*request, answers []pendingAnswer, err error) {
	if l.lead.lost() && !errors.Is(err, ErrNotLeader) {
		// The lease was lost while the batch was decided (its reads end
		// with the lease): the submitters go to the next leader.
		err = fmt.Errorf("%w: %w", l.lead.notLeader("it lost the lease while deciding"), err)
	}
	if e := l.recoverState(); e != nil {
		err = fmt.Errorf("%w; reloading after it also failed: %v", err, e)
	}
	for i := range batch {
		batch[i].took = false // nothing of it was committed
		a := answers[i]
		if a.req == nil { // not reached before the failure
			a.req = batch[i]
			<-a.req.ready
		}
		if a.err == nil {
			a.err = err
			a.res = nil
		}
		a.req.done <- answer{err: a.err, res: nil}
	}
}

// recoverState forgets everything decided since the last commit: the
// engine's cached changes, the tree builder's leaves and the next index.
// On a server that has lost the lease its reads end at once (the lease
// context): it decides nothing more until it takes the lease again, and
// then it reloads everything (takeLead).
func (l *sequencer) recoverState() error {
	l.engine.Discard()
	l.wfx.discard()
	l.next = l.heads.load().Size
	return l.reload(l.lead.leaseContext())
}

// reload rebuilds the tree builder from committed tiles, until ctx ends.
func (l *sequencer) reload(ctx context.Context) error {
	sh, err := l.store.Head(ctx)
	if err != nil {
		return err
	}
	edge := merkle.NewEdge()
	if sh != nil {
		if edge, err = merkle.ParseEdge(sh.Edge); err != nil {
			return err
		}
	}
	b, err := merkle.NewBuilderSummaries(edge, leaseTiles{ctx, l.store})
	if err != nil {
		return err
	}
	l.builder = b
	return nil
}

// leaseTiles reads committed tiles for the tree builder until ctx ends.
type leaseTiles struct {
	ctx context.Context
	st  storage.Store
}

func (t leaseTiles) ReadTile(level, index uint64) ([]byte, error) {
	v, err := t.st.Tile(t.ctx, level, index)
	if err == nil && v == nil {
		return nil, fmt.Errorf("tile %d/%d is not stored", level, index)
	}
	return v, err
}

// dedupBatch is what one query told of a batch's submission hashes, on a
// store where each read is a round trip (storage.DedupBatcher): the
// committed index of each it holds. A hash the batch in flight logs
// (recheck) may be committed after the query ran, so it is looked up
// again, after that batch. A nil dedupBatch looks every hash up alone.
type dedupBatch struct {
	found   map[[32]byte]uint64
	recheck map[[32]byte]bool
}

// prefetchDedup looks up the batch's submission hashes at once, on a store
// that can (nil otherwise, or if the query failed: each is then looked up
// alone, and an error is reported there).
func (l *sequencer) prefetchDedup(batch []*request) *dedupBatch {
	db, ok := l.caps.DedupBatch, l.caps.DedupBatch != nil
	if !ok || len(batch) < 2 {
		return nil
	}
	hs := make([][32]byte, 0, len(batch))
	for _, req := range batch {
		<-req.ready
		if !req.raw && req.refusal == nil {
			hs = append(hs, req.hash)
		}
	}
	if len(hs) < 2 {
		return nil
	}
	d := &dedupBatch{recheck: map[[32]byte]bool{}}
	for _, h := range hs {
		if _, pending := l.inflightHash(h); pending {
			d.recheck[h] = true
		}
	}
	found, err := db.DedupMany(l.lead.leaseContext(), hs)
	if err != nil {
		return nil
	}
	d.found = found
	return d
}

// prior is priorDecision, answered from the batch's query where it can.
func (d *dedupBatch) prior(l *sequencer, h [32]byte) (*Result, error) {
	if d == nil || d.recheck[h] {
		return l.priorDecision(h)
	}
	index, ok := d.found[h]
	if !ok {
		return nil, nil
	}
	return l.priorAt(index)
}

// priorDecision returns the logged decision for a submission whose exact
// bytes were decided before, or nil.
func (l *sequencer) priorDecision(h [32]byte) (*Result, error) {
	index, ok, err := l.store.Dedup(l.lead.leaseContext(), h)
	if err != nil || !ok {
		return nil, err
	}
	return l.priorAt(index)
}

// priorAt is the logged decision at index, the entry a dedup hash names.
func (l *sequencer) priorAt(index uint64) (*Result, error) {
	e, err := l.read.Entry(index)
	if err != nil {
		return nil, err
	}
	r := &Result{Verdict: authority.Accepted, Index: index, Duplicate: true}
	if den, ok := e.Statement.(*statement.DenialDoc); ok && e.Envelope.KeyID != "" {
		r.Verdict, r.Code, r.Reason = authority.Denied, authority.Code(den.ReasonCode), den.Reason
	}
	if rc, ok := e.Statement.(*statement.ReceiptDoc); ok && rc.IsPending() {
		// A repeat of a held receipt is answered held, as the first time.
		if p := l.read.StateView().Pending(rc.ReceiptID); p != nil && p.Hold != nil && p.Index == index {
			exp, _ := statement.ParseLoggedAt(p.Hold.Deadline)
			r.Hold = &authority.HoldInfo{ExpiresAt: exp, Rules: p.Hold.Rules}
		}
	}
	return r, nil
}

// withdrawn returns the refusal of a statement of a Batch denied
// seq_mismatch only because earlier statements of its key in the batch
// were not accepted: its seq is above the key's next one by at most the
// number of those statements. Otherwise it returns nil and the DENIAL
// stands (a seq below the next is a replay; one further above is not the
// batch's doing).
func (l *sequencer) withdrawn(req *request, st statement.Statement) *authority.DecisionError {
	if st == nil {
		return nil
	}
	key := req.env.KeyID
	k := l.engine.Key(key)
	if k == nil {
		return nil
	}
	missed := uint64(0)
	first := uint64(0) // the seq of the earliest one not accepted
	for p := req.prev; p != nil; p = p.prev {
		if p.env == nil || p.env.KeyID != key || p.took {
			continue
		}
		missed++
		if p.stmt != nil {
			first = p.stmt.Head().Seq
		}
	}
	seq, want := st.Head().Seq, k.LastSeq+1
	if missed == 0 || seq <= want || seq-want > missed {
		return nil
	}
	why := fmt.Sprintf("%d earlier statement(s) of key %s in this batch were not accepted", missed, key[:min(16, len(key))])
	if first != 0 {
		why = fmt.Sprintf("%s (from seq %d on)", why, first)
	}
	return refusal(authority.Withdrawn, "not decided: %s, so seq %d is above the key's next seq %d; denied statements consume no seq: sign it again with seq %d and send it again", why, seq, want, want)
}
