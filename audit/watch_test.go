package audit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
)

// serve exports a snapshot of r into a fresh folder and serves it over
// HTTP, as any static web server would.
func serve(t *testing.T, r *testlog.Rogue) (audit.Fetcher, string) {
	t.Helper()
	dir := t.TempDir()
	export(t, r, dir)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return &audit.HTTP{Base: srv.URL + "/"}, dir
}

func watch(t *testing.T, f audit.Fetcher, vkey string, old []byte) *audit.WatchResult {
	t.Helper()
	res, err := audit.Watch(context.Background(), f, vkey, old)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// grow appends n pending receipts to the standard scenario's log.
func grow(t *testing.T, r *testlog.Rogue, ids ...string) {
	au := r.Statements()
	agent := testlog.NewActor("agent:grow")
	p := testlog.NewActor("user:grow")
	if r.Size() < 12 {
		r.Accept(r.Admin, au.Enroll(r.Admin, p, "p_grow"))
		r.Accept(p, au.Confirm(p, "c_grow", testlog.NewGrant(agent, "wf_grow", []string{"t/*"}, []string{"act"}, nil, nil, 86400)))
	}
	for _, id := range ids {
		r.Accept(agent, au.Pending(agent, id, "c_grow", "s", "act", "t/x", nil))
	}
}

func TestWatch(t *testing.T) {
	r, _ := standard(t)
	grow(t, r, "a1")
	vkey := r.VerifierKey()

	f, _ := serve(t, r)
	first := watch(t, f, vkey, nil)
	if first.Outcome != audit.WatchFirst || first.Alert || first.Keep == nil {
		t.Fatalf("first look: %+v", first)
	}
	kept := first.Keep
	if res := watch(t, f, vkey, kept); res.Outcome != audit.WatchUnchanged || res.Alert {
		t.Fatalf("same checkpoint: %+v", res)
	}

	// The log grows past a tile boundary: a consistent extension.
	var ids []string
	for i := 0; i < 300; i++ {
		ids = append(ids, "g"+string(rune('a'+i%26))+itoa(i))
	}
	grow(t, r, ids...)
	f2, _ := serve(t, r)
	res := watch(t, f2, vkey, kept)
	if res.Outcome != audit.WatchGrew || res.Alert || res.Keep == nil {
		t.Fatalf("grown log: %+v", res)
	}

	// Rollback: the old, smaller snapshot served after the larger one.
	if res := watch(t, f, vkey, res.Keep); res.Outcome != audit.WatchRollback || !res.Alert || res.Keep != nil {
		t.Fatalf("rollback: %+v", res)
	}
}

func TestWatchForks(t *testing.T) {
	// Two logs with the same keys and the same first 13 entries, then
	// different ones: the log key signed two histories.
	a, _ := standard(t)
	b, _ := standard(t)
	grow(t, a, "x1")
	grow(t, b, "y1")
	vkey := a.VerifierKey()
	fa, _ := serve(t, a)
	fb, _ := serve(t, b)
	kept := watch(t, fa, vkey, nil).Keep

	res := watch(t, fb, vkey, kept)
	if res.Outcome != audit.WatchSplitView || !res.Alert {
		t.Fatalf("same size, other root: %+v", res)
	}
	// b grows on: larger, but not an extension of a's tree.
	grow(t, b, "y2", "y3")
	fb2, _ := serve(t, b)
	res = watch(t, fb2, vkey, kept)
	if res.Outcome != audit.WatchInconsistent || !res.Alert {
		t.Fatalf("inconsistent extension: %+v", res)
	}
	// An extension of a served from tiles that lie about it.
	grow(t, a, "x2", "x3")
	fa2, dir := serve(t, a)
	path := filepath.Join(dir, merkle.TilePath(0, 0, int(a.Size())))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	res = watch(t, fa2, vkey, kept)
	if res.Outcome != audit.WatchBadTiles || !res.Alert {
		t.Fatalf("lying tiles: %+v", res)
	}
	// A checkpoint signed by another key.
	other := testlog.NewRogue(t, testlog.RogueOptions{LogKey: testlog.NewActorSeed(testlog.Origin, "other")})
	fo, _ := serve(t, other)
	if res := watch(t, fo, vkey, kept); res.Outcome != audit.WatchBadSignature || !res.Alert {
		t.Fatalf("foreign checkpoint: %+v", res)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
