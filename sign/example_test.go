package sign_test

import (
	"crypto/ed25519"
	"fmt"

	"github.com/custodylog/custody/sign"
)

// A statement is signed, stored canonically, and checked as the ledger does:
// shape first (step 1), then the signature under the key its keyid names
// (step 2), then the statement is parsed from exactly p.Payload.
func Example() {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)

	env, err := sign.Sign(priv, "stop", []byte(`{"type":"STOP"}`))
	if err != nil {
		panic(err)
	}
	stored, _ := env.Canonical()

	p, err := sign.ParseEnvelope(stored)
	if err != nil {
		panic(err) // refused, not logged
	}
	if err := p.Verify(pub); err != nil {
		panic(err) // refused, not logged
	}
	fmt.Println(p.Kind, p.KeyID == sign.KeyID(pub), string(p.Payload))
	fmt.Println(env.PayloadType)
	// Output:
	// stop true {"type":"STOP"}
	// application/vnd.custody.stop.v1+json
}

func ExamplePAE() {
	fmt.Printf("%q\n", sign.PAE("application/vnd.custody.stop.v1+json", []byte(`{}`)))
	// Output: "DSSEv1 36 application/vnd.custody.stop.v1+json 2 {}"
}
