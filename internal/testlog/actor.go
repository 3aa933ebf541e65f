package testlog

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// T0 is the time every clock starts at unless told otherwise: the instant
// of DESIGN §3's example.
var T0 = time.Date(2026, 3, 19, 8, 12, 0, 0, time.UTC)

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time // guarded by mu
}

// NewClock returns a clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Set sets the clock's time.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// Actor is a named key and the seq of the last statement it signed.
type Actor struct {
	Name string
	Pub  ed25519.PublicKey
	Priv ed25519.PrivateKey
	// Seq is the seq of the last statement the log accepted from this key;
	// Author.Header takes the next one.
	Seq uint64
}

// NewActor returns an actor whose key is derived from its name.
func NewActor(name string) *Actor { return NewActorSeed(name, "") }

// NewActorSeed returns an actor whose key is derived from its name and
// seed, for logs that must not share keys.
func NewActorSeed(name, seed string) *Actor {
	s := sha256.Sum256([]byte("custody/testlog\x00" + seed + "\x00" + name))
	priv := ed25519.NewKeyFromSeed(s[:])
	return &Actor{Name: name, Pub: priv.Public().(ed25519.PublicKey), Priv: priv}
}

// KeyID is the key's id (DESIGN §1).
func (a *Actor) KeyID() string { return sign.KeyID(a.Pub) }

// PublicKey is the key as a statement carries it: base64 of the raw key.
func (a *Actor) PublicKey() string { return sign.EncodePublicKey(a.Pub) }

// Grantee names the actor as the grantee of a grant.
func (a *Actor) Grantee() statement.Grantee {
	return statement.Grantee{Name: a.Name, PublicKey: a.PublicKey()}
}

// Sign signs st, unchanged, and returns its envelope and canonical bytes.
func (a *Actor) Sign(st statement.Statement) (sign.Envelope, []byte, error) {
	return statement.Sign(a.Priv, st)
}

// NoteSigner returns a signed-note signer over the actor's key with the
// given key name (a log's origin).
func (a *Actor) NoteSigner(name string) note.Signer {
	s, err := merkle.NewSigner(name, a.Priv)
	if err != nil {
		panic(err) // names come from tests
	}
	return s
}

// VerifierKey returns the signed-note verifier key of the actor's key
// under the given key name.
func (a *Actor) VerifierKey(name string) string {
	vk, err := merkle.VerifierKey(name, a.Pub)
	if err != nil {
		panic(err)
	}
	return vk
}
