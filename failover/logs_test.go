package failover

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/s3proc"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
)

// logState reads log name's role, lease epoch and leader from a server
// of several logs (/logs/NAME/readyz).
func (s *server) logState(t *testing.T, name string) (role string, epoch uint64, leader string) {
	t.Helper()
	resp, err := readyClient.Get(s.URL + "/logs/" + name + "/readyz")
	if err != nil {
		t.Fatalf("log %s on %s: %v", name, s.URL, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "role":
			role = v
		case "epoch":
			epoch, _ = strconv.ParseUint(v, 10, 64)
		case "leader":
			leader = v
		}
	}
	return role, epoch, leader
}

// waitRole waits until log name on s has the role.
func waitRole(t *testing.T, s *server, name, role string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if r, _, err := s.logRole(name); err == nil && r == role {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, _, err := s.logRole(name)
	t.Fatalf("log %s on %s is %s (%v) after %s, want %s", name, s.URL, r, err, within, role)
	return time.Time{}
}

// TestTwoLogsFailover: two logs in one database, two `custody serve`
// processes serving both, each leading the log it prefers. Clients
// append to both logs; the leader of log a is SIGKILLed. Log b's leader,
// epoch and acknowledgements are untouched (every append to it is
// acknowledged at the first try, some while log a has no leader), log a
// fails over to the other server, and both logs audit clean with every
// acknowledged entry in place.
func TestTwoLogsFailover(t *testing.T) {
	base := storagetest.PostgresURL(t)
	ttl := time.Duration(envInt("CUSTODY_FAILOVER_TTL_MS", 2000)) * time.Millisecond
	nClients := envInt("CUSTODY_FAILOVER_CLIENTS", 8)
	adminA, adminB := testlog.NewActor("admin"), testlog.NewActor("admin")
	originA, originB := "failover.test/a", "failover.test/b"
	vkeyA := initLogAt(t, base, originA, adminA, "--log", "a")
	vkeyB := initLogAt(t, base, originB, adminB, "--log", "b")

	// Started together, each takes its preferred log's lease at once and
	// leaves the other's free lease for a lease time (it leads one log
	// already), by which time the other server has taken it.
	s1 := makeServer(t, base, ttl, "--log", "a", "--log", "b", "--prefer", "a")
	s2 := makeServer(t, base, ttl, "--log", "a", "--log", "b", "--prefer", "b")
	startTogether(s1, s2)
	waitRole(t, s1, "a", "leader", 10*ttl)
	waitRole(t, s2, "b", "leader", 10*ttl)
	if r, _, _ := s1.logRole("b"); r != "follower" {
		t.Fatalf("s1 is %s of log b, want follower", r)
	}
	if r, _, _ := s2.logRole("a"); r != "follower" {
		t.Fatalf("s2 is %s of log a, want follower: the leaderships did not spread", r)
	}

	clA, err := client.New(s1.URL+"/logs/a,"+s2.URL+"/logs/a", vkeyA, &client.Options{FailoverWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clB, err := client.New(s2.URL+"/logs/b,"+s1.URL+"/logs/b", vkeyB, &client.Options{FailoverWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	csA := newCastAt(t, clA, originA, adminA, nClients)
	csB := newCastAt(t, clB, originB, adminB, nClients)
	_, epochB, leaderB := s2.logState(t, "b")
	_, epochA, _ := s1.logState(t, "a")
	if leaderB != s2.URL+"/logs/b" {
		t.Fatalf("log b's leader advertises %s, want %s/logs/b", leaderB, s2.URL)
	}

	ldA := startLoad(t, csA, clA, nClients)
	ldB := startLoad(t, csB, clB, nClients)
	time.Sleep(time.Second)
	killed := time.Now()
	s1.kill()
	tookOver := waitRole(t, s2, "a", "leader", 20*ttl)
	t.Logf("log a: s2 leads it %s after s1 was killed (lease %s)", tookOver.Sub(killed).Round(time.Millisecond), ttl)
	time.Sleep(time.Second)
	acksA, acksB := ldA.finish(), ldB.finish()
	if ldA.failed.Load() != 0 || ldB.failed.Load() != 0 {
		t.Fatalf("appends denied or refused: %d on a, %d on b", ldA.failed.Load(), ldB.failed.Load())
	}

	// Log b: not one append answered otherwise than acknowledged, some of
	// them while log a had no leader; the same leader and epoch.
	if n := ldB.errs.Load(); n != 0 {
		t.Fatalf("log b: %d appends were not acknowledged at the first try (last: %v) while log a failed over", n, ldB.lastErr.Load())
	}
	during := 0
	for _, a := range acksB {
		if a.at.After(killed) && a.at.Before(tookOver) {
			during++
		}
	}
	if during == 0 {
		t.Fatalf("log b acknowledged nothing between the kill of a's leader and a's takeover (%s)", tookOver.Sub(killed))
	}
	if r, ep, leader := s2.logState(t, "b"); r != "leader" || ep != epochB || leader != leaderB {
		t.Fatalf("log b after a's failover: %s, epoch %d, leader %s; want leader, epoch %d, %s", r, ep, leader, epochB, leaderB)
	}
	// Log a: the other server leads it, under a new epoch.
	if r, ep, _ := s2.logState(t, "a"); r != "leader" || ep <= epochA {
		t.Fatalf("log a after the kill: %s at epoch %d on s2; want leader past epoch %d", r, ep, epochA)
	}
	after := 0
	for _, a := range acksA {
		if a.at.After(tookOver) {
			after++
		}
	}
	if after == 0 {
		t.Fatal("log a acknowledged nothing after its takeover")
	}
	t.Logf("log a: %d acknowledged (%d retried); log b: %d acknowledged, %d of them while a had no leader",
		len(acksA), ldA.errs.Load(), len(acksB), during)

	out, code := custody(t, "logs", "--store", base, "--json")
	var logs []pgstore.LogInfo
	if code != 0 || json.Unmarshal([]byte(out), &logs) != nil || len(logs) != 2 {
		t.Fatalf("custody logs: exit %d\n%s", code, out)
	}
	if logs[1].Name != "b" || logs[1].Epoch != epochB || logs[1].Leader != leaderB {
		t.Fatalf("custody logs says log b is %+v; want epoch %d, leader %s", logs[1], epochB, leaderB)
	}
	if logs[0].Name != "a" || logs[0].Leader != s2.URL+"/logs/a" {
		t.Fatalf("custody logs says log a is %+v; want its leader at %s/logs/a", logs[0], s2.URL)
	}

	for name, acks := range map[string][]ack{"a": acksA, "b": acksB} {
		store, err := pgstore.WithLog(base, name)
		if err != nil {
			t.Fatal(err)
		}
		checkLog(t, store, acks)
	}
}

// TestTwoLogsPublish: one server of two logs with --publish: each log is
// published under PREFIX/logs/NAME/, complete, and audits clean over
// HTTP from the bucket against its own key (and not against the other
// log's); nothing is published at PREFIX/ itself, where the default log
// would go.
func TestTwoLogsPublish(t *testing.T) {
	base := storagetest.PostgresURL(t)
	g := s3proc.ForTest(t, "logs")
	ttl := time.Second
	names := []string{"a", "b"}
	vkeys, admins := map[string]string{}, map[string]*testlog.Actor{}
	for _, name := range names {
		admins[name] = testlog.NewActor("admin")
		vkeys[name] = initLogAt(t, base, "publish.test/"+name, admins[name], "--log", name)
	}
	s := newServer(t, base, ttl, "--log", "a", "--log", "b", "--publish=s3://logs/multi")
	for _, name := range names {
		waitRole(t, s, name, "leader", 10*ttl)
	}
	for i, name := range names {
		cl, err := client.New(s.URL+"/logs/"+name, vkeys[name], nil)
		if err != nil {
			t.Fatal(err)
		}
		// Log a: GENESIS, an enrolment and a grant; log b two more.
		newCastAt(t, cl, "publish.test/"+name, admins[name], 1+2*i)
	}
	for _, name := range names {
		out, code := custody(t, "checkpoint", "--store", base, "--log", name, "--json")
		var cp struct {
			Size uint64 `json:"size"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &cp) != nil {
			t.Fatalf("custody checkpoint --log %s: exit %d\n%s", name, code, out)
		}
		published := g.URL + "/logs/multi/logs/" + name
		for deadline := time.Now().Add(30 * time.Second); bucketSize(t, published) != cp.Size; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("log %s: the bucket is at size %d, the log at %d:\n%s", name, bucketSize(t, published), cp.Size, s.logText())
			}
		}
		if out, code := custody(t, "audit", "--tiles", published, "--log-key", vkeys[name]); code != 0 || !strings.Contains(out, "CLEAN") {
			t.Fatalf("audit of log %s in the bucket: exit %d\n%s", name, code, out)
		}
		if v := metric(t, s, `custody_publish_size{log="`+name+`"}`); v != float64(cp.Size) {
			t.Fatalf("/metrics: custody_publish_size of log %s is %v, want %d", name, v, cp.Size)
		}
	}
	if _, code := custody(t, "audit", "--tiles", g.URL+"/logs/multi/logs/a", "--log-key", vkeys["b"]); code == 0 {
		t.Fatal("log a's bucket audits clean against log b's key")
	}
	if n := bucketSize(t, g.URL+"/logs/multi"); n != 0 {
		t.Fatalf("a checkpoint of size %d at the prefix itself, where no log was published", n)
	}
}
