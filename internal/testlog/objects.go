package testlog

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Obj is a statement under construction as a JSON object, for tests that
// write statements field by field (the authority tests and the
// adversarial corpus), including fields no Go type would let them write.
type Obj = map[string]any

// ZeroHash is the scope_hash GrantHash gives a grant it cannot compute.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// GrantHash computes a grant object's scope_hash from its scope, limits,
// timestamp and ttl_seconds, or returns ZeroHash if it has none.
func GrantHash(o Obj) string {
	b, err := json.Marshal(o)
	if err != nil {
		return ZeroHash
	}
	var g struct {
		statement.Grant
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return ZeroHash
	}
	ts, err := statement.ParseTimestamp(g.Timestamp)
	if err != nil {
		return ZeroHash
	}
	d, err := scope.DeriveRules(g.Scope, g.Limits, g.Approvals, ts, g.TTLSeconds)
	if err != nil {
		return ZeroHash
	}
	h, err := d.Hash()
	if err != nil {
		return ZeroHash
	}
	return h
}

// SetDefault sets o[k] to v unless o has k.
func SetDefault(o Obj, k string, v any) {
	if _, ok := o[k]; !ok {
		o[k] = v
	}
}

// Str is v if it is a string, else "".
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// DeepCopy copies a JSON-like value: objects, arrays and string slices are
// copied all the way down.
func DeepCopy(x any) any {
	switch t := x.(type) {
	case map[string]any:
		out := make(Obj, len(t))
		for k, v := range t {
			out[k] = DeepCopy(v)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = DeepCopy(v)
		}
		return out
	case []string:
		return slices.Clone(t)
	}
	return x
}

// SeedKey derives a private key from a domain and a handle: its Ed25519
// seed is SHA-256(domain || 0x00 || handle).
func SeedKey(domain, handle string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(domain + "\x00" + handle))
	return ed25519.NewKeyFromSeed(seed[:])
}

// Key is a deterministic key named by a handle, with the forms statements
// and envelopes use.
type Key struct {
	Handle string
	Pub    ed25519.PublicKey
	Priv   ed25519.PrivateKey
	KID    string // sign.KeyID
	B64    string // sign.EncodePublicKey
}

var (
	keyMu    sync.Mutex
	keyCache = map[[2]string]*Key{}
)

// KeyFor returns the key of a handle in a domain, derived by SeedKey and
// remembered: the same handle is the same *Key.
func KeyFor(domain, handle string) *Key {
	keyMu.Lock()
	defer keyMu.Unlock()
	if k, ok := keyCache[[2]string{domain, handle}]; ok {
		return k
	}
	priv := SeedKey(domain, handle)
	pub := priv.Public().(ed25519.PublicKey)
	k := &Key{Handle: handle, Pub: pub, Priv: priv, KID: sign.KeyID(pub), B64: sign.EncodePublicKey(pub)}
	keyCache[[2]string{domain, handle}] = k
	return k
}
