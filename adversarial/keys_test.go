package adversarial_test

import (
	"crypto/ed25519"
	"encoding/base64"

	"github.com/custodylog/custody/internal/testlog"
)

// symKey is a deterministic key named by a handle.
type symKey = testlog.Key

// keyFor derives the key of a handle: its Ed25519 seed is
// SHA-256("custody/adversarial\x00" || handle).
func keyFor(handle string) *symKey { return testlog.KeyFor("custody/adversarial", handle) }

// specialKeys are public keys no honest key generator produces, as the
// standard base64 of their 32 raw bytes. None may ever be bound
// (DESIGN §1 "Keys"; docs/DECISIONS.md "Keys and envelopes").
var specialKeys = map[string]string{
	// The identity point (y = 1): every signature with S = 0 and
	// R = identity verifies under it with a cofactorless verifier.
	"identity": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	// y = 0, order 4.
	"zero": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	// y = p-1, order 2.
	"order2": "7P///////////////////////////////////////38=",
	// The two order-8 points of libsodium's blocklist.
	"order8":  "JuiVj8KyJ7BFw/SJ8u+Y8NXfrAXTxjM5sTgCiG1T/AU=",
	"order8b": "xxdqcD1N2E+6PAt2DRBnDyogU/osOczGTsf9d5KsA3o=",
	// y = p: a non-canonical spelling of y = 0 (order 4).
	"y_eq_p": "7f///////////////////////////////////////38=",
	// A + T8 where A is keyFor("agent:mixed") and T8 an order-8 point: a
	// point of order 8L, which a cofactored verifier and a cofactorless
	// one disagree about.
	"mixed8": "Pepkmk/TDIDlzRhVAehLxPRqax7tQufZtIVcudbcl/g=",
}

func specialKey(name string) (ed25519.PublicKey, bool) {
	s, ok := specialKeys[name]
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return ed25519.PublicKey(b), true
}
