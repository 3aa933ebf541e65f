package clikit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/custodylog/custody/storage"
)

// TestUnavailable: only the network's errors, a 503 and the store's
// "cannot decide now" map to exit 5; a file that cannot be opened is an
// error (exit 1) though its errno looks like a net.Error.
func TestUnavailable(t *testing.T) {
	_, missing := os.Open(filepath.Join(t.TempDir(), "absent.json"))
	var d net.Dialer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, refused := d.DialContext(ctx, "tcp", addr)
	if refused == nil {
		t.Fatal("a closed loopback port accepted a connection")
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"missing file", fmt.Errorf("append: %w", missing), false},
		{"permission", fmt.Errorf("append: %w", &os.PathError{Op: "open", Path: "x", Err: os.ErrPermission}), false},
		{"refused", fmt.Errorf("get: %w", refused), true},
		{"store away", fmt.Errorf("open: %w", storage.ErrUnavailable), true},
		{"plain", errors.New("bad input"), false},
	} {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("%s (%v): Unavailable = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
