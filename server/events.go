package server

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// getEvents streams a workflow's entries as server-sent events:
//
//	id: <index>
//	event: entry
//	data: <api.Entry JSON>
//
// It starts after ?after=N, or after the Last-Event-ID a reconnecting
// client sends (the index of the last entry it saw), or with the
// workflow's first entry. Entries come in log order, each once, and only
// once the checkpoint that holds them is published. A workflow that does
// not exist is answered 404 (a runtime subscribes to a workflow it holds a
// grant in, which exists). Idle streams get a comment line every
// Options.KeepAlive. A stream whose client does not keep up is cut (see
// fanout.go), when it still can be told with a last event
//
//	id: <index of the last entry sent>
//	event: resume
//	data: <api.Resume JSON>
//
// after which the client reconnects with that Last-Event-ID. See
// readcap.go for what streams may take.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	wf := r.PathValue("id")
	after, ok := s.streamStart(w, r, wf)
	if !ok {
		return
	}
	release, ok := s.admitStream(w, r, wf)
	if !ok {
		return
	}
	defer release()
	es := s.openStream(w, r, wf, after)
	defer es.close()
	if !es.greet(after) {
		return
	}
	es.run()
}

// streamStart reads where a stream request starts (the index it
// resumes after) and checks that its workflow exists, or answers why
// not.
func (s *Server) streamStart(w http.ResponseWriter, r *http.Request, wf string) (after uint64, ok bool) {
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		v, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "Last-Event-ID "+strconv.Quote(id)+" is not an entry index")
			return 0, false
		}
		after = v
	} else {
		v, _, ok := uintParam(w, r, "after", false)
		if !ok {
			return 0, false
		}
		after = v // 0: from the first entry (index 0 is GENESIS, never in a workflow)
	}
	if after > MaxEventIndex {
		// No entry can ever follow it: such a stream would hold a slot
		// and deliver nothing, forever.
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("Last-Event-ID or ?after= %d: no entry can follow it (entry indexes stay below 2^62; a stream resumes after an index it was sent)", after))
		return 0, false
	}
	if ok, err := s.l.WorkflowExists(wf); err != nil {
		s.readError(w, r, err)
		return 0, false
	} else if !ok {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "workflow "+strconv.Quote(wf)+" has no entries: there is nothing to watch")
		return 0, false
	}
	return after, true
}

// eventStream is one admitted stream of a workflow's events: its
// connection, its place in the workflow's topic (fanout.go), and the
// time of its last write. Its methods run on the handler's goroutine,
// except the watchdog.
type eventStream struct {
	s   *Server
	w   http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
	wf  string
	sub *subscriber
	t   *topic
	// lastFlush is when the stream last wrote events.
	lastFlush time.Time
	// finish guards finished, set when the handler returns; done is
	// closed then (see watchdog).
	finish   sync.Mutex
	finished bool
	done     chan struct{}
}

// openStream joins the workflow's topic (before the first read, so that
// no commit is missed) and answers 200 with the stream's headers.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, wf string, after uint64) *eventStream {
	rc := http.NewResponseController(w)
	// The server's ReadTimeout would end a long stream (and cancel its
	// context): a stream reads nothing after its request.
	rc.SetReadDeadline(time.Time{})
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		setSendBuffer(c)
	}
	es := &eventStream{s: s, w: w, rc: rc, ctx: r.Context(), wf: wf, done: make(chan struct{})}
	es.sub = &subscriber{kick: make(chan struct{}), cut: func() { rc.SetWriteDeadline(time.Now()) }}
	es.sub.cursor.Store(after)
	es.t = s.hub.join(wf, es.sub)
	s.m.streams.Inc()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	go es.watchdog()
	return es
}

// close ends the stream's hold on the connection and its topic.
func (es *eventStream) close() {
	es.finish.Lock()
	es.finished = true
	es.finish.Unlock()
	close(es.done)
	es.s.m.streams.Dec()
	es.s.hub.leave(es.t, es.sub)
}

// watchdog ends a write blocked on a client that does not read when the
// stream must end: on shutdown, or when the client's context ends; never
// after the handler has returned (the connection may then serve another
// request).
func (es *eventStream) watchdog() {
	select {
	case <-es.ctx.Done():
	case <-es.s.stopping:
	case <-es.done:
	}
	es.finish.Lock()
	if !es.finished {
		es.rc.SetWriteDeadline(time.Now())
	}
	es.finish.Unlock()
}

// greet writes the stream's first line; false if the client is gone.
func (es *eventStream) greet(after uint64) bool {
	es.rc.SetWriteDeadline(time.Now().Add(es.s.opts.StreamWriteTimeout))
	_, err := fmt.Fprintf(es.w, ": watching %s after %d\n\n", es.wf, after)
	return err == nil && es.rc.Flush() == nil
}

// stopping reports whether the stream must end: the server stops, or the
// client's context ended.
func (es *eventStream) stopping() bool {
	select {
	case <-es.s.stopping:
		return true
	default:
		return es.ctx.Err() != nil
	}
}

// write sends bs and flushes, within Options.StreamWriteTimeout (the
// server's WriteTimeout would end a long stream). A stream cut meanwhile
// (sub.cut) writes nothing more.
func (es *eventStream) write(bs ...[]byte) error {
	es.rc.SetWriteDeadline(time.Now().Add(es.s.opts.StreamWriteTimeout))
	if es.sub.behind.Load() || es.stopping() {
		return errStreamEnded
	}
	for _, b := range bs {
		if _, err := es.w.Write(b); err != nil {
			return err
		}
	}
	return es.rc.Flush()
}

// ended accounts for a stream that ends on a failed write: a client that
// stopped reading (the deadline passed, or it fell out of the ring) was
// cut.
func (es *eventStream) ended(err error) {
	select {
	case <-es.s.stopping:
		return
	default:
	}
	// (A failed write cancels the request's context: only the server's
	// stopping says the deadline was not the client's doing.)
	if es.sub.behind.Load() || errors.Is(err, os.ErrDeadlineExceeded) {
		es.s.m.streamsCut.Inc()
	}
}

// final tells the client to resume from its last entry, if its
// connection can still take it.
func (es *eventStream) final(reason string, cut bool) {
	if cut {
		es.s.m.streamsCut.Inc()
	}
	last := es.sub.cursor.Load()
	data, _ := json.Marshal(api.Resume{After: last, Reason: reason})
	es.rc.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(es.w, "id: %d\nevent: %s\ndata: %s\n\n", last, api.EventResume, data)
	es.rc.Flush()
}

// fellBehind is the resume reason of a stream cut for falling out of the
// ring, resuming after cursor.
func (es *eventStream) fellBehind(cursor uint64) string {
	return fmt.Sprintf("this stream fell behind the events the server keeps of its workflow (at most %d); reconnect with Last-Event-ID: %d", es.s.opts.StreamLag, cursor)
}

// run is the stream loop: catch up from the store up to the topic's
// ring, then follow the ring, until the stream ends.
func (es *eventStream) run() {
	keepAlive := time.NewTicker(es.s.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		if es.sub.behind.Load() {
			es.final(es.fellBehind(es.sub.cursor.Load()), true)
			return
		}
		cursor := es.sub.cursor.Load()
		evs, wake, fromStore, base, err := es.t.since(cursor)
		if err != nil {
			es.final("the server stopped following this workflow; reconnect with Last-Event-ID: "+strconv.FormatUint(cursor, 10), false)
			return
		}
		if fromStore {
			if es.sub.live.Load() {
				// It was following the ring and fell out of it.
				es.final(es.fellBehind(cursor), true)
				return
			}
			if !es.catchUp(cursor, base) {
				return
			}
			continue
		}
		es.sub.live.Store(true)
		if len(evs) > 0 {
			if !es.sendLive(evs) {
				return
			}
			continue
		}
		if !es.idle(wake, keepAlive.C) {
			return
		}
	}
}

// catchUp sends one page of the workflow's entries after cursor from the
// store, up to the ring (base): only entries under the published head
// (their proofs exist), under one heavy-read token. False: the stream
// ends.
func (es *eventStream) catchUp(cursor, base uint64) bool {
	s := es.s
	release, ok := s.heavyWait(es.ctx)
	if !ok {
		return false
	}
	idx, more, err := s.l.WorkflowRange(es.ctx, es.wf, cursor, streamPage)
	size := s.l.Head().Size
	var keep []uint64
	for _, i := range idx {
		if i > base || i >= size {
			more = false
			break
		}
		keep = append(keep, i)
	}
	var events [][]byte
	if err == nil {
		events, err = s.encodeEvents(keep, size)
	}
	release()
	if err != nil {
		if es.ctx.Err() == nil {
			s.log.Warn("event stream", "workflow", es.wf, "err", err)
		}
		return false
	}
	if len(events) > 0 {
		if err := es.write(events...); err != nil {
			es.ended(err)
			return false
		}
		es.lastFlush = time.Now()
		cursor = keep[len(events)-1]
	}
	if !more || len(events) < len(keep) {
		// Nothing more of the workflow in the store up to the ring.
		cursor = max(cursor, base)
	}
	es.sub.cursor.Store(cursor)
	return true
}

// sendLive writes the ring's events evs, at most one write every
// streamFlushEvery (a busy workflow's events go out in batches: too soon,
// it waits and sends nothing, and the loop reads the ring again). False:
// the stream ends.
func (es *eventStream) sendLive(evs []streamEvent) bool {
	if d := streamFlushEvery - time.Since(es.lastFlush); d > 0 {
		pause := time.NewTimer(d)
		select {
		case <-pause.C:
		case <-es.sub.kick:
		case <-es.ctx.Done():
		case <-es.s.stopping:
		}
		pause.Stop()
		return !es.stopping()
	}
	bs := make([][]byte, len(evs))
	for k, e := range evs {
		bs[k] = e.b
	}
	if err := es.write(bs...); err != nil {
		es.ended(err)
		return false
	}
	es.lastFlush = time.Now()
	es.sub.cursor.Store(evs[len(evs)-1].idx)
	return true
}

// idle waits for the ring to move (wake), the stream to be cut, or the
// keep-alive tick, when it writes a comment line. False: the stream
// ends.
func (es *eventStream) idle(wake <-chan struct{}, tick <-chan time.Time) bool {
	select {
	case <-wake:
	case <-es.sub.kick:
	case <-tick:
		if err := es.write([]byte(": keep-alive\n\n")); err != nil {
			es.ended(err)
			return false
		}
	case <-es.ctx.Done():
		return false
	case <-es.s.stopping:
		es.rc.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(es.w, ": shutting down\n\n")
		es.rc.Flush()
		return false
	}
	return true
}

// Bounds of an event stream (see fanout.go).
const (
	// streamFlushEvery is the least time between two writes of a stream.
	streamFlushEvery = 50 * time.Millisecond
	// streamSendBuffer is the kernel send buffer of a stream's
	// connection: a client that does not read holds at most this much
	// (and its own receive buffer) before its writes block.
	streamSendBuffer = 64 << 10
)

// errStreamEnded ends a stream that was cut or must stop.
var errStreamEnded = errors.New("event stream ended")

// connKey is the context key under which NewHTTPServer keeps each
// request's connection, for streams to size its send buffer.
type connKey struct{}

// setSendBuffer makes the kernel hold less of what a stream's client has
// not read.
func setSendBuffer(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(streamSendBuffer)
	}
}

// MaxEventIndex is the largest index a stream may start after: no log
// reaches 2^62 entries (at a million a second, 146,000 years), so a
// larger Last-Event-ID or ?after= was never sent by this server and no
// entry could ever follow it.
const MaxEventIndex = 1<<62 - 1

// streamPage is how many entries a stream reads under one heavy-read token.
const streamPage = 256

// encodeEvents returns the events of the entries at idx below size, each
// encoded once for every stream (eventCache).
func (s *Server) encodeEvents(idx []uint64, size uint64) ([][]byte, error) {
	var out [][]byte
	for _, i := range idx {
		if i >= size {
			break
		}
		if ev := s.events.get(i); ev != nil {
			out = append(out, ev)
			continue
		}
		e, err := s.l.Entry(i)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(EntryDoc(e))
		if err != nil {
			return nil, err
		}
		ev := []byte(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", i, api.EventEntry, data))
		s.events.put(i, ev)
		out = append(out, ev)
	}
	return out, nil
}

// admitStream takes what a new stream on wf holds, or answers why not.
//
// A stream a runtime opened for its own step (api.HeaderStreamStep,
// checked by stepStream) takes one of MaxStepStreams, at most two per
// step, and nothing else: no other client can crowd it out, whatever
// they hold. Any other stream takes one of its client's new-stream
// tokens (StreamOpensPerAddr), one of its client's MaxStreamsPerAddr, one
// of the workflow's MaxStreamsPerWorkflow and one of MaxStreams.
func (s *Server) admitStream(w http.ResponseWriter, r *http.Request, wf string) (release func(), ok bool) {
	if r.Header.Get(api.HeaderStreamStep) != "" {
		step, err := s.stepStream(r, wf)
		if err != nil {
			writeError(w, http.StatusForbidden, api.CodeBadRequest, api.HeaderStreamStep+": "+err.Error())
			return nil, false
		}
		if !s.cl.steps.take(step, 2) {
			s.unavailable(w, api.CodeOverloaded, "two streams are open for step "+step+" already; close one")
			return nil, false
		}
		select {
		case s.steps <- struct{}{}:
		default:
			s.cl.steps.release(step)
			s.unavailable(w, api.CodeOverloaded, "too many streams open for steps being executed; retry later")
			return nil, false
		}
		return func() { <-s.steps; s.cl.steps.release(step) }, true
	}
	key := clientKey(r)
	if !s.cl.streams.open(key, time.Now(), s.opts.StreamOpensPerAddr, s.opts.MaxStreamsPerAddr) {
		s.unavailable(w, api.CodeOverloaded, "too many event streams opened from "+key+" in the last seconds; retry later")
		return nil, false
	}
	if !s.cl.streams.take(key, s.opts.MaxStreamsPerAddr) {
		s.unavailable(w, api.CodeOverloaded, "too many event streams open from "+key+"; close some or retry later")
		return nil, false
	}
	if !s.wfs.take(wf, s.opts.MaxStreamsPerWorkflow) {
		s.cl.streams.release(key)
		s.unavailable(w, api.CodeOverloaded, "too many event streams open on workflow "+strconv.Quote(wf)+"; retry later")
		return nil, false
	}
	select {
	case s.streams <- struct{}{}:
	default:
		s.wfs.release(wf)
		s.cl.streams.release(key)
		s.unavailable(w, api.CodeOverloaded, "too many event streams open; retry later")
		return nil, false
	}
	return func() { <-s.streams; s.wfs.release(wf); s.cl.streams.release(key) }, true
}

// stepStream checks a stream request's api.HeaderStreamStep: the entry
// it names is a pending RECEIPT of workflow wf, and the signature over
// api.StreamStepMessage verifies under the key that signed it. It
// returns the key the step's streams are counted under.
func (s *Server) stepStream(r *http.Request, wf string) (string, error) {
	idx, sig, ok := strings.Cut(strings.TrimSpace(r.Header.Get(api.HeaderStreamStep)), " ")
	if !ok {
		return "", errors.New("want \"<index> <base64 signature>\"")
	}
	step, err := strconv.ParseUint(idx, 10, 64)
	if err != nil || step >= s.l.Head().Size {
		return "", fmt.Errorf("%q is not the index of an entry of this log", idx)
	}
	sigBytes, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig))
	if err != nil || len(sigBytes) != ed25519.SignatureSize {
		return "", errors.New("the signature is not a base64 Ed25519 signature")
	}
	e, err := s.l.Entry(step)
	if err != nil {
		return "", fmt.Errorf("entry %d: %v", step, err)
	}
	rec, isReceipt := e.Statement.(*statement.ReceiptDoc)
	if !isReceipt || rec.Workflow != wf || rec.Result != statement.ResultPending {
		return "", fmt.Errorf("entry %d is not a pending RECEIPT of workflow %s", step, wf)
	}
	kr, err := s.l.KeyBinding(e.Envelope.KeyID)
	if err != nil || kr == nil {
		return "", fmt.Errorf("the key of entry %d is not bound", step)
	}
	pub, err := base64.StdEncoding.DecodeString(kr.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize ||
		!ed25519.Verify(ed25519.PublicKey(pub), api.StreamStepMessage(s.l.Origin(), wf, step), sigBytes) {
		return "", fmt.Errorf("the signature does not verify under the key that signed entry %d", step)
	}
	return e.Envelope.KeyID + "/" + idx, nil
}
