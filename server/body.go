package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/custodylog/custody/authority"
)

// # What a refused or oversized body costs
//
// A flood of bodies over the cap, each on a new connection (the server
// closes the connection of a body it refused as too large), cost the
// server, each: 128 KiB read into a slice io.ReadAll grew by doubling
// (about 300 KiB of garbage), then the rest of the body read and thrown
// away by Go's server before it closed the connection. Measured on two
// cores with 8 clients flooding 200 KiB bodies: 26 collections in 2 s,
// the collector marking a third of the time, 6.7 goroutines waiting to
// run on average (0.5 without), and honest appends at 11–45% of their
// rate; with never-read event streams open besides (whose blocked writes
// keep their pages of events live, so every collection marks more), 18–28%.
//
// So a body is refused before a byte of it is read when its
// Content-Length is over the cap, and is otherwise read into chunks
// taken from a pool as its bytes arrive (a slow body holds what it has
// sent, rounded up to a chunk), then copied once into a slice of its
// exact size: a body refused as too large, sent chunked, leaves no
// garbage. A refused body's connection is closed after the answer and
// its read deadline set to now, so Go's server does not read the rest.

// tooLargeHold is how long the answer to a body refused as too large is
// held, while it counts as one of its client's bodies being read.
const tooLargeHold = time.Second

// bodyChunk is the size of the pooled chunks a body is read into.
const bodyChunk = 4 << 10

var bodyChunks = sync.Pool{New: func() any { b := make([]byte, bodyChunk); return &b }}

// declaredTooLarge answers 413 to a request whose Content-Length is over
// limit (what before reading its body), closing its connection unread,
// and reports whether it did.
func (s *Server) declaredTooLarge(w http.ResponseWriter, r *http.Request, start time.Time, what string, limit int) bool {
	if r.ContentLength <= int64(limit) {
		return false
	}
	closeUnread(w)
	s.holdTooLarge(r)
	s.refused(w, start, authority.TooLarge, what+" exceeds "+strconv.Itoa(limit)+" bytes (Content-Length "+strconv.FormatInt(r.ContentLength, 10)+")")
	return true
}

// holdTooLarge holds the answer to r, whose body was refused as too
// large, for tooLargeHold (less if the server stops), counted as one of
// its client's bodies being read: a client that sends them over and over
// gets at most MaxReadingPerAddr answers a tooLargeHold, its further
// connections held by the listener meanwhile (conns.go), and spends its
// own time waiting rather than sending. No honest client sends such a
// body twice.
func (s *Server) holdTooLarge(r *http.Request) {
	key := clientKey(r)
	if !s.cl.reading.take(key, s.opts.MaxReadingPerAddr) {
		return
	}
	defer s.cl.reading.release(key)
	t := time.NewTimer(tooLargeHold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stopping:
	}
}

// closeUnread makes the connection close after the answer, the rest of
// the request's body never read (Go's server would otherwise read up to
// 256 KiB of it, as slowly as it comes, to keep the connection).
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// readBody reads r's body, at most limit bytes: an *http.MaxBytesError
// past it (the connection then closes unread).
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	var chunks []*[]byte
	defer func() {
		for _, c := range chunks {
			bodyChunks.Put(c)
		}
	}()
	n, last := 0, 0 // bytes read; bytes in the last chunk
	for {
		if len(chunks) == 0 || last == bodyChunk {
			chunks = append(chunks, bodyChunks.Get().(*[]byte))
			last = 0
		}
		c := *chunks[len(chunks)-1]
		k, err := r.Body.Read(c[last:])
		last += k
		n += k
		if n > limit {
			closeUnread(w)
			return nil, &http.MaxBytesError{Limit: int64(limit)}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	body := make([]byte, 0, n)
	for i, c := range chunks {
		if i < len(chunks)-1 {
			body = append(body, *c...)
		} else {
			body = append(body, (*c)[:last]...)
		}
	}
	return body, nil
}
