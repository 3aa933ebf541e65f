package scope

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/canon"
)

// TestKnownAnswers reproduces the scope hashes of
// ../shared/vectors/known-answers.json, computed apart from the project.
func TestKnownAnswers(t *testing.T) {
	var ka struct {
		Envelope  canon.RawJSON `json:"envelope"`
		Note      string        `json:"note"`
		ScopeHash []hashVector  `json:"scope_hash"`
	}
	readJSON(t, &ka, "known-answers.json")
	if len(ka.ScopeHash) != 3 {
		t.Fatalf("known answers hold %d scope hashes, want 3", len(ka.ScopeHash))
	}
	for _, v := range ka.ScopeHash {
		got, err := v.Descriptor.Hash()
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		if got != v.ScopeHash {
			t.Errorf("%s: scope hash %s, want %s", v.Name, got, v.ScopeHash)
		}
	}
}

// TestHashVectors checks testdata/scope/hashes.json (made by gen_hashes.py
// with Python's json and hashlib): the stored JCS bytes hash to the stored
// hash, and the Go descriptor marshals to those bytes and hashes the same.
func TestHashVectors(t *testing.T) {
	var f struct {
		Note    string       `json:"note"`
		Vectors []hashVector `json:"vectors"`
	}
	readJSON(t, &f, "scope", "hashes.json")
	if len(f.Vectors) < 8 {
		t.Fatalf("%d vectors, want at least 8", len(f.Vectors))
	}
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			sum := sha256.Sum256([]byte(HashPrefix + v.JCS))
			if got := hex.EncodeToString(sum[:]); got != v.ScopeHash {
				t.Fatalf("vector file is inconsistent: SHA-256 of prefix||jcs is %s, file says %s", got, v.ScopeHash)
			}
			b, err := canon.Marshal(v.Descriptor)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != v.JCS {
				t.Errorf("JCS\n got %s\nwant %s", b, v.JCS)
			}
			got, err := v.Descriptor.Hash()
			if err != nil {
				t.Fatal(err)
			}
			if got != v.ScopeHash {
				t.Errorf("hash %s, want %s", got, v.ScopeHash)
			}
			d, err := ParseDigest(got)
			if err != nil || d.String() != got {
				t.Errorf("ParseDigest(%s) = %v, %v", got, d, err)
			}
		})
	}
}

// TestDeriveSeed derives the seed CONFIRM's descriptor from its statement
// fields and gets the known-answer hash.
func TestDeriveSeed(t *testing.T) {
	s := Scope{
		Capabilities: []string{"purchase", "submit_form"},
		StepIDs:      []string{"step_2", "step_3"},
		Targets:      []string{"airline_portal/account_123"},
		WorkflowID:   "wf_9f3a",
	}
	limits := map[string]int64{"budget_usd": 800, "max_side_effects": 1}
	ts := time.Date(2026, 3, 19, 8, 12, 0, 0, time.UTC)
	d, err := Derive(s, limits, ts, 900)
	if err != nil {
		t.Fatal(err)
	}
	if d.ExpiresAt != "2026-03-19T08:27:00Z" {
		t.Errorf("expires_at %s", d.ExpiresAt)
	}
	h, err := d.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if want := "621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358"; h != want {
		t.Errorf("hash %s, want %s", h, want)
	}
	// The descriptor shares no memory with the statement's fields.
	s.Targets[0], limits["budget_usd"] = "changed", 1
	if h2, _ := d.Hash(); h2 != h {
		t.Error("Derive aliases its inputs")
	}
	// The same instant in another zone derives the same descriptor.
	d2, err := Derive(s, nil, ts.In(time.FixedZone("X", 3600)), 60)
	if err != nil || d2.ExpiresAt != "2026-03-19T08:13:00Z" || d2.Limits != nil {
		t.Errorf("zoned timestamp: %+v, %v", d2, err)
	}
}

func TestDeriveRejects(t *testing.T) {
	ok := Scope{Capabilities: []string{"a"}, Targets: []string{"b"}, WorkflowID: "wf"}
	ts := time.Date(2026, 3, 19, 8, 12, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    Scope
		ts   time.Time
		ttl  int64
		msg  string
	}{
		{"fractional timestamp", ok, ts.Add(time.Millisecond), 1, "fractional"},
		{"zero ttl", ok, ts, 0, "below 1"},
		{"negative ttl", ok, ts, -5, "below 1"},
		{"huge ttl", ok, ts, 1 << 62, "outside years"},
		{"max ttl overflows", ok, ts, 1<<63 - 1, "overflows"},
		{"missing targets", Scope{Capabilities: []string{"a"}, WorkflowID: "wf"}, ts, 1, "targets is required"},
		{"empty step_ids", Scope{Capabilities: []string{"a"}, Targets: []string{"b"}, StepIDs: []string{}, WorkflowID: "wf"}, ts, 1, "empty array"},
		{"bad workflow", Scope{Capabilities: []string{"a"}, Targets: []string{"b"}, WorkflowID: ""}, ts, 1, "workflow_id"},
	} {
		_, err := Derive(tc.s, nil, tc.ts, tc.ttl)
		if CodeOf(err) != CodeNonCanonical || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want non_canonical containing %q", tc.name, err, tc.msg)
		}
	}
}

func TestHashRejectsNonCanonical(t *testing.T) {
	d := Descriptor{Capabilities: []string{"b", "a"}, ExpiresAt: "2026-03-19T08:27:00Z", Targets: []string{"t"}, WorkflowID: "wf"}
	if _, err := d.Hash(); CodeOf(err) != CodeNonCanonical {
		t.Errorf("hash of unsorted descriptor: %v", err)
	}
}

func TestParseDigest(t *testing.T) {
	good := "621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358"
	if _, err := ParseDigest(good); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", good[:63], good + "0", strings.ToUpper(good), "g" + good[1:]} {
		if _, err := ParseDigest(s); CodeOf(err) != CodeNonCanonical {
			t.Errorf("ParseDigest(%q) = %v", s, err)
		}
	}
}

func TestParseTime(t *testing.T) {
	for s, ok := range map[string]bool{
		"2026-03-19T08:27:00Z":      true,
		"0000-01-01T00:00:00Z":      true,
		"9999-12-31T23:59:59Z":      true,
		"2026-03-19T08:27:00.000Z":  false,
		"2026-03-19T08:27:00+00:00": false,
		"2026-03-19t08:27:00z":      false,
		"2026-03-19 08:27:00Z":      false,
		"2026-3-19T08:27:00Z":       false,
		"2026-02-30T08:27:00Z":      false,
		"2026-12-31T23:59:60Z":      false,
		"":                          false,
	} {
		if _, err := ParseTime(s); (err == nil) != ok {
			t.Errorf("ParseTime(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}

func TestParseDescriptor(t *testing.T) {
	d, err := ParseDescriptor([]byte(`{"workflow_id":"wf_research","targets":["kg/research/*"],
		"expires_at":"2026-11-22T00:00:00Z","capabilities":["*"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := d.Hash(); h != "f339db00289b6559091e29a3fddd991b9e1b67b2807a05aa7d7c676d3a47fb4e" {
		t.Errorf("hash %s", h)
	}
	for _, bad := range []string{
		`{"workflow_id":"wf","targets":["a"],"expires_at":"2026-11-22T00:00:00Z","capabilities":["*"],"extra":1}`,
		`{"workflow_id":"wf","targets":["b","a"],"expires_at":"2026-11-22T00:00:00Z","capabilities":["*"]}`,
		`{"workflow_id":"wf","targets":["a"],"expires_at":"2026-11-22T00:00:00Z"}`,
	} {
		if _, err := ParseDescriptor([]byte(bad)); err == nil {
			t.Errorf("ParseDescriptor(%s) accepted", bad)
		}
	}
}

// TestKnownAnswerEnvelope reads the scope object and limits of the known
// CONFIRM payload, derives its descriptor and gets the scope_hash it carries.
func TestKnownAnswerEnvelope(t *testing.T) {
	var ka struct {
		Envelope struct {
			CanonicalPayload string        `json:"canonical_payload"`
			Rest             canon.RawJSON `json:"envelope"`
			GranteeSeed      string        `json:"grantee_seed_hex"`
			KeyID            string        `json:"key_id"`
			Name             string        `json:"name"`
			PAE              string        `json:"pae_hex"`
			Seed             string        `json:"private_key_seed_hex"`
			PublicKey        string        `json:"public_key_base64"`
		} `json:"envelope"`
		Note      string        `json:"note"`
		ScopeHash canon.RawJSON `json:"scope_hash"`
	}
	readJSON(t, &ka, "known-answers.json")
	var confirm struct {
		Actor      string           `json:"actor"`
		ConfirmID  string           `json:"confirm_id"`
		Grantee    canon.RawJSON    `json:"grantee"`
		Limits     map[string]int64 `json:"limits,omitempty"`
		Log        string           `json:"log"`
		Revocable  bool             `json:"revocable"`
		RiskLevel  string           `json:"risk_level"`
		Scope      Scope            `json:"scope"`
		ScopeHash  string           `json:"scope_hash"`
		Seq        int64            `json:"seq"`
		Timestamp  string           `json:"timestamp"`
		TTLSeconds int64            `json:"ttl_seconds"`
		Type       string           `json:"type"`
	}
	if err := canon.Unmarshal([]byte(ka.Envelope.CanonicalPayload), &confirm); err != nil {
		t.Fatal(err)
	}
	if err := confirm.Scope.Validate(); err != nil {
		t.Fatal(err)
	}
	ts, err := ParseTime(confirm.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Derive(confirm.Scope, confirm.Limits, ts, confirm.TTLSeconds)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := d.Hash(); h != confirm.ScopeHash {
		t.Errorf("derived scope hash %s, payload carries %s", h, confirm.ScopeHash)
	}
}
