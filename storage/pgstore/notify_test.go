package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
)

// TestFollowerLearnsHeadsByNotify: a follower whose poll of the head is
// an hour away still follows every commit, since each commit notifies it
// (LISTEN/NOTIFY), also after its listening connection is cut, and a
// commit to another log in the same database does not move it.
func TestFollowerLearnsHeadsByNotify(t *testing.T) {
	u := storagetest.PostgresURL(t)
	w := testlog.NewWorld(t, testlog.WorldOptions{Location: u,
		Init: ledger.InitOptions{Options: ledger.Options{LeaseTTL: time.Hour, Advertise: "http://a.example"}}})
	w.Standard()
	f, err := ledger.Open(u, ledger.Options{Clock: w.Clock.Now, LeaseTTL: time.Hour, HeadPoll: time.Hour, Advertise: "http://b.example"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Role().Leader {
		t.Fatal("the second server leads")
	}
	heads, stop := f.Watch()
	defer stop()
	fs := f.Store().(*pgstore.Store)
	waitFor(t, "the follower's listening connection", fs.Listening)

	follows := func(what string) {
		t.Helper()
		want := w.L.Head().Size
		start := time.Now()
		deadline := time.After(20 * time.Second)
		for f.Head().Size != want {
			select {
			case <-heads:
			case <-deadline:
				t.Fatalf("%s: the follower's head is %d, the leader's %d, and the next poll is an hour away", what, f.Head().Size, want)
			}
		}
		if f.Head().Root != w.L.Head().Root {
			t.Fatalf("%s: the follower's root differs at size %d", what, want)
		}
		t.Logf("%s: followed %v after the leader's answer", what, time.Since(start))
	}
	au := w.Author
	appendOne := func(name string) {
		t.Helper()
		raw := signed(t, w.Admin, au.Enroll(w.Admin, testlog.NewActor("user:"+name), "p_"+name))
		if _, err := w.L.Append(context.Background(), raw); err != nil {
			t.Fatal(err)
		}
	}
	appendOne("nina")
	follows("a commit")

	// Cut the listening connection, as a network fault or a restart of the
	// database would: it is made again, and the next commit is followed.
	sql(t, u, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'custody-listen'")
	waitFor(t, "the listening connection to go", func() bool { return !fs.Listening() })
	waitFor(t, "the listening connection to come back", fs.Listening)
	appendOne("otto")
	follows("a commit after the listening connection was cut")

	// Another log in the same database commits: this log's watchers are
	// not signalled for it; they are for this log's next commit.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := fs.WatchHead(ctx)
	select {
	case <-ch: // sent once it listens, for what it may have missed
	case <-time.After(20 * time.Second):
		t.Fatal("a new WatchHead did not signal once it listened")
	}
	other := u + "&" + pgstore.LogParam + "=other"
	lo, err := ledger.Init(other, "other.example/log", ledger.InitOptions{Options: ledger.Options{LeaseTTL: time.Hour, LogOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	if _, _, err := lo.AppendLeaves(context.Background(), [][]byte{[]byte("a leaf of another log")}); err != nil {
		t.Fatalf("appending to the other log: %v", err)
	}
	select {
	case <-ch:
		t.Fatal("signalled for another log's commit")
	case <-time.After(500 * time.Millisecond):
	}
	appendOne("paula")
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("not signalled for this log's commit")
	}
	follows("a commit after another log's")
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
	}
}
