package client

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/server/api"
)

// Stream is one connection to a workflow's event stream
// (GET /v1/workflows/{id}/events). Next returns its entries in log order.
type Stream struct {
	cancel context.CancelFunc
	resp   *http.Response
	sc     *bufio.Scanner
	idle   *time.Timer
	// Last is the index of the last entry Next returned (or the index the
	// stream started after): reconnect with it to miss nothing.
	Last uint64

	closeOnce sync.Once
}

// IdleTimeout is how long a stream may stay silent (the server sends a
// comment every 15s by default) before it is taken for dead.
var IdleTimeout = 45 * time.Second

// Events opens a workflow's event stream after the entry at index after
// (0: from the workflow's first entry) and returns once the server has
// answered, so that every entry logged after this call returns is on the
// stream. Reconnecting with the last index seen (Stream.Last) misses
// nothing and repeats nothing.
func (c *Client) Events(ctx context.Context, workflow string, after uint64) (*Stream, error) {
	return c.events(ctx, workflow, after, nil)
}

// StepProof opens a workflow's stream as the runtime executing a step of
// it (api.HeaderStreamStep): the index of the step's pending RECEIPT and
// the signature, by the key that signed it, over api.StreamStepMessage.
// The server keeps capacity for such streams that no other client can
// take. Runtime.Execute sends one.
type StepProof struct {
	Index     uint64
	Signature []byte
}

// NewStepProof signs the proof for the pending RECEIPT at index in
// workflow, with the key that signed it.
func (c *Client) NewStepProof(priv ed25519.PrivateKey, workflow string, index uint64) StepProof {
	return StepProof{Index: index, Signature: ed25519.Sign(priv, api.StreamStepMessage(c.Origin(), workflow, index))}
}

func (c *Client) events(ctx context.Context, workflow string, after uint64, proof *StepProof) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base()+api.PathWorkflows+url.PathEscape(workflow)+"/events", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	// Last-Event-ID is how a browser's EventSource resumes; the server
	// takes it over ?after=.
	req.Header.Set("Last-Event-ID", strconv.FormatUint(after, 10))
	req.Header.Set("Accept", "text/event-stream")
	if proof != nil {
		req.Header.Set(api.HeaderStreamStep, strconv.FormatUint(proof.Index, 10)+" "+base64.StdEncoding.EncodeToString(proof.Signature))
	}
	// No overall timeout on a stream: liveness is the idle timer's job.
	hc := &http.Client{Transport: c.hc.Transport}
	idle := time.AfterFunc(IdleTimeout, cancel)
	resp, err := hc.Do(req)
	if err != nil {
		idle.Stop()
		cancel()
		return nil, fmt.Errorf("ledger server: events of %s: %w", workflow, err)
	}
	if resp.StatusCode != http.StatusOK {
		idle.Stop()
		defer cancel()
		defer resp.Body.Close()
		return nil, httpError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	return &Stream{cancel: cancel, resp: resp, sc: sc, idle: idle, Last: after}, nil
}

// Next returns the next entry, waiting for it. It returns an error when
// the stream ends (server shutdown, network failure, idle timeout, Close
// or the context given to Events ending).
func (s *Stream) Next() (*api.Entry, error) {
	var id, event string
	var data []byte
	for s.sc.Scan() {
		s.idle.Reset(IdleTimeout)
		line := s.sc.Text()
		switch {
		case line == "":
			if data == nil {
				id, event = "", ""
				continue
			}
			if event != "" && event != api.EventEntry {
				id, event, data = "", "", nil
				continue
			}
			var e api.Entry
			if err := json.Unmarshal(data, &e); err != nil {
				return nil, fmt.Errorf("event stream: %w", err)
			}
			if id != strconv.FormatUint(e.Index, 10) || e.Index <= s.Last {
				return nil, unverified("event stream: entry %d (id %q) after %d", e.Index, id, s.Last)
			}
			if err := checkEntry(&e, nil); err != nil {
				return nil, err
			}
			s.Last = e.Index
			return &e, nil
		case strings.HasPrefix(line, ":"):
			// A comment: keep-alive.
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				event = value
			case "data":
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
	}
	err := s.sc.Err()
	if err == nil {
		err = fmt.Errorf("event stream: the server ended it")
	}
	return nil, err
}

// Close ends the stream.
func (s *Stream) Close() {
	s.closeOnce.Do(func() {
		s.idle.Stop()
		s.cancel()
		s.resp.Body.Close()
	})
}

// Watch follows a workflow's entries after index after, calling fn for
// each in log order, reconnecting (with the last index seen) when the
// stream drops, until ctx ends or fn returns false. connected, if not
// nil, is called after each successful connection. It returns ctx's error,
// or nil when fn stopped it.
func (c *Client) Watch(ctx context.Context, workflow string, after uint64, connected func(), fn func(*api.Entry) bool) error {
	return c.watchEntries(ctx, workflow, after, nil, connected, fn)
}

// WatchStep is Watch for the runtime executing the step proof names: its
// streams take the capacity the server keeps for steps being executed.
func (c *Client) WatchStep(ctx context.Context, workflow string, after uint64, proof StepProof, connected func(), fn func(*api.Entry) bool) error {
	return c.watchEntries(ctx, workflow, after, &proof, connected, fn)
}

func (c *Client) watchEntries(ctx context.Context, workflow string, after uint64, proof *StepProof, connected func(), fn func(*api.Entry) bool) error {
	wait := backoff.Backoff{First: 50 * time.Millisecond, Max: 2 * time.Second}
	for {
		s, err := c.events(ctx, workflow, after, proof)
		if err == nil {
			wait.Reset()
			if connected != nil {
				connected()
			}
			for {
				e, err := s.Next()
				if err != nil {
					break
				}
				after = e.Index
				if !fn(e) {
					s.Close()
					return nil
				}
			}
			s.Close()
		}
		if !wait.Wait(ctx) {
			return ctx.Err()
		}
	}
}
