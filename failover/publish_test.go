package failover

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/s3proc"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/storage/storagetest"
)

// TestPublishFailover: two servers on one PostgreSQL log, both started
// with --publish to one versitygw bucket, under an authorised-append
// load. Only the leader writes to the bucket. The leader is SIGKILLed
// while it publishes; the server that takes over completes the bucket
// from its checkpoint: it ends at the log's size, custody audit --tiles
// reads it over HTTP and finds it clean, and no object was found with
// other bytes (no alarm on either server: nothing had to be, or was,
// overwritten).
func TestPublishFailover(t *testing.T) {
	store := storagetest.PostgresURL(t)
	g := s3proc.ForTest(t, "logs")
	admin := testlog.NewActor("admin")
	vkey := initLog(t, store, admin)
	ttl := time.Second
	pub := "--publish=s3://logs/ha"
	servers := []*server{newServer(t, store, ttl, pub), newServer(t, store, ttl, pub)}
	cl, err := client.New(servers[0].URL+","+servers[1].URL, vkey, &client.Options{FailoverWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, cl, admin, 8)
	ld := startLoad(t, cs, cl, 8)
	leader := waitLeader(t, 30*time.Second, servers...)
	var follower *server
	for _, s := range servers {
		if s != leader {
			follower = s
		}
	}
	// Publication is under way on the leader, and on it alone.
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, leader, "custody_publish_size") < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the leader published nothing in 30s:\n%s", leader.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := metric(t, leader, "custody_publish_passes_total"); n == 0 {
		t.Fatal("the leader counts no publication pass")
	}
	if n := metric(t, follower, "custody_publish_passes_total"); n != 0 {
		t.Fatalf("the follower made %v publication passes", n)
	}
	leader.kill()
	next := waitLeader(t, 30*time.Second, follower)
	time.Sleep(time.Second)
	acks := ld.finish()
	if ld.failed.Load() != 0 || len(acks) == 0 {
		t.Fatalf("%d acknowledged, %d denied or refused", len(acks), ld.failed.Load())
	}

	out, code := custody(t, "checkpoint", "--store", store, "--json")
	if code != 0 {
		t.Fatalf("custody checkpoint: %s", out)
	}
	var cp struct {
		Size uint64 `json:"size"`
	}
	if err := json.Unmarshal([]byte(out), &cp); err != nil {
		t.Fatal(err)
	}
	base := g.URL + "/logs/ha"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if bucketSize(t, base) == cp.Size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket is at size %d, the log at %d, 30s after the takeover:\n%s", bucketSize(t, base), cp.Size, next.logText())
		}
	}
	out, code = custody(t, "audit", "--tiles", base, "--log-key", vkey)
	if code != 0 || !strings.Contains(out, "CLEAN") {
		t.Fatalf("audit of the bucket: exit %d\n%s", code, out)
	}
	for _, s := range servers {
		if strings.Contains(s.logText(), "ALARM") {
			t.Fatalf("a server found an object with other bytes:\n%s", s.logText())
		}
	}
	if n := metric(t, next, "custody_publish_alarms_total"); n != 0 {
		t.Fatalf("%v alarms", n)
	}
	t.Logf("%d appends acknowledged; the bucket holds the log at size %d after the takeover", len(acks), cp.Size)
}

// metric reads one sample of a server's /metrics (0 when absent).
func metric(t *testing.T, s *server, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// bucketSize reads the size of the bucket's checkpoint over HTTP (0: none).
func bucketSize(t *testing.T, base string) uint64 {
	t.Helper()
	resp, err := http.Get(base + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0
	}
	data, _ := io.ReadAll(resp.Body)
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 {
		return 0
	}
	n, _ := strconv.ParseUint(lines[1], 10, 64)
	return n
}
