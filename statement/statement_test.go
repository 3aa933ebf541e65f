package statement

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/sign"
)

type payloadCase struct {
	Name    string `json:"name"`
	Kind    Kind   `json:"kind"`
	Payload string `json:"payload"`
	Want    string `json:"want"`
	Path    string `json:"path"`
}

func TestPayloadVectors(t *testing.T) {
	raw, err := os.ReadFile("../testdata/statement/payloads.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []payloadCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	seen := map[Kind]bool{}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			st, err := Parse(c.Kind, []byte(c.Payload))
			if c.Want == "ok" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				seen[c.Kind] = true
				// A parsed statement re-encodes to the same bytes.
				out, err := Marshal(st)
				if err != nil || string(out) != c.Payload {
					t.Fatalf("re-encoded as %s (%v)", out, err)
				}
				if st.Head().Type != c.Kind || st.ID() == "" {
					t.Fatalf("type %s id %q", st.Head().Type, st.ID())
				}
				return
			}
			var ce *canon.Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want %s at %q", err, c.Want, c.Path)
			}
			if ce.Code != c.Want || (c.Path != "" && ce.Path != c.Path) {
				t.Fatalf("got %s at %q (%v), want %s at %q", ce.Code, ce.Path, err, c.Want, c.Path)
			}
		})
	}
	for _, k := range Kinds {
		if !seen[k] {
			t.Errorf("no valid vector for %s", k)
		}
	}
}

// TestKnownAnswerConfirm: the known-answer payload parses as a CONFIRM,
// re-encodes byte for byte, its scope_hash is what Seal computes, and
// Sign with the known key reproduces the known envelope.
func TestKnownAnswerConfirm(t *testing.T) {
	raw, err := os.ReadFile("../testdata/known-answers.json")
	if err != nil {
		t.Fatal(err)
	}
	var ka struct {
		Envelope struct {
			CanonicalPayload string          `json:"canonical_payload"`
			Envelope         json.RawMessage `json:"envelope"`
			Seed             string          `json:"private_key_seed_hex"`
		} `json:"envelope"`
	}
	if err := json.Unmarshal(raw, &ka); err != nil {
		t.Fatal(err)
	}
	st, err := Parse(Confirm, []byte(ka.Envelope.CanonicalPayload))
	if err != nil {
		t.Fatal(err)
	}
	c := st.(*ConfirmDoc)
	want := c.ScopeHash
	c.ScopeHash = ""
	if err := Seal(c); err != nil || c.ScopeHash != want {
		t.Fatalf("Seal gave %s (%v), want %s", c.ScopeHash, err, want)
	}
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	priv := ed25519NewKeyFromSeed(seed)
	_, envBytes, err := Sign(priv, c)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv, err := canon.Canonicalize(ka.Envelope.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	if string(envBytes) != string(wantEnv) {
		t.Fatalf("envelope\n%s\nwant\n%s", envBytes, wantEnv)
	}
	if _, err := sign.ParseEnvelope(envBytes); err != nil {
		t.Fatal(err)
	}
}

func TestLeafRoundTrip(t *testing.T) {
	prev := uint64(0)
	l := &Leaf{Envelope: canon.RawJSON(`{"payload":"e30=","payloadType":"x","signatures":[{"keyid":"a","sig":"b"}]}`),
		LoggedAt: "2026-03-19T08:12:00.123Z", PrevInWorkflow: &prev, TrustHead: 3}
	b, err := MarshalLeaf(l)
	if err != nil {
		t.Fatal(err)
	}
	back, at, err := ParseLeaf(b)
	if err != nil || *back.PrevInWorkflow != 0 || back.TrustHead != 3 || at.Nanosecond() != 123_000_000 {
		t.Fatalf("%+v %v %v", back, at, err)
	}
	for _, bad := range []string{"2026-03-19T08:12:00.120Z", "2026-03-19T09:12:00+01:00", "2026-03-19T08:12:00"} {
		if _, err := ParseLoggedAt(bad); err == nil {
			t.Errorf("logged_at %q accepted", bad)
		}
	}
}

// FuzzParseStatement: no payload of any kind makes Parse panic, and what
// it accepts re-encodes to the same bytes.
func FuzzParseStatement(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, kind uint8, payload []byte) {
		k := Kinds[int(kind)%len(Kinds)]
		st, err := Parse(k, payload)
		if err != nil {
			return
		}
		out, err := Marshal(st)
		if err != nil || string(out) != string(payload) {
			t.Fatalf("accepted %q but re-encoded %q (%v)", payload, out, err)
		}
	})
}
