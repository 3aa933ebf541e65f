package authority_test

import (
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestDenialSizeWith pins the sum a verifier does for a DENIAL that leaves
// its envelope out: from the DENIAL without the envelope it must compute,
// byte for byte, the length of the DENIAL the ledger built with it and
// measured. Every payload length modulo 3 is covered, since base64 pads.
func TestDenialSizeWith(t *testing.T) {
	h := newHarness(t)
	h.genesis(nil)
	alice := keyFor("alice")
	for _, n := range []int{1, 2, 3, 100, 1001, 1002, 1003, 40000, 48000, 48001, 48002, 48003} {
		payload := []byte(`{"receipt_id":"r` + strings.Repeat("x", n) + `","workflow_id":"wf"}`)
		env, err := sign.Sign(alice.Priv, "receipt", payload)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sign.ParseEnvelopeValue(env)
		if err != nil {
			t.Fatal(err)
		}
		d := &authority.Decision{Verdict: authority.Denied, Kind: statement.Receipt, Code: authority.SchemaInvalid,
			Reason: "RECEIPT: " + strings.Repeat("é", n%7), SignerKey: p.KeyID}
		signed := func(with bool) (*statement.DenialDoc, sign.Envelope, int, []byte) {
			doc := h.e.Denial(d, p, h.index, h.now, with)
			pl, err := statement.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			denv, err := sign.Sign(h.logKey.Priv, "denial", pl)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := denv.Canonical()
			return doc, denv, len(pl), c
		}
		_, _, _, withEnv := signed(true)
		doc, denv, plen, _ := signed(false)
		canonInner, _ := env.Canonical()
		if doc.EnvelopeSize != int64(len(canonInner)) {
			t.Fatalf("n=%d: envelope_size %d, the envelope is %d bytes", n, doc.EnvelopeSize, len(canonInner))
		}
		got, err := authority.DenialSizeWith(doc, denv, plen)
		if err != nil {
			t.Fatal(err)
		}
		if got != int64(len(withEnv)) {
			t.Errorf("n=%d: DenialSizeWith = %d, the DENIAL with its envelope is %d bytes", n, got, len(withEnv))
		}
	}
}
