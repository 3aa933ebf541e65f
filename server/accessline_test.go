package server_test

import (
	"bytes"
	"log/slog"
	"regexp"
	"sync"
	"testing"

	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// lockedBuffer is a log destination the server's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestAccessLineBeforeAnswer: once an accepted append is answered, its
// access line (verdict, index, latency, remote address) is written, as
// the handler formats it.
func TestAccessLineBeforeAnswer(t *testing.T) {
	var logs lockedBuffer
	lg := servertest.Start(t, server.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer lg.Close()
	lg.Principal("alice")
	line := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=append verdict=accepted index=[0-9]+ latency_ms=[0-9.]+ remote=127\.0\.0\.1:[0-9]+$`)
	if !line.MatchString(logs.String()) {
		t.Fatalf("no access line for the accepted append:\n%s", logs.String())
	}
}
