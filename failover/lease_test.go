package failover

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/storage/storagetest"
)

// leaseEvents returns the server's log lines of one lease event, each as
// its key=value fields (slog's text format).
func (s *server) leaseEvents(event string) []map[string]string {
	b, _ := os.ReadFile(s.log)
	var out []map[string]string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, " lease_event="+event+" ") && !strings.HasSuffix(line, " lease_event="+event) {
			continue
		}
		fields := map[string]string{}
		for rest := line; rest != ""; {
			rest = strings.TrimLeft(rest, " ")
			k, v, ok := strings.Cut(rest, "=")
			if !ok {
				break
			}
			if strings.HasPrefix(v, `"`) {
				if u, err := strconv.QuotedPrefix(v); err == nil {
					fields[k], _ = strconv.Unquote(u)
					rest = v[len(u):]
					continue
				}
			}
			v, rest, _ = strings.Cut(v, " ")
			fields[k] = v
		}
		out = append(out, fields)
	}
	return out
}

// TestLeaseRenewedLate: the only server of a log is paused (SIGSTOP) for
// longer than its lease, then resumed. Nobody took the lease meanwhile,
// so its next renewal succeeds, but late: it writes one WARN line with
// lease_event=renewed_late, its epoch, the time since the renewal before
// (at least the pause) and the lease time, counts it in
// custody_lease_renewed_late_total, and goes on leading under the same
// epoch, with no step-down. A pause that caught a renewal in flight ends
// in a step-down instead (the renewal's deadline passed): the test then
// pauses it again.
func TestLeaseRenewedLate(t *testing.T) {
	store := storagetest.PostgresURL(t)
	ttl := time.Duration(envInt("CUSTODY_FAILOVER_TTL_MS", 1000)) * time.Millisecond
	pause := 3 * ttl / 2
	initLog(t, store, testlog.NewActor("admin"))
	s := newServer(t, store, ttl)
	if r, _, _ := s.role(); r != "leader" {
		t.Fatalf("the only server is %s, want the leader", r)
	}
	for try := 1; ; try++ {
		epoch := metric(t, s, "custody_lease_epoch")
		late, lost := metric(t, s, "custody_lease_renewed_late_total"), metric(t, s, "custody_lease_lost_total")
		lines := len(s.leaseEvents("renewed_late"))
		s.signal(syscall.SIGSTOP)
		time.Sleep(pause)
		s.signal(syscall.SIGCONT)
		deadline := time.Now().Add(5 * ttl)
		for metric(t, s, "custody_lease_renewed_late_total") == late && metric(t, s, "custody_lease_lost_total") == lost {
			if time.Now().After(deadline) {
				t.Fatalf("%s after a pause of %s: no late renewal and no step-down counted", 5*ttl, pause)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if metric(t, s, "custody_lease_lost_total") != lost {
			if try == 3 {
				t.Fatalf("three pauses of %s each ended in a step-down, not a late renewal", pause)
			}
			t.Logf("pause %d caught a renewal in flight and the server stepped down; pausing again", try)
			waitLeader(t, 10*ttl, s)
			continue
		}
		if got := metric(t, s, "custody_lease_renewed_late_total"); got != late+1 {
			t.Errorf("custody_lease_renewed_late_total went from %v to %v after one pause", late, got)
		}
		var ev map[string]string
		for deadline := time.Now().Add(5 * ttl); ; time.Sleep(20 * time.Millisecond) {
			if evs := s.leaseEvents("renewed_late"); len(evs) > lines {
				if len(evs) > lines+1 {
					t.Errorf("%d renewed_late lines after one pause, want 1", len(evs)-lines)
				}
				ev = evs[len(evs)-1]
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the renewal was counted late, but the log has no new lease_event=renewed_late line:\n%s", s.logText())
			}
		}
		since, err := time.ParseDuration(ev["since_renewal"])
		if ev["level"] != "WARN" || ev["msg"] != "lease renewed late" || ev["epoch"] != strconv.FormatFloat(epoch, 'f', -1, 64) ||
			ev["lease"] != ttl.String() || err != nil || since < pause || ev["log"] != origin {
			t.Errorf("the renewed_late line: %v; want level WARN, epoch %v, since_renewal at least %s, lease %s, log %s", ev, epoch, pause, ttl, origin)
		}
		if r, _, _ := s.role(); r != "leader" || metric(t, s, "custody_lease_epoch") != epoch {
			t.Errorf("after the late renewal the server is %s at epoch %v, want the leader at epoch %v", r, metric(t, s, "custody_lease_epoch"), epoch)
		}
		if n := len(s.leaseEvents("lost")) + len(s.leaseEvents("stepped_down")); n != try-1 {
			t.Errorf("%d step-down lines, want %d", n, try-1)
		}
		t.Logf("renewed late after a pause of %s: %v", pause, ev)
		return
	}
}
