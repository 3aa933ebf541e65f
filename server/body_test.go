package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/server/servertest"
)

// TestDeclaredTooLargeRefusedUnread: an append or a batch whose
// Content-Length is over its cap is answered 413 too_large from its
// headers alone, before a byte of its body arrives, and its connection
// closed (the old server read the body first: with none sent, it waited
// for the body timeout and answered 400).
func TestDeclaredTooLargeRefusedUnread(t *testing.T) {
	lg := servertest.Start(t, server.Options{BodyTimeout: time.Minute})
	host := strings.TrimPrefix(lg.URL, "http://")
	for _, tc := range []struct {
		path string
		n    int
	}{{api.PathEntries, api.MaxBody + 1}, {api.PathEntries, 200 << 10}, {api.PathBatch, api.MaxBatchBody + 1}} {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Bounds the wait only: the answer must come without the body.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "POST "+tc.path+" HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(tc.n)+"\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s with Content-Length %d and one byte of body: %v", tc.path, tc.n, err)
		}
		var doc api.Error
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || doc.ReasonCode != "too_large" || !resp.Close {
			t.Errorf("%s with Content-Length %d: %d %+v (close %v), want 413 too_large and the connection closed", tc.path, tc.n, resp.StatusCode, doc, resp.Close)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Errorf("%s: the connection stayed open after the 413", tc.path)
		}
	}
}

// chunked sends every request body chunked (no Content-Length).
type chunked struct{ http.RoundTripper }

func (c chunked) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r = r.Clone(r.Context())
		r.ContentLength, r.GetBody, r.TransferEncoding = -1, nil, []string{"chunked"}
	}
	return c.RoundTripper.RoundTrip(r)
}

// TestChunkedBodies: a body without a Content-Length is read as it comes,
// whole whatever its size up to the cap (past it 413 too_large, at it the
// envelope's own check): a signed receipt sent chunked is accepted.
func TestChunkedBodies(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	hc := &http.Client{Transport: chunked{http.DefaultTransport.(*http.Transport).Clone()}, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		n      int
		status int
		code   string
	}{{api.MaxBody + 1, 413, "too_large"}, {api.MaxBody - 100, 400, "bad_envelope"}, {4 << 10, 400, "bad_envelope"}, {4<<10 + 1, 400, "bad_envelope"}, {1, 400, "bad_envelope"}} {
		resp, err := hc.Post(lg.URL+api.PathEntries, "application/json", bytes.NewReader(bytes.Repeat([]byte("a"), tc.n)))
		if err != nil {
			t.Fatalf("%d bytes chunked: %v", tc.n, err)
		}
		var doc api.Error
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != tc.status || doc.ReasonCode != tc.code {
			t.Errorf("%d bytes chunked: %d %+v, want %d %s", tc.n, resp.StatusCode, doc, tc.status, tc.code)
		}
	}
	alice := lg.Principal("user:alice")
	agent, grant := lg.Agent(alice, "agent:a", "wf_chunked", nil)
	c, err := client.New(lg.URL, lg.VKey, &client.Options{HTTPClient: hc, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	rt := client.NewRuntime(c, lg.KeyOf(agent), "agent:a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rt.Receipt(ctx, servertest.Pending(grant, "s1", nil)); err != nil {
		t.Fatalf("a receipt sent chunked: %v", err)
	}
}
