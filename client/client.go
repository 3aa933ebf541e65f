// Package client talks to a custody ledger server (package server) for
// agent runtimes written in Go. It trusts nothing the server says that it
// can check: every append answer is verified against the log's
// checkpoint verifier key before it is returned — the checkpoint's
// signature, the inclusion proof of the leaf, and that the leaf holds the
// exact envelope submitted (or, for a denial, a DENIAL signed by the log
// key naming it). A server that lies is caught and the answer is an error.
//
// Runtime builds on it: an agent's key and name, statements filled in and
// signed, and Execute, which runs a step only after the ledger durably
// accepted its pending receipt, and cancels the step when a STOP arrives.
//
// # What it does not check
//
// A verified answer proves the log committed to the entry under a signed
// checkpoint; it does not prove that the log shows every client the same
// tree (use consistency proofs between checkpoints, or witnesses, for
// that), nor that the decision was right (verify a bundle for that:
// VerifyBundle).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/internal/backoff"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/witness"
)

// Options tune a Client. The zero value is sensible.
type Options struct {
	// HTTPClient makes the requests (default: one with a 30s timeout and
	// enough idle connections per host for many concurrent appends).
	HTTPClient *http.Client
	// Retries is how many times an append answered 503 (overloaded or
	// shutting down) or lost in transport is sent again (default 3;
	// negative: never). Resending is safe: the ledger answers a
	// byte-identical submission with its first decision.
	Retries int
	// MaxRetryWait caps the wait between retries (default 2s), whatever
	// Retry-After says.
	MaxRetryWait time.Duration
	// FailoverWait is how long, with several server URLs, an append keeps
	// trying them (following a not_leader answer's leader, or going round
	// the list after a 503 or a transport failure) before it gives up
	// (default 15s, a few lease lifetimes; negative: no more than
	// Retries).
	FailoverWait time.Duration
	// StallWait is how long, with several server URLs, an append waits
	// for a server's answer before it asks the others who sequences the
	// log (default 1s; negative: never). If another server leads, or
	// names another leader, the append is sent there and the stalled
	// request abandoned (a frozen or cut-off leader holds it until its
	// fault ends); otherwise it keeps waiting, asking again every
	// StallWait. So a client moves on within about a lease time plus
	// StallWait.
	StallWait time.Duration
	// Policy, when set, is a witness policy every accepted pending RECEIPT
	// must stand under: the answer's checkpoint must carry valid
	// cosignatures of its quorum (a server in witness finality mode sends
	// them), or the client waits up to WitnessWait (default 10s) for the
	// server's newest witnessed checkpoint to include the entry. Otherwise
	// Append fails with ErrNotWitnessed, and Runtime.Execute does not run
	// the step.
	Policy      *witness.Policy
	WitnessWait time.Duration
}

// Client is a verified connection to one log. It is safe for concurrent
// use.
type Client struct {
	bases  []string     // the servers, without trailing slashes
	cur    atomic.Int32 // the one tried first
	vkey   string
	origin string
	keys   *merkle.KeySet
	hc     *http.Client
	opts   Options

	mu  sync.Mutex
	cps map[string]merkle.Checkpoint // verified checkpoint texts (a few recent ones), guarded by mu
}

// New returns a client of the server at baseURL (like
// http://127.0.0.1:8080) for the log whose checkpoint verifier key is
// verifierKey (custody checkpoint --verifier-key): one key, or after a checkpoint
// key rotation the log's key set, one key a line. Get it out of band: it
// is what every answer is checked against.
//
// baseURL may list several servers of one log, separated by commas
// (http://a:8080,http://b:8080,http://c:8080): the client then sends
// appends to the one that sequences the log, follows it through a
// failover, and reads from any. Every answer is verified the same way
// whichever server gave it.
func New(baseURL, verifierKey string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: t}
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = 2 * time.Second
	}
	if o.FailoverWait == 0 {
		o.FailoverWait = 15 * time.Second
	}
	if o.StallWait == 0 {
		o.StallWait = time.Second
	}
	if o.WitnessWait <= 0 {
		o.WitnessWait = 10 * time.Second
	}
	bases, err := parseBases(baseURL)
	if err != nil {
		return nil, err
	}
	ks, err := merkle.ParseKeySet(verifierKey)
	if err != nil {
		return nil, fmt.Errorf("client: checkpoint verifier key: %v", err)
	}
	return &Client{bases: bases, vkey: ks.String(), origin: ks.Origin(), keys: ks,
		hc: o.HTTPClient, opts: o, cps: map[string]merkle.Checkpoint{}}, nil
}

// parseBases splits a comma-separated list of server URLs.
func parseBases(list string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(list, ",") {
		b = strings.TrimSpace(b)
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("client: ledger URL %q: want http://host:port or https://host (several: separated by commas)", b)
		}
		out = append(out, strings.TrimRight(b, "/"))
	}
	return out, nil
}

// base is the server tried first.
func (c *Client) base() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// next moves on from server i (after a failure there), unless another
// request moved on already.
func (c *Client) next(i int) {
	c.cur.CompareAndSwap(int32(i), int32((i+1)%len(c.bases)))
}

// follow makes the server at leader (a URL a not_leader answer named)
// the first tried, if it is one of the client's; it reports whether it
// is.
func (c *Client) follow(leader string) bool {
	leader = strings.TrimRight(leader, "/")
	for i, b := range c.bases {
		if b == leader {
			c.cur.Store(int32(i))
			return true
		}
	}
	return false
}

// Servers are the servers the client uses.
func (c *Client) Servers() []string { return slices.Clone(c.bases) }

// Discover fetches the log's description, verifier key included, from
// the server itself: trust on first use. Prefer a key you got out of band.
func Discover(ctx context.Context, baseURL string, hc *http.Client) (*api.Log, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	bases, err := parseBases(baseURL)
	if err != nil {
		return nil, err
	}
	// Through a failover as every other read: a follower may answer 503
	// while it takes over, and a dead server is passed over.
	c := &Client{bases: bases, hc: hc, opts: Options{FailoverWait: 15 * time.Second, StallWait: time.Second}}
	var out api.Log
	if err := c.getJSON(ctx, api.PathLog, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Origin is the log's origin (the verifier key's name).
func (c *Client) Origin() string { return c.origin }

// VerifierKey is the checkpoint verifier key answers are checked against.
func (c *Client) VerifierKey() string { return c.vkey }

// URL is the base URL of the server tried first.
func (c *Client) URL() string { return c.base() }

// HTTPError is an answer that is neither a decision nor a refusal: the
// server is overloaded, shutting down, failed, or the thing asked for does
// not exist. Nothing was acknowledged.
type HTTPError struct {
	Status     int
	ReasonCode string
	Reason     string
	RetryAfter time.Duration // from Retry-After, if any
	// Leader is, on a not_leader answer, the URL of the server that
	// sequences the log, if the server knew it.
	Leader string
}

func (e *HTTPError) Error() string {
	if e.ReasonCode == "" {
		return fmt.Sprintf("ledger server: HTTP %d", e.Status)
	}
	return fmt.Sprintf("ledger server: HTTP %d: %s: %s", e.Status, e.ReasonCode, e.Reason)
}

// NotFound reports whether err is a 404 from the server.
func NotFound(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == http.StatusNotFound
}

// ErrUnverified wraps every answer that failed verification: a checkpoint
// not signed by the log key, a proof that does not verify, a leaf that
// does not hold what was submitted. It means the server is faulty or
// lying; the answer must not be trusted.
var ErrUnverified = errors.New("client: the ledger's answer does not verify")

func unverified(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnverified, fmt.Sprintf(format, args...))
}

// httpError reads an error answer.
func httpError(resp *http.Response) error {
	e := &HTTPError{Status: resp.StatusCode}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var doc api.Error
	if json.Unmarshal(body, &doc) == nil {
		e.ReasonCode, e.Reason, e.Leader = doc.ReasonCode, doc.Reason, doc.Leader
	} else {
		e.Reason = strings.TrimSpace(string(body))
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return e
}

// get fetches path and returns the body of a 200 answer (at most limit
// bytes). With several servers, a transport failure or a 503 moves on to
// the next one, once round the list, and so does a server that gives no
// answer in Options.StallWait and does not answer /readyz either (frozen
// or cut off).
func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	var resp *http.Response
	start := time.Now()
	pause := backoff.Backoff{First: 100 * time.Millisecond, Max: time.Second}
	for attempt := 0; ; attempt++ {
		i := int(c.cur.Load()) % len(c.bases)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.bases[i]+path, nil)
		if err != nil {
			return nil, err
		}
		// Each server is tried in turn; with several, further rounds
		// follow, a pause apart, until Options.FailoverWait has passed
		// (a follower answers 503 while it takes over a dead leader's
		// lease, and the dead one refuses connections).
		roundEnd := (attempt+1)%len(c.bases) == 0
		more := len(c.bases) > 1 && c.opts.FailoverWait > 0 && time.Since(start) < c.opts.FailoverWait
		last := (roundEnd && !more) || ctx.Err() != nil
		if last {
			resp, err = c.hc.Do(req)
		} else {
			resp, err = c.unlessFrozen(ctx, req, i)
		}
		if err == nil && resp.StatusCode == http.StatusServiceUnavailable && !last {
			err = httpError(resp)
			resp.Body.Close()
		}
		if err != nil {
			if last {
				return nil, fmt.Errorf("ledger server: %w", err)
			}
			c.next(i)
			if roundEnd && !pause.Wait(ctx) {
				return nil, fmt.Errorf("ledger server: %w", err)
			}
			continue
		}
		break
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpError(resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("ledger server: reading %s: %w", path, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("ledger server: %s answered more than %d bytes", path, limit)
	}
	return body, nil
}

// maxDoc bounds a JSON answer (a workflow page of 1000 entries of up to
// 64 KiB each, base64 and statement: about 180 MB in the worst case; real
// pages are far smaller).
const maxDoc = 256 << 20

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	body, err := c.get(ctx, path, maxDoc)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("ledger server: %s: %w", path, err)
	}
	return nil
}

// post sends body and returns the answer, retrying 503s and transport
// failures as Options.Retries says, and, with several servers, following
// the sequencer through a failover for up to Options.FailoverWait.
// Resending is safe: the ledger answers a byte-identical submission with
// its first decision, whichever server sequences it.
func (c *Client) post(ctx context.Context, path string, body []byte) (*http.Response, error) {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		i := int(c.cur.Load()) % len(c.bases)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.bases[i]+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.watch(ctx, req, i)
		if leader, ok := err.(movedOn); ok {
			// Another server leads: go there now.
			c.follow(string(leader))
			continue
		}
		// With several servers, keep going through a failover.
		more := attempt < c.opts.Retries ||
			(len(c.bases) > 1 && c.opts.FailoverWait > 0 && time.Since(start) < c.opts.FailoverWait)
		var wait time.Duration
		switch {
		case err != nil:
			// Whether or not this call tries again, the next one starts
			// at the next server.
			c.next(i)
			if ctx.Err() != nil || !more {
				return nil, fmt.Errorf("ledger server: %w", err)
			}
			wait = min(50*time.Millisecond<<min(attempt, 6), 500*time.Millisecond)
			if len(c.bases) > 1 && attempt%len(c.bases) != len(c.bases)-1 {
				wait = 0 // try the next server at once, pause after a round
			}
		case resp.StatusCode == http.StatusServiceUnavailable && len(c.bases) > 1 && !more:
			// Not trying again: still point the next call at the leader
			// this answer names, or at the next server.
			if leader := resp.Header.Get(api.HeaderLeader); leader == "" || leader == c.bases[i] || !c.follow(leader) {
				c.next(i)
			}
			return resp, nil
		case resp.StatusCode == http.StatusServiceUnavailable && more:
			he := httpError(resp).(*HTTPError)
			resp.Body.Close()
			wait = max(he.RetryAfter, 50*time.Millisecond<<min(attempt, 6))
			if len(c.bases) > 1 {
				if he.ReasonCode == api.CodeNotLeader && he.Leader != "" && he.Leader != c.bases[i] && c.follow(he.Leader) {
					wait = 0 // the sequencer is named: go there now
				} else {
					c.next(i)
					wait = min(wait, 200*time.Millisecond)
				}
			}
		default:
			return resp, nil
		}
		if wait == 0 {
			continue
		}
		t := time.NewTimer(min(wait, c.opts.MaxRetryWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// movedOn is watch's error when another server than the one asked leads.
type movedOn string

func (m movedOn) Error() string { return "ledger server: the sequencer moved to " + string(m) }

// watch sends req to server i; with several servers, while no answer
// has come, it asks the others every Options.StallWait who sequences the
// log, and gives up on i (movedOn) once one of them leads or names
// another leader of the client's list.
func (c *Client) watch(ctx context.Context, req *http.Request, i int) (*http.Response, error) {
	if len(c.bases) < 2 || c.opts.StallWait < 0 {
		return c.hc.Do(req)
	}
	return c.doWatched(ctx, req, func(actx context.Context) error {
		if leader := c.leaderElsewhere(actx, i); leader != "" {
			return movedOn(leader)
		}
		return nil
	})
}

// unlessFrozen sends a read to server i; every Options.StallWait without
// an answer it asks server i's /readyz, and gives up on the read if that
// gets no answer in StallWait either. A slow read on a live server is
// left alone.
func (c *Client) unlessFrozen(ctx context.Context, req *http.Request, i int) (*http.Response, error) {
	if c.opts.StallWait < 0 {
		return c.hc.Do(req)
	}
	return c.doWatched(ctx, req, func(actx context.Context) error {
		pctx, pcancel := context.WithTimeout(actx, c.opts.StallWait)
		defer pcancel()
		preq, _ := http.NewRequestWithContext(pctx, http.MethodGet, c.bases[i]+"/readyz", nil)
		presp, err := c.hc.Do(preq)
		if err == nil {
			presp.Body.Close()
			return nil
		}
		if ctx.Err() != nil {
			return nil // the caller's own end, not the server's silence
		}
		return fmt.Errorf("%s gives no answer (frozen or cut off): %w", c.bases[i], err)
	})
}

// doWatched sends req and, every Options.StallWait while no answer has
// come, calls stalled: a non-nil error from it abandons the request (its
// late answer, if any, is closed) and is returned. The answer's body
// carries the request's context, ended when the body is closed.
func (c *Client) doWatched(ctx context.Context, req *http.Request, stalled func(actx context.Context) error) (*http.Response, error) {
	actx, cancel := context.WithCancel(ctx)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.hc.Do(req.WithContext(actx))
		done <- result{resp, err}
	}()
	t := time.NewTimer(c.opts.StallWait)
	defer t.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				cancel()
				return nil, r.err
			}
			r.resp.Body = &cancelBody{ReadCloser: r.resp.Body, cancel: cancel}
			return r.resp, nil
		case <-t.C:
			if err := stalled(actx); err != nil {
				cancel()
				go func() {
					if r := <-done; r.resp != nil {
						r.resp.Body.Close()
					}
				}()
				return nil, err
			}
			t.Reset(c.opts.StallWait)
		}
	}
}

// cancelBody ends a request's context once its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// leaderElsewhere asks every server but i (at once, each for at most
// StallWait) who sequences the log, and returns a leader of the client's
// list other than server i, if one says so.
func (c *Client) leaderElsewhere(ctx context.Context, i int) string {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StallWait)
	defer cancel()
	found := make(chan string, len(c.bases))
	for j, b := range c.bases {
		if j == i {
			found <- ""
			continue
		}
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, b+"/readyz", nil)
			if err != nil {
				found <- ""
				return
			}
			resp, err := c.hc.Do(req)
			if err != nil {
				found <- ""
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			leader := ""
			for _, line := range strings.Split(string(body), "\n") {
				if line == "role leader" {
					leader = b
				}
				if v, ok := strings.CutPrefix(line, "leader "); ok && leader == "" && strings.Contains(v, "://") {
					leader = strings.TrimRight(v, "/")
				}
			}
			found <- leader
		}()
	}
	for range c.bases {
		if l := <-found; l != "" && l != c.bases[i] && slices.Contains(c.bases, l) {
			return l
		}
	}
	return ""
}

// openCheckpoint verifies a checkpoint text against the log key, caching
// the few most recent (many answers share one checkpoint).
func (c *Client) openCheckpoint(text string) (merkle.Checkpoint, error) {
	c.mu.Lock()
	cp, ok := c.cps[text]
	c.mu.Unlock()
	if ok {
		return cp, nil
	}
	cp, err := merkle.OpenCheckpoint([]byte(text), c.origin, c.vkey)
	if err != nil {
		return cp, unverified("checkpoint: %v", err)
	}
	c.mu.Lock()
	if len(c.cps) >= 64 {
		clear(c.cps)
	}
	c.cps[text] = cp
	c.mu.Unlock()
	return cp, nil
}

// OpenCheckpoint verifies a checkpoint's signature by the log key and
// returns its content.
func (c *Client) OpenCheckpoint(text []byte) (merkle.Checkpoint, error) {
	return c.openCheckpoint(string(text))
}

// verifyLogSigned checks a DENIAL's signature: the log key GENESIS binds
// signs DENIALs, and it is one of the keys the client holds.
func (c *Client) verifyLogSigned(env *sign.Parsed) error {
	var err error
	for _, pub := range c.keys.PublicKeys() {
		if err = env.Verify(pub); err == nil {
			return nil
		}
	}
	return err
}

// signsWithKnownKey reports whether a key set the server names signs its
// checkpoints with a key the client trusts.
func (c *Client) signsWithKnownKey(serverKeys string) bool {
	ks, err := merkle.ParseKeySet(serverKeys)
	if err != nil {
		return false
	}
	for _, vk := range ks.Current() {
		if c.keys.Contains(vk) {
			return true
		}
	}
	return false
}
