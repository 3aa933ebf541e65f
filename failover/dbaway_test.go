package failover

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/server/api"
)

// cluster is a PostgreSQL cluster of the test's own, run by
// scripts/postgres.sh, so that the test can stop and start it.
type cluster struct {
	t      *testing.T
	script string
	dir    string
	port   string
	URL    string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "postgres.sh")
	havePG := false
	if _, err := exec.LookPath("pg_ctl"); err == nil {
		havePG = true
	} else if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) > 0 {
		havePG = true
	}
	if !havePG {
		testenv.Need(t, "the PostgreSQL binaries are missing (scripts/postgres.sh install)")
	}
	dir, err := os.MkdirTemp("", "custody-pgaway")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // the cluster's owner is another user when run as root
	addr := freeAddr(t)
	c := &cluster{t: t, script: script, dir: filepath.Join(dir, "pg"), port: addr[strings.LastIndex(addr, ":")+1:]}
	c.URL = strings.TrimSpace(c.run("start"))
	t.Cleanup(func() { c.run("stop"); os.RemoveAll(dir) })
	return c
}

func (c *cluster) run(op string) string {
	c.t.Helper()
	cmd := exec.Command("bash", c.script, op, c.dir)
	cmd.Env = append(os.Environ(), "PGPORT="+c.port)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("postgres.sh %s: %v\n%s%s", op, err, out.String(), errb.String())
	}
	return out.String()
}

// TestDatabaseAway stops PostgreSQL under load and starts it again: every
// append meanwhile is answered 503 (nothing acknowledged), appends resume
// on their own once it is back, and no acknowledged entry is lost.
func TestDatabaseAway(t *testing.T) {
	pg := newCluster(t)
	admin := testlog.NewActor("admin")
	vkey := initLog(t, pg.URL, admin)
	ttl := time.Second
	servers := []*server{newServer(t, pg.URL, ttl), newServer(t, pg.URL, ttl)}
	urls := servers[0].URL + "," + servers[1].URL
	// Give up quickly, so that unavailability shows as errors; the load
	// sends the same bytes again until they are acknowledged.
	cl, err := client.New(urls, vkey, &client.Options{Retries: -1, FailoverWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	cs := newCast(t, cl, admin, 17)
	ld := startLoad(t, cs, cl, 16) // agent 16 probes the servers
	time.Sleep(time.Second)

	pg.run("stop")
	stopped := time.Now()
	errsBefore := ld.errs.Load()
	// During the outage: a clear 503 from every server, and nothing
	// acknowledged.
	time.Sleep(500 * time.Millisecond)
	_, env := cs.pending(t, 16, 0)
	for _, s := range servers {
		resp, err := http.Post(s.URL+api.PathEntries, "application/json", bytes.NewReader(env))
		if err != nil {
			t.Fatal(err)
		}
		var doc api.Error
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			(doc.ReasonCode != api.CodeUnavailable && doc.ReasonCode != api.CodeNotLeader) {
			t.Fatalf("an append to %s with the database away: %d %+v", s.URL, resp.StatusCode, doc)
		}
		t.Logf("with the database away, %s answers 503 %s: %s", s.URL, doc.ReasonCode, doc.Reason)
	}
	time.Sleep(2 * time.Second)
	ld.mu.Lock()
	for _, a := range ld.acks {
		if a.at.After(stopped.Add(300 * time.Millisecond)) {
			t.Errorf("receipt %s was acknowledged %s after the database stopped", a.id, a.at.Sub(stopped))
		}
	}
	nAcks := len(ld.acks)
	ld.mu.Unlock()
	if ld.errs.Load() == errsBefore {
		t.Fatal("no append failed while the database was away")
	}

	pg.run("start")
	restarted := time.Now()
	deadline := restarted.Add(30 * time.Second)
	for {
		ld.mu.Lock()
		n := len(ld.acks)
		ld.mu.Unlock()
		if n > nAcks+100 {
			break
		}
		if time.Now().After(deadline) {
			for _, s := range servers {
				r, l, err := s.role()
				t.Logf("%s: role %s leader %s err %v", s.URL, r, l, err)
			}
			out, _ := exec.Command("psql", pg.URL, "-Atc", "SELECT epoch, holder, url, expires_at, clock_timestamp() FROM custody_lease").CombinedOutput()
			t.Logf("lease: %s", out)
			t.Logf("the clients' last error: %v (%d errors)", ld.lastErr.Load(), ld.errs.Load())
			time.Sleep(time.Second)
			t.Logf("the clients' last error: %v (%d errors)", ld.lastErr.Load(), ld.errs.Load())
			sso, _ := exec.Command("sh", "-c", "ss -s").CombinedOutput()
			t.Logf("%s", sso)
			t.Fatalf("appends did not resume within 30s of the database's return (%d acknowledged since)", n-nAcks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("appends resumed %s after the database came back; %d not acknowledged meanwhile (sent again)",
		time.Since(restarted).Round(time.Millisecond), ld.errs.Load()-errsBefore)
	acks := ld.finish()
	checkLog(t, pg.URL, acks)
}
