package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
)

// Ceremonies in progress: a WebAuthn registration or sign-in begun and
// not finished. Each is the challenge the server handed out and what it
// must check the answer against (go-webauthn's SessionData), held until
// it is finished (once: finishing takes it) or its time is up. The store
// is bounded in count, overall and per client address, and in time, so
// no client can grow it, and one client cannot fill it for the others:
// past a bound a new ceremony is refused (503) until one ends.
type ceremonies struct {
	max, perClient int
	ttl            time.Duration

	mu       sync.Mutex
	byID     map[string]*ceremony // guarded by mu; keyed by the challenge
	byClient map[string]int       // guarded by mu
}

type ceremony struct {
	kind    string // ceremonyEnroll or ceremonySignIn
	name    string // the principal name typed
	client  string
	expires time.Time
	session webauthn.SessionData
}

const (
	ceremonyEnroll = "enroll"
	ceremonySignIn = "sign-in"
)

// put stores c under its challenge; it reports false when a bound is
// reached (after dropping the ceremonies whose time is up).
func (s *ceremonies) put(c *ceremony, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID, s.byClient = map[string]*ceremony{}, map[string]int{}
	}
	s.expire(now) // at most max ceremonies to look at
	if len(s.byID) >= s.max || s.byClient[c.client] >= s.perClient {
		return false
	}
	c.expires = now.Add(s.ttl)
	s.byID[c.session.Challenge] = c
	s.byClient[c.client]++
	return true
}

// take removes the ceremony of challenge and returns it if it is of
// kind and its time is not up.
func (s *ceremonies) take(challenge, kind string, now time.Time) *ceremony {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.byID[challenge]
	if c == nil {
		return nil
	}
	s.drop(challenge, c) // once, whatever the answer
	if c.kind != kind || !now.Before(c.expires) {
		return nil
	}
	return c
}

func (s *ceremonies) expire(now time.Time) {
	for id, c := range s.byID {
		if !now.Before(c.expires) {
			s.drop(id, c)
		}
	}
}

func (s *ceremonies) drop(id string, c *ceremony) {
	delete(s.byID, id)
	if s.byClient[c.client]--; s.byClient[c.client] <= 0 {
		delete(s.byClient, c.client)
	}
}

func (s *ceremonies) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// Sessions: who signed in on this console. A session is a random token
// in the browser's cookie and, here, its SHA-256 with the principal name
// and passkey it signed in with and its expiry. It authorises nothing (a
// state change is always a statement a passkey signs); it only says
// whose approvals the page shows and which passkey it asks to sign.
// Bounded: at most perName sessions per principal name (a new sign-in
// ends that name's oldest) and max in all (a new sign-in ends the one
// closest to its expiry); only a sign-in with an enrolled passkey makes
// one.
type sessions struct {
	max, perName int
	ttl          time.Duration

	mu   sync.Mutex
	byID map[[32]byte]*session // guarded by mu
}

type session struct {
	name    string
	cred    credential
	created time.Time
	expires time.Time
}

// open makes a session for name and returns its token.
func (s *sessions) open(name string, cred credential, now time.Time) (token string, sess *session) {
	var raw [32]byte
	rand.Read(raw[:])
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	sess = &session{name: name, cred: cred, created: now, expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[[32]byte]*session{}
	}
	var mine int
	var oldestMine, soonest [32]byte
	var haveMine, haveAny bool
	for id, o := range s.byID {
		if !now.Before(o.expires) {
			delete(s.byID, id)
			continue
		}
		if o.name == name {
			mine++
			if !haveMine || o.created.Before(s.byID[oldestMine].created) {
				oldestMine, haveMine = id, true
			}
		}
		if !haveAny || o.expires.Before(s.byID[soonest].expires) {
			soonest, haveAny = id, true
		}
	}
	if mine >= s.perName {
		delete(s.byID, oldestMine)
	} else if len(s.byID) >= s.max {
		delete(s.byID, soonest)
	}
	s.byID[sha256.Sum256([]byte(token))] = sess
	return token, sess
}

// get returns the live session of token, or nil.
func (s *sessions) get(token string, now time.Time) *session {
	if token == "" {
		return nil
	}
	id := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.byID[id]
	if o == nil {
		return nil
	}
	if !now.Before(o.expires) {
		delete(s.byID, id)
		return nil
	}
	return o
}

// end ends the session of token.
func (s *sessions) end(token string) {
	id := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
