package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
)

// TestSlowBodiesPerClient: one client (127.0.0.1) starts as many slow
// append bodies as there are body-reading slots for everyone; it holds
// only its own MaxReadingPerAddr of them (the rest are answered 503 at
// once, naming the client), and an append from another client
// (127.0.0.2) is accepted while they dribble.
func TestSlowBodiesPerClient(t *testing.T) {
	lg := servertest.Start(t, server.Options{MaxReading: 8, MaxReadingPerAddr: 2, BodyTimeout: time.Minute})
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_slow", nil)
	host := strings.TrimPrefix(lg.URL, "http://")
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	held, refused := 0, 0
	for i := 0; i < 8; i++ {
		c, err := d.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("POST /v1/entries HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 120000\r\n\r\n{")); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err != nil:
			held++ // still reading its body
		case resp.StatusCode == http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("slow body %d: %d", i+1, resp.StatusCode)
		}
	}
	t.Logf("one client's slow bodies: %d held, %d refused", held, refused)
	if held > 2 {
		t.Errorf("one client holds %d body-reading slots (cap 2)", held)
	}
	hc := clientFrom("127.0.0.2")
	c, err := client.New(lg.URL, lg.VKey, &client.Options{HTTPClient: hc, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(c, lg.KeyOf(agent), "agent:a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rt.Receipt(ctx, servertest.Pending(grant, "s1", nil)); err != nil {
		t.Fatalf("an append from another client while one client's bodies dribble: %v", err)
	}
}

// TestSlowBodiesHoldNewConnections: while one client (127.0.0.1) holds
// its whole budget of bodies being read, its new connections are held
// unread by the listener, not read and refused one by one (each of which
// costs the server a goroutine, a request and an answer: thousands of
// them at once took two cores' worth of scheduling from honest appends).
// A held connection is served as soon as one of the client's bodies is
// done, and closed unanswered after the header timeout; another client's
// requests pass at once throughout.
func TestSlowBodiesHoldNewConnections(t *testing.T) {
	dir := t.TempDir()
	_, adminPriv, _ := sign.GenerateKey()
	l, err := ledger.Init(dir, "test.example/custody", ledger.InitOptions{AdminKey: adminPriv})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := server.New(l, server.Options{MaxReading: 64, MaxReadingPerAddr: 2, BodyTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	const hold = 2 * time.Second // the header timeout, min(5s, ReadTimeout)
	go func() { served <- srv.Serve(ctx, ln, server.ServeOptions{ReadTimeout: hold}) }()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		stop()
		<-served
	}()
	host := ln.Addr().String()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	send := func(req string) net.Conn {
		c, err := d.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	slow := "POST /v1/entries HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nContent-Length: 120000\r\n\r\n{"
	healthz := "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
	// answer reads c's answer within d; "" if none came (still held),
	// "closed" if the server closed c unanswered.
	answer := func(c net.Conn, d time.Duration) string {
		c.SetReadDeadline(time.Now().Add(d))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return ""
		case err != nil:
			return "closed"
		}
		resp.Body.Close()
		return resp.Status
	}
	// The client's whole budget: two bodies being read.
	var bodies []net.Conn
	for range 2 {
		c := send(slow)
		if a := answer(c, 300*time.Millisecond); a != "" {
			t.Fatalf("a slow body within the client's budget: %s", a)
		}
		bodies = append(bodies, c)
	}
	// A read, then more bodies, from the same client: held unread.
	start := time.Now()
	read := send(healthz)
	var more []net.Conn
	for range 10 {
		more = append(more, send(slow))
	}
	for i, c := range append([]net.Conn{read}, more...) {
		if a := answer(c, 100*time.Millisecond); a != "" {
			t.Fatalf("connection %d past the client's budget was answered %q, want it held unread", i+1, a)
		}
	}
	// Another client is served at once.
	resp, err := clientFrom("127.0.0.2").Get("http://" + host + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another client while the first is at its budget: %v %v", resp, err)
	}
	resp.Body.Close()
	// One body ends: the oldest held connection is served (the read,
	// which takes no slot), then the next (a body, which takes the slot);
	// the rest stay held until the hold ends, then are closed unanswered.
	bodies[0].Close()
	if a := answer(read, hold); a != "200 OK" {
		t.Fatalf("the held read after a body slot freed: %q, want 200 OK", a)
	}
	got := map[string]int{}
	for _, c := range more {
		got[answer(c, hold+2*time.Second)]++
	}
	t.Logf("held bodies once a slot freed, after the hold: %v (\"\" still being read)", got)
	if got[""] != 1 || got["closed"] != len(more)-1 {
		t.Errorf("held bodies once a slot freed: %v, want one being read and %d closed unanswered", got, len(more)-1)
	}
	if waited := time.Since(start); waited < hold {
		t.Errorf("held connections closed after %v, before the hold of %v", waited, hold)
	}
}
