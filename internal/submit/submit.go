// Package submit appends a stream of signed envelopes, one JSON document a
// line, to a log, and reports each one's answer in input order.
//
// It promises that the log sees the envelopes in input order, and that
// each answer is reported only once the log gave it (durable under a
// signed checkpoint) and in input order, whatever is in flight. A local
// ledger (one that takes Submit) is fed by one goroutine, in order, with a
// window of Window submissions in flight, so that they are decided in
// order and committed in batches. A server gets n at a time: with n = 1
// each envelope is sent once the previous one was answered, so the log's
// order is the input's; with more, for independent envelopes only, the
// log's order is not guaranteed.
//
// It decides nothing: an [Answer] is the ledger's verdict as it came. A
// failure of the log itself (storage, a closed ledger, an interrupt) is
// returned, the first one, after the answers the log did give.
package submit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/statement"
)

// MaxLine bounds one line of the input, well above the largest submission
// the ledger reads.
const MaxLine = 4 << 20

// Window is how many envelopes a local ledger keeps in flight while
// keeping their order.
const Window = 512

// Log is where envelopes go: a *ledger.Ledger, or a server reached over
// HTTP (internal/remotelog).
type Log interface {
	Append(ctx context.Context, envelope []byte) (*ledger.Result, error)
}

// local is a log that sequences submissions in the order one goroutine
// makes them (a *ledger.Ledger).
type local interface {
	Submit(context.Context, []byte) (*ledger.Pending, error)
}

// Answer is what became of one envelope; it is what custody append prints
// with --json, one object a line.
type Answer struct {
	Line           int     `json:"line"`
	Verdict        string  `json:"verdict"` // accepted, held, denied, refused
	Index          *uint64 `json:"index,omitempty"`
	ExpiresAt      string  `json:"expires_at,omitempty"` // held: the approval deadline
	ReasonCode     string  `json:"reason_code,omitempty"`
	Reason         string  `json:"reason,omitempty"`
	Duplicate      bool    `json:"duplicate,omitempty"`
	CheckpointSize uint64  `json:"checkpoint_size,omitempty"`
}

// OK reports whether the envelope was logged and accepted (held is an
// accepted pending receipt waiting for approval).
func (a Answer) OK() bool { return a.Verdict == "accepted" || a.Verdict == "held" }

// Input counts the bytes read from a reader, for progress.
type Input struct {
	r     io.Reader
	n     atomic.Int64
	total int64
}

// NewInput reads r, whose size is total bytes (-1 if unknown).
func NewInput(r io.Reader, total int64) *Input { return &Input{r: r, total: total} }

func (in *Input) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	in.n.Add(int64(n))
	return n, err
}

// Percent is how much of the input was read, 0..100; -1 when its size is
// unknown.
func (in *Input) Percent() int64 {
	if in.total <= 0 {
		return -1
	}
	return in.n.Load() * 100 / in.total
}

// submission is one envelope in flight.
type submission struct {
	line int
	res  *ledger.Result
	err  error
	done chan struct{}
}

// All submits every envelope of in (blank lines are skipped) with at most
// n in flight, calls each with the answers in input order, and returns
// how many were not accepted (denied or refused). An error each returns
// ends the stream.
func All(ctx context.Context, l Log, in io.Reader, n int, each func(Answer) error) (int, error) {
	loc, isLocal := l.(local)
	if isLocal && n == 1 {
		n = Window
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan *submission, n)
	sem := make(chan struct{}, n)
	var readErr error
	go func() {
		defer close(queue)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), MaxLine)
		for line := 1; sc.Scan(); line++ {
			data := bytes.TrimSpace(sc.Bytes())
			if len(data) == 0 {
				continue
			}
			data = bytes.Clone(data)
			s := &submission{line: line, done: make(chan struct{})}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				readErr = ctx.Err()
				return
			}
			if isLocal {
				p, err := loc.Submit(ctx, data)
				go func() {
					defer close(s.done)
					if s.err = err; err == nil {
						s.res, s.err = p.Wait(ctx)
					}
					<-sem
				}()
			} else {
				go func() {
					defer close(s.done)
					s.res, s.err = l.Append(ctx, data)
					<-sem
				}()
			}
			queue <- s
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("a line is longer than %d bytes", MaxLine)
			}
			readErr = err
		}
	}()
	bad := 0
	var firstErr error
	for s := range queue {
		<-s.done
		a, err := answer(s)
		if err != nil {
			// Storage failure, closed ledger, interrupted: the first is
			// returned once the envelopes in flight are answered.
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !a.OK() {
			bad++
		}
		if err := each(a); err != nil {
			return bad, err
		}
	}
	if firstErr != nil {
		return bad, firstErr
	}
	return bad, readErr
}

// answer reads the log's answer to s; the error is the log's failure.
func answer(s *submission) (Answer, error) {
	out := Answer{Line: s.line}
	var de *authority.DecisionError
	switch {
	case s.err == nil:
		idx := s.res.Index
		out.Index, out.Verdict, out.Duplicate, out.CheckpointSize = &idx, s.res.Verdict.String(), s.res.Duplicate, s.res.Head.Size
		out.ReasonCode, out.Reason = string(s.res.Code), s.res.Reason
		if s.res.Verdict == authority.Accepted && s.res.Hold != nil {
			out.Verdict, out.ExpiresAt = "held", statement.FormatLoggedAt(s.res.Hold.ExpiresAt)
		}
	case errors.As(s.err, &de):
		out.Verdict, out.ReasonCode, out.Reason = "refused", string(de.Code), de.Reason
	default:
		return out, fmt.Errorf("line %d: %w", s.line, s.err)
	}
	return out, nil
}
