package failover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/storage/storagetest"
)

// rawAnswer is how a server answered one raw append, and when.
type rawAnswer struct {
	status     int
	code       string
	leader     string // the Custody-Leader header
	retryAfter string
	err        error
	at         time.Time
}

func (a rawAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%d %s (leader %q, Retry-After %q)", a.status, a.code, a.leader, a.retryAfter)
}

// postRaw sends one envelope to a server and answers on the channel.
func postRaw(url string, env []byte, timeout time.Duration) <-chan rawAnswer {
	out := make(chan rawAnswer, 1)
	go func() {
		resp, err := (&http.Client{Timeout: timeout}).Post(url+api.PathEntries, "application/json", bytes.NewReader(env))
		if err != nil {
			out <- rawAnswer{err: err, at: time.Now()}
			return
		}
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		out <- rawAnswer{status: resp.StatusCode, code: e.ReasonCode, leader: resp.Header.Get(api.HeaderLeader),
			retryAfter: resp.Header.Get("Retry-After"), at: time.Now()}
	}()
	return out
}

// TestCutLeaderAnswersHeld: a leader cut off from PostgreSQL with every
// socket left open, while it holds submissions at each stage of its
// pipeline: one whose COMMIT never reached the database (the commit of
// unknown outcome), one decided behind it (waiting for that commit, then
// reloading the sequencer's state), and one sent after it stepped down,
// signed by a key it has never looked up. Each is answered 503
// (not_leader, naming the new leader if at all, or unavailable) with
// Retry-After within a few lease times of the cut, not when the database
// answers again; sent again, the same bytes are each acknowledged once,
// and the log audits clean. Before the fix, the commit's read back waited
// five seconds on the cut database and the reload after it two lease
// times more, so the first two were answered 6 and 8 s after the cut.
func TestCutLeaderAnswersHeld(t *testing.T) {
	store := storagetest.PostgresURL(t)
	ttl := time.Duration(envInt("CUSTODY_FAILOVER_TTL_MS", 1000)) * time.Millisecond
	within := 5 * ttl / 2 // the step-down comes at most 1.2 lease times after the cut
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	px, viaProxy := newPGProxy(t, store)
	s1 := newServer(t, viaProxy, ttl)
	if r, _, _ := s1.role(); r != "leader" {
		t.Fatalf("the first server is %s, want the leader", r)
	}
	s2 := newServer(t, store, ttl)
	cl, err := client.New(s1.URL, vkey, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, cl, admin, 3)

	held := px.arm()
	idA, envA := cs.pending(t, 0, 0)
	gotA := postRaw(s1.URL, envA, 20*ttl)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the leader sent no COMMIT in 20 s")
	}
	idX, envX := cs.pending(t, 1, 0)
	gotX := postRaw(s1.URL, envX, 20*ttl)
	time.Sleep(ttl / 5) // decided behind the held commit, waiting for it
	px.freeze()
	cut := time.Now()
	defer px.thaw()

	// The other server takes over; the cut one steps down.
	for deadline := cut.Add(10 * ttl); ; time.Sleep(20 * time.Millisecond) {
		r1, _, _ := s1.role()
		r2, _, _ := s2.role()
		if r1 == "follower" && r2 == "leader" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the cut: the cut leader is %q, the other server %q", 10*ttl, r1, r2)
		}
	}
	stepped := time.Since(cut)
	idY, envY := cs.pending(t, 2, 0)
	sentY := time.Now()
	gotY := postRaw(s1.URL, envY, 20*ttl)

	check := func(name string, got <-chan rawAnswer, from time.Time, within time.Duration) {
		t.Helper()
		select {
		case a := <-got:
			if a.err != nil || a.status != http.StatusServiceUnavailable || a.retryAfter == "" ||
				(a.code != api.CodeNotLeader && a.code != api.CodeUnavailable) {
				t.Errorf("the cut leader answered %s %s, want 503 not_leader or unavailable with Retry-After", name, a)
			}
			if a.leader != "" && a.leader != s2.URL {
				t.Errorf("the cut leader named %s as the leader in its answer to %s; %s leads", a.leader, name, s2.URL)
			}
			t.Logf("%s: %s, %s after the %s", name, a, a.at.Sub(from).Round(time.Millisecond),
				map[bool]string{true: "cut", false: "send"}[from == cut])
		case <-time.After(time.Until(from.Add(within))):
			t.Errorf("the cut leader held %s for more than %s", name, within)
		}
	}
	check("the append whose COMMIT it held", gotA, cut, within)
	check("the append decided behind it", gotX, cut, within)
	check("an append sent after it stepped down", gotY, sentY, ttl)
	t.Logf("the cut leader stepped down %s after the cut (lease %s)", stepped.Round(time.Millisecond), ttl)

	// The same bytes again, to every server: each acknowledged once.
	px.thaw()
	both, err := client.New(s1.URL+","+s2.URL, vkey, &client.Options{FailoverWait: 20 * ttl})
	if err != nil {
		t.Fatal(err)
	}
	var acks []ack
	for _, p := range []struct {
		id  string
		env []byte
	}{{idA, envA}, {idX, envX}, {idY, envY}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := both.Append(ctx, p.env)
		cancel()
		if err != nil || !r.Accepted() {
			t.Fatalf("receipt %s sent again after the cut: %+v, %v", p.id, r, err)
		}
		acks = append(acks, ack{id: p.id, index: r.Index, cp: r.Checkpoint, at: time.Now()})
	}
	b, _ := os.ReadFile(s1.log)
	if !strings.Contains(string(b), "lease_event=lost") {
		t.Errorf("the cut leader logged no lease_event=lost line")
	}
	checkLog(t, store, acks)
}
