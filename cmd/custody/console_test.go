package main

import (
	"strings"
	"testing"
)

// --console's origin is checked before anything is opened: http only for
// loopback, https only with TLS or a proxy in front, an origin and nothing
// more; the console flags need --console.
func TestServeConsoleFlags(t *testing.T) {
	data := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--console-origin", "http://localhost:8080"}, "need --console"},
		{[]string{"--console", "--addr", "0.0.0.0:8080"}, "give --console-origin"},
		{[]string{"--console", "--console-origin", "http://custody.example"}, "http only for localhost"},
		{[]string{"--console", "--console-origin", "https://custody.example"}, "https needs --tls-cert"},
		{[]string{"--console", "--console-origin", "https://custody.example/console/"}, "without user, path"},
		{[]string{"--console-session", "1h"}, "need --console"},
		{[]string{"--console", "--console-session", "1s"}, "want 1m..720h"},
		{[]string{"--console", "--console-origin", "https://custody.example.com", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--console-rp-id", "other.example"}, "neither rp_id"},
	} {
		r := must(t, 2, append([]string{"serve", "--dir", data}, c.args...)...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v: stderr %q, want %q", c.args, r.stderr, c.want)
		}
	}
}
