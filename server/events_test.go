package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestEventsResume reads a workflow's stream, drops the connection, keeps
// appending, and reconnects with the last index seen: every entry arrives
// exactly once, in order.
func TestEventsResume(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_ev", nil)

	s, err := lg.Client.Events(ctx, "wf_ev", 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	first, err := s.Next() // the CONFIRM
	if err != nil || first.Kind != "CONFIRM" {
		t.Fatalf("first event: %+v %v", first, err)
	}
	seen = append(seen, first.Index)
	append3 := func(from int) {
		for i := from; i < from+3; i++ {
			if _, err := agent.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("s%d", i), nil)); err != nil {
				t.Fatal(err)
			}
		}
	}
	append3(0)
	for range 2 {
		e, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e.Index)
	}
	last := s.Last
	s.Close() // one receipt is unread
	append3(3)
	s, err = lg.Client.Events(ctx, "wf_ev", last) // Last-Event-ID
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 4 {
		e, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, e.Index)
	}
	want, err := lg.Ledger.WorkflowIndexes("wf_ev")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("saw %v, want %v", seen, want)
	}
	// ?after= resumes too, on a raw connection, and a new entry arrives
	// live.
	req, _ := http.NewRequestWithContext(ctx, "GET", lg.URL+fmt.Sprintf("/v1/workflows/wf_ev/events?after=%d", want[len(want)-2]), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var ids []string
	for len(ids) < 2 && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
			if len(ids) == 1 {
				append3(6) // live
			}
		}
	}
	if len(ids) != 2 || ids[0] != fmt.Sprint(want[len(want)-1]) || ids[1] != fmt.Sprint(want[len(want)-1]+1) {
		t.Fatalf("raw stream ids %v after %v", ids, want)
	}
}

// TestEventsKeepAlive: an idle stream gets comments.
func TestEventsKeepAlive(t *testing.T) {
	lg := servertest.Start(t, server.Options{KeepAlive: 20 * time.Millisecond})
	lg.Agent(lg.Principal("user:alice"), "agent:a", "wf_idle", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", lg.URL+"/v1/workflows/wf_idle/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == ": keep-alive" {
			return
		}
	}
	t.Fatalf("no keep-alive: %v", sc.Err())
}

// TestEventsOutliveTimeouts: a stream served by Serve lives past the
// server's read and write timeouts and still delivers new entries.
func TestEventsOutliveTimeouts(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	srv := server.New(lg.Ledger, server.Options{KeepAlive: 50 * time.Millisecond, Logger: quietLogger()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ctx, ln, server.ServeOptions{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	}()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_long", nil)
	c, err := client.New("http://"+ln.Addr().String(), lg.VKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Events(context.Background(), "wf_long", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err != nil { // the CONFIRM
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // 5 timeouts
	r, err := agent.Receipt(context.Background(), servertest.Pending(grant, "late", nil))
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Next()
	if err != nil || e.Index != r.Index {
		t.Fatalf("after the timeouts: %+v %v", e, err)
	}
	// Shutdown ends the stream and returns.
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err == nil {
		t.Fatal("the stream outlived the server")
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestStreamCap: past Options.MaxStreams, a new event stream is answered
// 503 with Retry-After at once, and a freed slot is usable again. A stream
// on a workflow that does not exist is 404 and takes no slot.
func TestStreamCap(t *testing.T) {
	lg := servertest.Start(t, server.Options{MaxStreams: 2})
	lg.Agent(lg.Principal("user:alice"), "agent:a", "wf_cap", nil)
	for i := 0; i < 3; i++ {
		r, err := http.Get(lg.URL + "/v1/workflows/wf_none/events")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Fatalf("a stream on a workflow that does not exist: %d", r.StatusCode)
		}
	}
	open := func() (*http.Response, error) {
		return http.Get(lg.URL + "/v1/workflows/wf_cap/events")
	}
	a, err := open()
	if err != nil || a.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %v %v", a, err)
	}
	b, err := open()
	if err != nil || b.StatusCode != http.StatusOK {
		t.Fatalf("second stream: %v %v", b, err)
	}
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	c.Body.Close()
	if c.StatusCode != http.StatusServiceUnavailable || c.Header.Get("Retry-After") == "" {
		t.Fatalf("third stream: %d, Retry-After %q", c.StatusCode, c.Header.Get("Retry-After"))
	}
	a.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := open()
		if err == nil && d.StatusCode == http.StatusOK {
			d.Body.Close()
			break
		}
		if d != nil {
			d.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("a freed stream slot was never reusable")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Body.Close()
}

// TestStreamCapPerAddr: one client address cannot hold more than
// Options.MaxStreamsPerAddr streams.
func TestStreamCapPerAddr(t *testing.T) {
	lg := servertest.Start(t, server.Options{MaxStreams: 10, MaxStreamsPerAddr: 2})
	lg.Agent(lg.Principal("user:alice"), "agent:a", "wf_cap", nil)
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		r, err := http.Get(lg.URL + "/v1/workflows/wf_cap/events")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, r)
		want := http.StatusOK
		if i == 2 {
			want = http.StatusServiceUnavailable
		}
		if r.StatusCode != want {
			t.Fatalf("stream %d from one address: %d, want %d", i+1, r.StatusCode, want)
		}
	}
}

// TestEventsResumeWhenBehind: a stream that falls behind what the server
// keeps of its workflow (Options.StreamLag) is cut with a last resume
// event whose id is the last entry it was sent; reconnecting with that
// Last-Event-ID gives every later entry, once each, in order.
func TestEventsResumeWhenBehind(t *testing.T) {
	lg := servertest.Start(t, server.Options{StreamLag: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent, grant := lg.Agent(lg.Principal("user:alice"), "agent:a", "wf_lag", nil)
	req, _ := http.NewRequestWithContext(ctx, "GET", lg.URL+"/v1/workflows/wf_lag/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type event struct{ id, name string }
	events := make(chan event, 1024)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					events <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			}
		}
	}()
	first := <-events // the CONFIRM: the stream now follows the ring
	if first.name != "entry" {
		t.Fatalf("first event %+v", first)
	}
	// A commit of several entries of the workflow overflows a ring of
	// one event at once, whatever the speed of the machine: the stream
	// holds the CONFIRM and the ring keeps only the commit's last entry.
	// Concurrent receipts of one runtime go together in one batch
	// request, decided in one commit (client.Runtime).
	var last string
	var resume *event
	for round := 0; round < 20 && resume == nil; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := agent.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("s%d_%d", round, i), nil)); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	drain:
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended without a resume event (last entry %s)", last)
				}
				if ev.name == "resume" {
					resume = &ev
					break drain
				}
				last = ev.id
			case <-time.After(200 * time.Millisecond):
				break drain
			}
		}
	}
	if resume == nil {
		t.Fatal("no resume event after 20 rounds of 16 concurrent receipts, with a ring of one event")
	}
	if last == "" {
		last = first.id
	}
	if resume.id != last {
		t.Fatalf("resume event id %s, last entry sent %s", resume.id, last)
	}
	if _, ok := <-events; ok {
		t.Fatal("events after the resume event")
	}
	after, _ := strconv.ParseUint(resume.id, 10, 64)
	s, err := lg.Client.Events(ctx, "wf_lag", after)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := lg.Ledger.WorkflowIndexes("wf_lag")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if w <= after {
			continue
		}
		e, err := s.Next()
		if err != nil || e.Index != w {
			t.Fatalf("after resuming at %d: %+v %v, want entry %d", after, e, err, w)
		}
	}
}

// TestSlowReaderHoldsNoToken: a bundle whose client does not read holds
// its bytes (within Options.MaxAnswerBytes), not the heavy-read token:
// with one token and the bundle's write blocked, a workflow page is still
// served (before, it waited HeavyReadWait and got 503), and so is a
// stream that must catch up from the store.
func TestSlowReaderHoldsNoToken(t *testing.T) {
	lg := servertest.Start(t, server.Options{MaxHeavyReads: 1, HeavyReadWait: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A workflow whose bundle (about 1.5 KB an entry) is larger than the
	// kernel lets a socket buffer (4 MiB send, on Linux's defaults).
	alice := lg.Principal("user:alice")
	var mu sync.Mutex
	var last uint64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for a := range 8 {
		agent, grant := lg.Agent(alice, fmt.Sprintf("agent:a%d", a), "wf_big", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				rec, err := agent.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("s%d", i), nil))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				last = max(last, rec.Index)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A client with a tiny receive buffer asks for the whole workflow's
	// bundle and never reads it.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(lg.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/bundle?index=%d&workflow=1 HTTP/1.1\r\nHost: x\r\n\r\n", last)
	// The answer's first bytes say the bundle is built and being written
	// (however slow the machine); the rest of it then blocks in the write.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	status := make([]byte, len("HTTP/1.1 200"))
	if _, err := io.ReadFull(conn, status); err != nil || string(status) != "HTTP/1.1 200" {
		t.Fatalf("the bundle's answer began %q, %v; want HTTP/1.1 200", status, err)
	}
	page, err := http.Get(lg.URL + "/v1/workflows/wf_big?after=0")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Fatalf("a workflow page while a bundle's client does not read: %d", page.StatusCode)
	}
	s, err := lg.Client.Events(ctx, "wf_big", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatalf("a stream catching up while a bundle's client does not read: %v", err)
	}
}

// TestStreamOpensPerAddr: an address that opens and closes streams as fast
// as it can gets its first MaxStreamsPerAddr at once, then
// StreamOpensPerAddr a second; the others are answered 503 with
// Retry-After and cost no stream. Another address is not affected by it.
func TestStreamOpensPerAddr(t *testing.T) {
	lg := servertest.Start(t, server.Options{MaxStreamsPerAddr: 4, StreamOpensPerAddr: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_opens", nil)
	if _, err := agent.Receipt(ctx, servertest.Pending(grant, "s0", nil)); err != nil {
		t.Fatal(err)
	}
	open := func(from string) int {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, Timeout: 10 * time.Second}
		resp, err := hc.Get(lg.URL + "/v1/workflows/wf_opens/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
		return resp.StatusCode
	}
	var ok, refused int
	start := time.Now()
	for range 12 {
		switch code := open("127.0.0.1"); code {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("a new stream: %d", code)
		}
	}
	// 4 at once, and 2 a second over the time the loop took.
	if most := 4 + int(2*time.Since(start).Seconds()) + 1; ok < 4 || ok > most || refused == 0 {
		t.Fatalf("12 streams opened at once from one address: %d opened, %d refused; want 4 to %d opened", ok, refused, most)
	}
	if code := open("127.0.0.2"); code != http.StatusOK {
		t.Fatalf("a stream from another address: %d, want 200", code)
	}
	time.Sleep(time.Second)
	if code := open("127.0.0.1"); code != http.StatusOK {
		t.Fatalf("a stream from the first address a second later: %d, want 200", code)
	}
}

// TestEventsRefuseUndeliverableID: a Last-Event-ID (or ?after=) after
// which no entry can ever come (2^64-1, or anything past MaxEventIndex) is
// refused with 400 naming the rule, rather than opening a stream that
// holds a slot and never delivers; the largest allowed id still opens.
func TestEventsRefuseUndeliverableID(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	lg.Agent(lg.Principal("user:alice"), "agent:a", "wf_ids", nil)
	get := func(header, query string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, lg.URL+"/v1/workflows/wf_ids/events"+query, nil)
		if header != "" {
			req.Header.Set("Last-Event-ID", header)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct{ header, query string }{
		{"18446744073709551615", ""},
		{"18446744073709551614", ""},
		{strconv.FormatUint(server.MaxEventIndex+1, 10), ""},
		{"", "?after=18446744073709551615"},
	} {
		r := get(c.header, c.query)
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "no entry can follow it") {
			t.Errorf("Last-Event-ID %q%s: %d %s", c.header, c.query, r.StatusCode, body)
		}
	}
	r := get(strconv.FormatUint(server.MaxEventIndex, 10), "")
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Errorf("Last-Event-ID MaxEventIndex: %d", r.StatusCode)
	}
}
