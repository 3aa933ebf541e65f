package server_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
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
