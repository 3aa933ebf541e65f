package serving

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/sign"
	_ "github.com/custodylog/custody/storage/badgerstore"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
	"github.com/custodylog/custody/witness"
)

func config(t *testing.T) (Config, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Config{Listener: ln, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ledger: ledger.Options{Advertise: "http://" + ln.Addr().String(), LeaseTTL: time.Second},
		Serve:  server.ServeOptions{ShutdownTimeout: 5 * time.Second},
		Open:   func(loc, _ string, o ledger.Options) (*ledger.Ledger, error) { return ledger.Open(loc, o) },
	}, "http://" + ln.Addr().String()
}

func get(t *testing.T, url string) string {
	t.Helper()
	for i := 0; ; i++ {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return string(b)
			}
			err = &net.AddrError{Err: resp.Status, Addr: url}
		}
		if i == 100 {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOneServesThenCloses: the log is served at /; when ctx ends, One
// returns once the ledger is closed (the folder opens again).
func TestOneServesThenCloses(t *testing.T) {
	dir := t.TempDir()
	_, admin, _ := sign.GenerateKey()
	l, err := ledger.Init(dir, "example.com/serving", ledger.InitOptions{AdminKey: admin})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	cfg, base := config(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- One(ctx, cfg, dir, nil) }()
	if cp := get(t, base+"/checkpoint"); !strings.HasPrefix(cp, "example.com/serving\n1\n") {
		t.Fatalf("checkpoint %q", cp)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l, err = ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatalf("the ledger was not closed: %v", err)
	}
	l.Close()
}

// TestOneOpenFails: a log that cannot be opened is an error, and the
// listener is closed.
func TestOneOpenFails(t *testing.T) {
	cfg, _ := config(t)
	if err := One(context.Background(), cfg, t.TempDir()+"/none", nil); err == nil {
		t.Fatal("served a folder with no ledger")
	}
	if _, err := cfg.Listener.Accept(); err == nil {
		t.Fatal("the listener is still open")
	}
}

// TestLogsServesEach: two logs of one database, each under /logs/NAME/,
// each with its own head file.
func TestLogsServesEach(t *testing.T) {
	store := storagetest.PostgresURL(t)
	for _, name := range []string{"a", "b"} {
		u, err := pgstore.WithLog(store, name)
		if err != nil {
			t.Fatal(err)
		}
		_, admin, _ := sign.GenerateKey()
		l, err := ledger.Init(u, "example.com/"+name, ledger.InitOptions{AdminKey: admin})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	cfg, base := config(t)
	cfg.Ledger.HeadFile = t.TempDir() + "/head"
	var heads []string
	open := cfg.Open
	cfg.Open = func(loc, name string, o ledger.Options) (*ledger.Ledger, error) {
		heads = append(heads, name+"="+o.HeadFile)
		return open(loc, name, o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Logs(ctx, cfg, store, []string{"a", "b"}, []string{"b"}, "") }()
	for _, name := range []string{"a", "b"} {
		if cp := get(t, base+"/logs/"+name+"/checkpoint"); !strings.HasPrefix(cp, "example.com/"+name+"\n") {
			t.Fatalf("log %s: checkpoint %q", name, cp)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The preferred log is opened first; each has a head file of its own.
	if len(heads) != 2 || heads[0] != "b="+cfg.Ledger.HeadFile+".b" || heads[1] != "a="+cfg.Ledger.HeadFile+".a" {
		t.Fatalf("opened %v", heads)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "512": 512, "64MiB": 64 << 20, "1 k": 1 << 10, "2GB": 2 << 30, "1TiB": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "1.5MiB", "1PiB", "-1", "9999999999TiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestCheckWitnessPolicy(t *testing.T) {
	_, priv, _ := sign.GenerateKey()
	s, err := witness.NewSigner("w.example", priv)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"quorum none\n": "quorum is none",
		"witness w1 " + s.VerifierKey() + " http://127.0.0.1:1\nquorum w1\n": "",
		"witness w1 " + s.VerifierKey() + "\nquorum w1\n":                    "witness w1 has no URL",
	} {
		p, err := witness.ParsePolicy([]byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		err = CheckWitnessPolicy(p)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

func TestWebhookSecret(t *testing.T) {
	if s, err := WebhookSecret([]byte("  0123456789abcdef\n")); err != nil || string(s) != "0123456789abcdef" {
		t.Errorf("16 bytes: %q, %v", s, err)
	}
	if _, err := WebhookSecret([]byte("short secret   \n")); err == nil || !strings.Contains(err.Error(), "is 12 bytes") {
		t.Errorf("12 bytes: %v", err)
	}
}
