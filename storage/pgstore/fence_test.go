package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/storagetest"
)

func sql(t *testing.T, u, q string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatal(err)
	}
}

func signed(t *testing.T, a *testlog.Actor, st statement.Statement) []byte {
	t.Helper()
	_, raw, err := a.Sign(st)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestFencedLeaderCommitsNothing: a leader whose lease was taken over
// while it did not look (its lease lasts an hour, so it renews nothing in
// the test) decides a batch on its stale state and tries to commit it:
// the fence refuses it, nothing of it is in the store, it publishes no
// checkpoint, steps down and names the new leader.
func TestFencedLeaderCommitsNothing(t *testing.T) {
	u := storagetest.PostgresURL(t)
	w := testlog.NewWorld(t, testlog.WorldOptions{Location: u,
		Init: ledger.InitOptions{Options: ledger.Options{LeaseTTL: time.Hour, Advertise: "http://a.example"}}})
	w.Standard()
	a := w.L
	if r := a.Role(); !r.Shared || !r.Leader {
		t.Fatalf("the first server: %+v, want the leader", r)
	}
	before := a.Head()
	// The lease lapses (as it would for a server paused past it) and
	// another server takes it.
	sql(t, u, "UPDATE custody_lease SET expires_at = clock_timestamp() - interval '1 second'")
	b, err := ledger.Open(u, ledger.Options{Clock: w.Clock.Now, LeaseTTL: 2 * time.Second, Advertise: "http://b.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rb := b.Role()
	if !rb.Leader || rb.Epoch <= a.Role().Epoch {
		t.Fatalf("the second server after the lease lapsed: %+v (the first: %+v)", rb, a.Role())
	}
	au := w.Author
	// The old leader still believes it leads: it decides y on its state,
	// which is still the store's (the new leader has committed nothing
	// yet, so only the lease's epoch can stop it), and tries to commit.
	y := signed(t, w.Admin, au.Enroll(w.Admin, testlog.NewActor("user:yvonne"), "p_yvonne"))
	_, err = a.Append(context.Background(), y)
	if !errors.Is(err, ledger.ErrNotLeader) || !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("the old leader's append: %v, want fenced and not leader", err)
	}
	if r := a.Role(); r.Leader || r.StepDowns != 1 {
		t.Fatalf("the old leader after its fenced commit: %+v, want stepped down", r)
	}
	if h := a.Head(); h.Size != before.Size || !bytes.Equal(h.Checkpoint, before.Checkpoint) {
		t.Fatalf("the old leader published a head of size %d (it had %d)", h.Size, before.Size)
	}
	if h, err := b.Store().Head(context.Background()); err != nil || h.Size != before.Size {
		t.Fatalf("the store's head after the fenced commit: %+v, %v; want size %d", h, err, before.Size)
	}
	// The new leader goes on from the committed head.
	w.Admin.Seq-- // y was not logged
	x := signed(t, w.Admin, au.Enroll(w.Admin, testlog.NewActor("user:xavier"), "p_xavier"))
	resB, err := b.Append(context.Background(), x)
	if err != nil || resB.Verdict != authority.Accepted || resB.Index != before.Size {
		t.Fatalf("the new leader's append: %+v, %v", resB, err)
	}
	// The old leader now refuses appends and names the new one.
	_, err = a.Append(context.Background(), y)
	if errors.Is(err, storage.ErrFenced) {
		t.Fatalf("the old leader decided again after stepping down: %v", err)
	}
	var nl *ledger.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != "http://b.example" {
		t.Fatalf("appending to the old leader again: %v, want not leader, naming http://b.example", err)
	}
	// It follows the log from the store.
	deadline := time.Now().Add(5 * time.Second)
	for a.Head().Size != b.Head().Size && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a.Head().Size != b.Head().Size || !bytes.Equal(a.Head().Checkpoint, b.Head().Checkpoint) {
		t.Fatalf("the follower's head: %d, the leader's %d", a.Head().Size, b.Head().Size)
	}
	// Yvonne's enrolment goes through the new leader.
	y = signed(t, w.Admin, au.Enroll(w.Admin, testlog.NewActor("user:yvonne"), "p_yvonne"))
	if res, err := b.Append(context.Background(), y); err != nil || res.Verdict != authority.Accepted || res.Duplicate {
		t.Fatalf("y through the new leader: %+v, %v", res, err)
	}
	storagetest.ReplayEqualsState(t, b)
}

// cutter is a TCP proxy in front of PostgreSQL that, when armed, breaks
// the connection that sends COMMIT: before it reaches the server (the
// transaction rolls back) or just after (it commits, and the answer is
// lost). Either way the client cannot know the outcome.
type cutter struct {
	ln     net.Listener
	target string
	armed  atomic.Int32 // 0 off, 1 cut before, 2 cut after
	cuts   atomic.Int32
	wg     sync.WaitGroup
}

var commitMsg = []byte("Q\x00\x00\x00\x0bcommit\x00")

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go c.serve(conn)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

func (c *cutter) serve(client net.Conn) {
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		client.Close()
		return
	}
	// swallow, once set, keeps the server's answers from the client, and
	// answered says the server has answered (to the COMMIT: it committed).
	var swallow atomic.Bool
	answered := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if swallow.Load() {
					select {
					case answered <- struct{}{}:
					default:
					}
				} else if _, err := client.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		client.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if mode := c.armed.Load(); mode != 0 && bytes.Contains(chunk, commitMsg) && c.armed.CompareAndSwap(mode, 0) {
				c.cuts.Add(1)
				if mode == 2 {
					// The COMMIT reaches the server, which commits; its
					// answer never reaches the client. Waiting for the
					// answer makes the commit certain however loaded the
					// machine is (the client's read-back would otherwise
					// race the server's reading of COMMIT).
					swallow.Store(true)
					server.Write(chunk)
					select {
					case <-answered:
					case <-time.After(30 * time.Second):
					}
				}
				client.Close()
				server.Close()
				return
			}
			if _, err := server.Write(chunk); err != nil {
				client.Close()
				return
			}
		}
		if err != nil {
			server.Close()
			return
		}
	}
}

// TestCommitCutAtCommit breaks the leader's connection at COMMIT: a batch
// that did commit is acknowledged after the head is read back; one that
// did not is answered with an error, nothing of it is in the log, and the
// ledger goes on.
func TestCommitCutAtCommit(t *testing.T) {
	u := storagetest.PostgresURL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	cut := newCutter(t, pu.Host)
	pu.Host = cut.ln.Addr().String()
	w := testlog.NewWorld(t, testlog.WorldOptions{Location: pu.String()})
	sc := w.Standard()
	au := w.Author
	for _, tc := range []struct {
		name string
		mode int32
	}{{"committed", 2}, {"rolled back", 1}} {
		size := w.L.Head().Size
		p := testlog.NewActor("user:" + tc.name[:4])
		env := signed(t, w.Admin, au.Enroll(w.Admin, p, "p_"+tc.name[:4]))
		cut.armed.Store(tc.mode)
		res, err := w.L.Append(context.Background(), env)
		if cut.cuts.Load() == 0 {
			t.Fatalf("%s: no COMMIT was cut (%+v, %v)", tc.name, res, err)
		}
		cut.cuts.Store(0)
		switch tc.mode {
		case 2:
			if err != nil || res.Index != size {
				t.Fatalf("%s: %+v, %v; want acknowledged at %d after reading the head back", tc.name, res, err, size)
			}
		case 1:
			if !errors.Is(err, storage.ErrCommitUnknown) {
				t.Fatalf("%s: %+v, %v; want an unknown outcome, resolved as not committed", tc.name, res, err)
			}
			if w.L.Head().Size != size {
				t.Fatalf("%s: head %d, want %d", tc.name, w.L.Head().Size, size)
			}
			w.Admin.Seq-- // not logged
			// The same submission goes through on the next try.
			if res, err := w.L.Append(context.Background(), env); err != nil || res.Index != size || res.Duplicate {
				t.Fatalf("%s: the retry: %+v, %v", tc.name, res, err)
			}
			w.Admin.Seq++
		}
	}
	_ = sc
	w.Accept(w.Admin, au.Enroll(w.Admin, testlog.NewActor("user:after"), "p_after"))
	storagetest.ReplayEqualsState(t, w.L)
}
