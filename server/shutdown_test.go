package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestGracefulShutdownUnderLoad shuts the server down while clients
// append as fast as they can: Serve returns only after every append in
// flight was answered, and every acknowledged entry is in the reopened
// log, byte for byte.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	dir := t.TempDir()
	_, adminPriv, _ := sign.GenerateKey()
	l, err := ledger.Init(dir, "test.example/custody", ledger.InitOptions{AdminKey: adminPriv})
	if err != nil {
		t.Fatal(err)
	}
	vkey := l.VerifierKey()
	srv := server.New(l, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, server.ServeOptions{ShutdownTimeout: 20 * time.Second}) }()

	c, err := client.New("http://"+ln.Addr().String(), vkey, &client.Options{Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Each writer is a principal (one key's seqs are in order, so one
	// writer per key) granting agents as fast as it can.
	admin := client.NewRuntime(c, adminPriv, "admin", nil)
	const writers = 8
	type ack struct {
		index uint64
		leaf  []byte
	}
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	runtimes := make([]*client.Runtime, writers)
	for i := range runtimes {
		pub, priv, _ := sign.GenerateKey()
		if _, err := admin.Append(context.Background(), &statement.PrincipalDoc{PrincipalID: fmt.Sprintf("p_%d", i),
			Op: statement.OpEnroll, Name: fmt.Sprintf("user:w%d", i), PublicKey: sign.EncodePublicKey(pub)}); err != nil {
			t.Fatal(err)
		}
		runtimes[i] = client.NewRuntime(c, priv, fmt.Sprintf("user:w%d", i), nil)
	}
	enough := make(chan struct{})
	var once sync.Once
	for i, rt := range runtimes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10_000; j++ {
				agent, _, _ := sign.GenerateKey()
				r, err := rt.Confirm(context.Background(), client.Grant{ID: fmt.Sprintf("c_%d_%d", i, j), Workflow: fmt.Sprintf("wf_%d", i),
					Grantee: fmt.Sprintf("agent:w%d/%d", i, j), GranteeKey: ed25519.PublicKey(agent),
					Targets: []string{"t"}, Capabilities: []string{"act"}, TTL: time.Hour, Revocable: true})
				if err != nil {
					return // the server went away: nothing was acknowledged
				}
				mu.Lock()
				acks = append(acks, ack{r.Index, r.Leaf})
				if len(acks) >= 200 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		t.Fatal("too slow")
	}
	stop() // SIGTERM, in effect
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		got, err := l.LeafBytes(a.index)
		if err != nil || !bytes.Equal(got, a.leaf) {
			t.Fatalf("acknowledged entry %d is not in the reopened log as acknowledged (%v)", a.index, err)
		}
	}
	t.Logf("%d acknowledged entries survived; the log has %d", len(acks), l.Head().Size)
}
