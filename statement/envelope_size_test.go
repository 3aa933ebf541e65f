package statement

import (
	"strings"
	"testing"
)

// TestDenialEnvelopeSize: envelope_size says how long a left-out envelope
// was; it is a positive integer, and never given beside the envelope. The
// hand-written decoder and the reference agree on each.
func TestDenialEnvelopeSize(t *testing.T) {
	const shell = `{"actor":"example.com/custody","denial_id":"denial:5",%s"envelope_sha256":"ed3ff6059302b83b4cdcbbaada1e9576e3cb10c5c50b8495baaeabd98e444545",%s"log":"example.com/custody","reason":"too big","reason_code":"limit_exceeded","seq":1,"signer_keyid":"1325b850c2871916eae203f0efc3c8987f64e5e3cdb27679e6d1fa97808357e6","statement_type":"RECEIPT","timestamp":"2026-03-19T08:12:30Z","type":"DENIAL"}`
	env := `"envelope":{"payload":"e30=","payloadType":"application/vnd.custody.receipt.v1+json","signatures":[{"keyid":"1325b850c2871916eae203f0efc3c8987f64e5e3cdb27679e6d1fa97808357e6","sig":"AAAA"}]},`
	build := func(envelope, size string) []byte {
		return []byte(strings.Replace(strings.Replace(shell, "%s", envelope, 1), "%s", size, 1))
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		ok      bool
	}{
		{"size alone", build("", `"envelope_size":60000,`), true},
		{"envelope alone", build(env, ""), true},
		{"neither (read; the replay rejects it)", build("", ""), true},
		{"both", build(env, `"envelope_size":60000,`), false},
		{"negative", build("", `"envelope_size":-1,`), false},
		{"zero", build("", `"envelope_size":0,`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFastParse(t, Denial, tc.payload)
			st, err := Parse(Denial, tc.payload)
			if (err == nil) != tc.ok {
				t.Fatalf("Parse: %v, want ok=%v", err, tc.ok)
			}
			if err == nil && strings.Contains(string(tc.payload), "60000") && st.(*DenialDoc).EnvelopeSize != 60000 {
				t.Errorf("envelope_size read as %d", st.(*DenialDoc).EnvelopeSize)
			}
		})
	}
}
