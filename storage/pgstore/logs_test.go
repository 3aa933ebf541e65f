package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/storage"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
)

func withLog(t *testing.T, base, name string) string {
	t.Helper()
	u, err := pgstore.WithLog(base, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func create(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// commit appends n leaves to s, which holds its lease.
func commit(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	h, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := uint64(0)
	if h != nil {
		from = h.Size
	}
	b := &storage.Batch{From: from}
	for i := range n {
		b.Leaves = append(b.Leaves, []byte(fmt.Sprintf("%s leaf %d", s.Log(), int(from)+i)))
	}
	b.Edge, b.Checkpoint = storagetest.Edge(b.Size()), []byte(fmt.Sprintf("%s checkpoint %d", s.Log(), b.Size()))
	if from == 0 {
		b.Origin = "example.com/" + s.Log()
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatalf("log %s: %v", s.Log(), err)
	}
}

func size(t *testing.T, s storage.Store) uint64 {
	t.Helper()
	h, err := s.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		return 0
	}
	return h.Size
}

// Two logs of one database share nothing: appends, files, the lease and
// its epoch are each log's own, and the default log is where it was.
func TestLogsIsolated(t *testing.T) {
	ctx := context.Background()
	base := storagetest.PostgresURL(t)
	a, b := create(t, withLog(t, base, "a")), create(t, withLog(t, base, "team-b"))
	defer a.Close()
	defer b.Close()
	def := open(t, base)
	defer def.Close()

	for _, s := range []*pgstore.Store{a, b, def} {
		l, err := s.Acquire(ctx, "http://"+s.Log(), 10*time.Second)
		if err != nil || !l.Mine || l.Epoch != 1 {
			t.Fatalf("log %s: acquiring its own lease: %+v, %v; want it, at epoch 1", s.Log(), l, err)
		}
	}
	commit(t, a, 5)
	commit(t, b, 2)
	commit(t, a, 3)
	if sa, sb, sd := size(t, a), size(t, b), size(t, def); sa != 8 || sb != 2 || sd != 0 {
		t.Fatalf("sizes: a %d, team-b %d, default %d; want 8, 2, 0", sa, sb, sd)
	}
	if v, err := b.Leaf(ctx, 0); err != nil || string(v) != "team-b leaf 0" {
		t.Fatalf("team-b's leaf 0: %q, %v", v, err)
	}
	if err := a.WriteFile("custody.json", []byte("a's")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFile("custody.json"); err == nil {
		t.Fatal("log team-b reads the config log a wrote")
	}

	// A second server of log a finds a's lease taken, and takes it when
	// it is released; team-b's lease and epoch do not move.
	a2 := open(t, withLog(t, base, "a"))
	defer a2.Close()
	if l, err := a2.Acquire(ctx, "http://a2", 10*time.Second); err != nil || l.Mine {
		t.Fatalf("a second server took log a's live lease: %+v, %v", l, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := a2.Lease(ctx); err != nil || l.Live || l.Epoch != 1 {
		t.Fatalf("log a's released lease: %+v, %v; want free, at epoch 1", l, err)
	}
	if l, err := a2.Acquire(ctx, "http://a2", 10*time.Second); err != nil || !l.Mine || l.Epoch != 2 {
		t.Fatalf("log a after its release: %+v, %v; want the second server's, at epoch 2", l, err)
	}
	commit(t, a2, 1)
	if err := a.Commit(ctx, &storage.Batch{From: 9, Leaves: [][]byte{[]byte("late")}, Edge: storagetest.Edge(10)}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("log a's old leader committed after its release: %v", err)
	}
	if l, err := b.Lease(ctx); err != nil || !l.Mine || l.Epoch != 1 || l.Failovers != 0 {
		t.Fatalf("team-b's lease after log a's failover: %+v, %v; want unchanged (its own, epoch 1)", l, err)
	}
	commit(t, b, 1)

	logs, err := pgstore.ListLogs(ctx, withLog(t, base, "a"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, li := range logs {
		got = append(got, fmt.Sprintf("%s %s %d %d", li.Name, li.Origin, li.Size, li.Epoch))
	}
	want := []string{"a example.com/a 9 2", "team-b example.com/team-b 3 1"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("logs: %q; want %q (the default log holds nothing, so is not listed)", got, want)
	}
	if logs[0].Leader != "http://a2" || logs[1].Leader != "http://team-b" {
		t.Fatalf("leaders: %q, %q", logs[0].Leader, logs[1].Leader)
	}
}

// The rules a log's name and its URL follow, and what a missing log says.
func TestLogNames(t *testing.T) {
	for _, bad := range []string{"", "A", "1a", "a_b", "a/b", "a b", "ab-" + strings.Repeat("x", 40), "é"} {
		if err := pgstore.CheckLogName(bad); err == nil || !strings.Contains(err.Error(), "lower-case letter") {
			t.Errorf("name %q: %v; want the rule", bad, err)
		}
	}
	for _, good := range []string{"a", "team-b", "x" + strings.Repeat("9", 39)} {
		if err := pgstore.CheckLogName(good); err != nil {
			t.Errorf("name %q: %v", good, err)
		}
	}
	base, name, err := pgstore.SplitLog("postgres://u@h/db?sslmode=disable&custody_log=pay")
	if err != nil || name != "pay" || base != "postgres://u@h/db?sslmode=disable" {
		t.Fatalf("SplitLog: %q %q %v", base, name, err)
	}
	if _, name, err := pgstore.SplitLog("postgres://u@h/db?custody_log=default"); err != nil || name != "" {
		t.Fatalf("custody_log=default: %q %v; want the default log", name, err)
	}
	for _, bad := range []string{"postgres://h/db?custody_log=Pay", "postgres://h/db?custody_log=a&custody_log=b", "postgres://h/db?custody_log="} {
		if _, _, err := pgstore.SplitLog(bad); err == nil {
			t.Errorf("SplitLog(%q): no error", bad)
		}
	}

	url := storagetest.PostgresURL(t)
	_, err = pgstore.Open(context.Background(), withLog(t, url, "nope"), pgstore.Options{})
	if !errors.Is(err, pgstore.ErrNoLog) || !strings.Contains(err.Error(), `no log named "nope"`) || !strings.Contains(err.Error(), "custody init") {
		t.Fatalf("opening a log that is not there: %v", err)
	}
}

// custody init on a named log: GENESIS in the log's own schema, the
// origin each log's own; re-initialising a log is refused.
func TestInitNamedLogs(t *testing.T) {
	base := storagetest.PostgresURL(t)
	opts := ledger.InitOptions{Options: ledger.Options{LeaseTTL: 2 * time.Second}}
	for _, c := range []struct{ loc, origin string }{{base, "example.com/default"}, {withLog(t, base, "a"), "example.com/a"}} {
		l, err := ledger.Init(c.loc, c.origin, opts)
		if err != nil {
			t.Fatal(err)
		}
		if l.Origin() != c.origin || l.Head().Size != 1 {
			t.Fatalf("%s: origin %q size %d", c.loc, l.Origin(), l.Head().Size)
		}
		l.Close()
	}
	if _, err := ledger.Init(withLog(t, base, "b"), "example.com/a", opts); err == nil || !strings.Contains(err.Error(), "already the origin of log a") {
		t.Fatalf("a second log with log a's origin: %v", err)
	}
	if _, err := ledger.Init(withLog(t, base, "a"), "example.com/a2", opts); err == nil || !strings.Contains(err.Error(), "already holds a ledger") {
		t.Fatalf("initialising log a again: %v", err)
	}
	logs, err := pgstore.ListLogs(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[0].Name != "default" || logs[0].Origin != "example.com/default" || logs[1].Name != "a" || logs[1].Size != 1 {
		t.Fatalf("logs: %+v", logs)
	}
	l, err := ledger.Open(withLog(t, base, "a"), ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Origin() != "example.com/a" {
		t.Fatalf("log a opens with origin %q", l.Origin())
	}
}

// The conformance suite, on a named log: nothing a store does depends
// on which schema its log is in.
func TestConformanceNamedLog(t *testing.T) {
	storagetest.Store(t, func(t *testing.T) func() storage.Store {
		url := withLog(t, storagetest.PostgresURL(t), "conformance")
		s := create(t, url)
		s.Close()
		return func() storage.Store {
			s := open(t, url)
			if l, err := s.Acquire(context.Background(), "http://test", 10*time.Second); err != nil || !l.Mine {
				t.Fatalf("acquiring the lease of a fresh log: %+v, %v", l, err)
			}
			return s
		}
	})
}

// Options.LeaseWait: a free lease is taken only once it has stayed free
// as long as LeaseWait says, asked again at every try.
func TestLeaseWait(t *testing.T) {
	url := withLog(t, storagetest.PostgresURL(t), "w")
	ttl := 300 * time.Millisecond
	first, err := ledger.Init(url, "example.com/w", ledger.InitOptions{Options: ledger.Options{LeaseTTL: ttl, Advertise: "http://first"}})
	if err != nil {
		t.Fatal(err)
	}
	var wait atomic.Int64
	wait.Store(int64(time.Hour))
	second, err := ledger.Open(url, ledger.Options{LeaseTTL: ttl, Advertise: "http://second",
		LeaseWait: func() time.Duration { return time.Duration(wait.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !first.Role().Leader || second.Role().Leader {
		t.Fatalf("roles: first %+v, second %+v", first.Role(), second.Role())
	}
	first.Close() // releases the lease
	time.Sleep(10 * ttl)
	if second.Role().Leader {
		t.Fatal("the second server took the free lease before its LeaseWait")
	}
	wait.Store(0)
	deadline := time.Now().Add(20 * ttl)
	for !second.Role().Leader {
		if time.Now().After(deadline) {
			t.Fatalf("the second server did not take the free lease once its LeaseWait was 0: %+v", second.Role())
		}
		time.Sleep(ttl / 10)
	}
}
