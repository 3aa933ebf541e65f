package failover

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/storage/storagetest"
)

// TestNeverSignedTakesOver: two servers, each with its own configuration
// folder as on two machines. The follower has signed nothing (its
// signed-head file, if it made one, holds no checkpoint); the leader is
// killed: the follower takes over and accepts appends, and it starts
// again after a restart. Then its signed-head file is damaged (a slot
// that is neither empty nor whole): it refuses to start.
func TestNeverSignedTakesOver(t *testing.T) {
	store := storagetest.PostgresURL(t)
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	ttl := time.Second
	a := newServer(t, store, ttl)
	if r, _, _ := a.role(); r != "leader" {
		t.Fatalf("the first server is %s, want the leader", r)
	}
	b := newServer(t, store, ttl)
	if r, _, _ := b.role(); r != "follower" {
		t.Fatalf("the second server is %s, want a follower", r)
	}
	cl, err := client.New(a.URL+","+b.URL, vkey, &client.Options{FailoverWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, cl, admin, 1)
	for n := range 3 {
		_, env := cs.pending(t, 0, n)
		if _, err := cl.Append(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}

	a.kill()
	if s := waitLeader(t, 10*ttl, b); s != b {
		t.Fatal("the follower did not take over")
	}
	onB, err := client.New(b.URL, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := 3; n < 6; n++ {
		_, env := cs.pending(t, 0, n)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := onB.Append(ctx, env)
		cancel()
		if err != nil {
			t.Fatalf("append %d to the server that took over: %v", n, err)
		}
		if !r.Accepted() {
			t.Fatalf("append %d not accepted: %+v", n, r)
		}
	}
	files := b.signedHeadFiles()
	if len(files) != 1 {
		t.Fatalf("the server that took over has %d signed-head files, want 1: %v", len(files), files)
	}

	// Restarted, it leads again (nobody else runs) from its own history.
	b.kill()
	b.start()
	if s := waitLeader(t, 10*ttl, b); s != b {
		t.Fatal("the restarted server does not lead")
	}
	_, env := cs.pending(t, 0, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = onB.Append(ctx, env)
	cancel()
	if err != nil {
		t.Fatalf("append after the restart: %v", err)
	}

	// A damaged signed-head file still refuses: both slots hold bytes
	// that are neither empty nor a checkpoint.
	b.kill()
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		raw[i] ^= 0x5a
	}
	if err := os.WriteFile(files[0], raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b.spawn()
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server started on a damaged signed-head file")
	}
	if code := b.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("the server exited 0 on a damaged signed-head file:\n%s", b.logText())
	}
	t.Logf("refused as it should:\n%s", b.logText())
}
