package failover

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/storage/storagetest"
)

// TestPausedLeaderIsFenced: the leader is paused (SIGSTOP) with an append
// sent to it; another server takes the lease and accepts appends; the old
// leader resumes (SIGCONT) with that append in hand: it acknowledges
// nothing, its checkpoint never shows the entry, it steps down and names
// the new leader, and the entry is appended once, through the new leader.
func TestPausedLeaderIsFenced(t *testing.T) {
	store := storagetest.PostgresURL(t)
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	ttl := time.Second
	a := newServer(t, store, ttl)
	if r, _, _ := a.role(); r != "leader" {
		t.Fatalf("the first server is %s, want the leader", r)
	}
	b := newServer(t, store, ttl)
	both, err := client.New(a.URL+","+b.URL, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, both, admin, 2)
	for n := range 5 {
		_, env := cs.pending(t, 0, n)
		if _, err := both.Append(context.Background(), env); err != nil {
			t.Fatal(err)
		}
	}

	a.signal(syscall.SIGSTOP)
	paused := time.Now()
	id, env := cs.pending(t, 1, 0)
	answer := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(a.URL+api.PathEntries, "application/json", bytes.NewReader(env))
		if err != nil {
			answer <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	if waitLeader(t, 10*ttl, b) != b {
		t.Fatal("the second server did not take over")
	}
	t.Logf("the second server leads %s after the pause", time.Since(paused).Round(time.Millisecond))
	bOnly, err := client.New(b.URL, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, other := cs.pending(t, 0, 5)
	rOther, err := bOnly.Append(context.Background(), other)
	if err != nil {
		t.Fatalf("the new leader refused an append: %v", err)
	}

	a.signal(syscall.SIGCONT)
	select {
	case code := <-answer:
		if code == http.StatusOK || code == http.StatusForbidden {
			t.Fatalf("the resumed old leader answered %d: it decided after losing its lease", code)
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("the resumed old leader answered %d, want 503", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed old leader did not answer")
	}
	// It steps down at once and names the new leader once the database
	// has told it (a read of at most a second).
	role, leader, err := a.role()
	for deadline := time.Now().Add(2 * ttl); err == nil && role == "follower" && leader != b.URL && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		role, leader, err = a.role()
	}
	if err != nil || role != "follower" || leader != b.URL {
		t.Fatalf("the old leader after resuming: %s (leader %s), %v; want a follower naming %s", role, leader, err, b.URL)
	}
	// Nothing the old leader held is in the log, and its checkpoint is
	// one the new leader's tree agrees with.
	aOnly, err := client.New(a.URL, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bOnly.Statement(context.Background(), id); !client.NotFound(err) {
		t.Fatalf("the paused append %s: %v, want not in the log", id, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var cpA merkle.Checkpoint
	for time.Now().Before(deadline) {
		if cpA, _, err = aOnly.Head(context.Background()); err == nil && cpA.Size >= rOther.Index+1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cpB, _, err := bOnly.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cpA.Size != cpB.Size || cpA.Root != cpB.Root {
		t.Fatalf("the old leader serves a head of size %d, the new leader %d", cpA.Size, cpB.Size)
	}
	// The append goes through once, through either URL list.
	r, err := both.Append(context.Background(), env)
	if err != nil || r.Duplicate {
		t.Fatalf("the paused append sent again: %+v, %v", r, err)
	}
	// A follower refuses appends with 503 and the leader's URL.
	_, env2 := cs.pending(t, 1, 1)
	resp, err := http.Post(a.URL+api.PathEntries, "application/json", bytes.NewReader(env2))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get(api.HeaderLeader) != b.URL {
		t.Fatalf("an append to the follower: %d, Retry-After %q, leader %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(api.HeaderLeader))
	}
	// The CLI on the follower: a non-zero exit that is not "denied".
	envFile := filepath.Join(t.TempDir(), "env.jsonl")
	if err := os.WriteFile(envFile, append(env2, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := custody(t, "append", "--ledger", a.URL, "--log-key", vkey, envFile); code == 0 || code == 3 {
		t.Fatalf("custody append --ledger FOLLOWER: exit %d, want non-zero and not 3 (denied)\n%s", code, out)
	} else {
		t.Logf("custody append --ledger FOLLOWER: exit %d: %s", code, strings.TrimSpace(out))
	}
	if out, code := custody(t, "audit", "--store", store); code != 0 {
		t.Fatalf("custody audit: exit %d\n%s", code, out)
	}
}
