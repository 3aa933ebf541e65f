package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
)

// The ceremonies in progress are bounded in all, per client and in time,
// and each is taken once.
func TestCeremoniesBounded(t *testing.T) {
	s := ceremonies{max: 6, perClient: 2, ttl: time.Minute}
	now := time.Unix(1e9, 0)
	put := func(client string, n int, at time.Time) bool {
		return s.put(&ceremony{kind: ceremonySignIn, client: client, session: webauthn.SessionData{Challenge: fmt.Sprintf("%s-%d", client, n)}}, at)
	}
	if !put("a", 1, now) || !put("a", 2, now) || put("a", 3, now) {
		t.Fatal("one client holds more than perClient ceremonies")
	}
	for i, c := range []string{"b", "b", "c", "c"} {
		if !put(c, i, now) {
			t.Fatalf("ceremony %d of %s refused below the bound", i, c)
		}
	}
	if put("d", 1, now) || s.len() != 6 {
		t.Fatalf("the store grew past max: %d", s.len())
	}
	if s.take("a-1", ceremonyEnroll, now) != nil {
		t.Error("a sign-in taken as a registration")
	}
	if s.take("a-1", ceremonySignIn, now) != nil {
		t.Error("a ceremony survives a take of the wrong kind")
	}
	if c := s.take("a-2", ceremonySignIn, now); c == nil || s.take("a-2", ceremonySignIn, now) != nil {
		t.Error("a ceremony is not taken exactly once")
	}
	// Time up: every ceremony goes, and the bound frees.
	later := now.Add(time.Minute)
	if s.take("b-0", ceremonySignIn, later) != nil {
		t.Error("a ceremony taken after its time")
	}
	if !put("d", 1, later) || s.len() != 1 {
		t.Errorf("expired ceremonies kept: %d", s.len())
	}
}

// Sessions are bounded per name and in all, expire and end.
func TestSessionsBounded(t *testing.T) {
	s := sessions{max: 4, perName: 2, ttl: time.Hour}
	now := time.Unix(1e9, 0)
	t1, _ := s.open("user:a", credential{keyID: "k"}, now)
	t2, _ := s.open("user:a", credential{keyID: "k"}, now.Add(time.Second))
	t3, _ := s.open("user:a", credential{keyID: "k"}, now.Add(2*time.Second))
	if s.get(t1, now.Add(3*time.Second)) != nil || s.get(t2, now.Add(3*time.Second)) == nil || s.get(t3, now.Add(3*time.Second)) == nil {
		t.Fatal("a third session of one name does not end its oldest")
	}
	b, _ := s.open("user:b", credential{}, now.Add(3*time.Second))
	s.open("user:c", credential{}, now.Add(4*time.Second))
	if s.len() != 4 {
		t.Fatalf("%d sessions", s.len())
	}
	s.open("user:d", credential{}, now.Add(5*time.Second))
	if s.len() != 4 || s.get(t2, now.Add(5*time.Second)) != nil {
		t.Fatalf("past max, the session closest to its expiry does not end: %d", s.len())
	}
	if s.get(b, now.Add(3*time.Second+time.Hour)) != nil {
		t.Error("a session outlives its expiry")
	}
	s.end(t3)
	if s.get(t3, now) != nil || s.get("", now) != nil {
		t.Error("an ended session is still there")
	}
}

// The session cookie's path is the console as the browser sees it, also
// for a log's server mounted under /logs/NAME/.
func TestCookiePath(t *testing.T) {
	var got string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = cookiePath(r) })
	for _, c := range []struct {
		mount http.Handler
		uri   string
		want  string
	}{
		{h, "/console/session/finish", "/console/"},
		{http.StripPrefix("/logs/a", h), "/logs/a/console/session/finish?x=1", "/logs/a/console/"},
		{http.StripPrefix("/logs/default", h), "/logs/default/console/session", "/logs/default/console/"},
	} {
		got = ""
		c.mount.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", c.uri, nil))
		if got != c.want {
			t.Errorf("%s: cookie path %q, want %q", c.uri, got, c.want)
		}
	}
}
