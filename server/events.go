package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/custodylog/custody/server/api"
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
// Options.KeepAlive. See readcap.go for what streams may take.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	wf := r.PathValue("id")
	var after uint64
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		v, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "Last-Event-ID "+strconv.Quote(id)+" is not an entry index")
			return
		}
		after = v
	} else {
		v, _, ok := uintParam(w, r, "after", false)
		if !ok {
			return
		}
		after = v // 0: from the first entry (index 0 is GENESIS, never in a workflow)
	}
	if ok, err := s.l.WorkflowExists(wf); err != nil {
		s.readError(w, r, err)
		return
	} else if !ok {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "workflow "+strconv.Quote(wf)+" has no entries: there is nothing to watch")
		return
	}
	addr := clientAddr(r)
	if !s.addrs.take(addr, s.opts.MaxStreamsPerAddr) {
		s.unavailable(w, api.CodeOverloaded, "too many event streams open from "+addr+"; close some or retry later")
		return
	}
	defer s.addrs.release(addr)
	select {
	case s.streams <- struct{}{}:
	default:
		s.unavailable(w, api.CodeOverloaded, "too many event streams open; retry later")
		return
	}
	defer func() { <-s.streams }()
	rc := http.NewResponseController(w)
	// The server's ReadTimeout would end a long stream (and cancel its
	// context): a stream reads nothing after its request.
	rc.SetReadDeadline(time.Time{})
	heads, stop := s.l.WatchWorkflow(wf) // before the first read, so that no head is missed
	defer stop()
	s.m.streams.Inc()
	defer s.m.streams.Dec()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(format string, args ...any) error {
		// The server's WriteTimeout would end a long stream: each write
		// gets its own deadline instead.
		rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	// A write blocked on a client that does not read ends when the stream
	// must: on shutdown, or when the client's context ends.
	ctx := r.Context()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.stopping:
		}
		rc.SetWriteDeadline(time.Now())
	}()
	if write(": watching %s after %d\n\n", wf, after) != nil {
		return
	}
	keepAlive := time.NewTicker(s.opts.KeepAlive)
	defer keepAlive.Stop()
	for {
		// Only entries under the published head: their proofs exist. Read
		// in pages from the workflow index, one heavy-read token a page.
		size := s.l.Head().Size
		for more := true; more; {
			release, ok := s.heavyWait(ctx)
			if !ok {
				return
			}
			var idx []uint64
			var err error
			idx, more, err = s.l.WorkflowRange(ctx, wf, after, streamPage)
			var events [][]byte
			if err == nil {
				events, err = s.encodeEvents(idx, size)
			}
			release()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("event stream", "workflow", wf, "err", err)
				}
				return
			}
			for k, ev := range events {
				if write("%s", ev) != nil {
					return
				}
				after = idx[k]
			}
			if len(events) < len(idx) {
				break // the rest is above the published head
			}
		}
	wait:
		select {
		case c := <-heads:
			if !c.Missed {
				// A commit of this workflow, and none was missed: it says
				// which of its leaves are this workflow's, so send them
				// with no store read and no token (each encoded once for
				// every stream).
				var idx []uint64
				for _, i := range c.Indexes[wf] {
					if i > after {
						idx = append(idx, i)
					}
				}
				events, err := s.encodeEvents(idx, c.Size)
				if err != nil {
					s.log.Warn("event stream", "workflow", wf, "err", err)
					return
				}
				if len(events) > 0 {
					// One write and one flush for the commit's events.
					if write("%s", bytes.Join(events, nil)) != nil {
						return
					}
					after = idx[len(events)-1]
				}
				goto wait
			}
		case <-keepAlive.C:
			if write(": keep-alive\n\n") != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-s.stopping:
			write(": shutting down\n\n")
			return
		}
	}
}

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
