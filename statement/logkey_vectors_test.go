package statement

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/custodylog/custody/canon"
	"golang.org/x/mod/sumdb/note"
)

// The payload vectors of a PRINCIPAL of op log_key (DESIGN §1, version 3:
// rotating the DENIAL-signing key) are made here, by LogKeyRotation, the
// code `custody key rotate-denial` signs with, and checked against both
// copies of the table: testdata/statement/payloads.json (TestPayloadVectors
// parses them) and sdk/typescript/testdata/statement/payloads.json (the
// TypeScript SDK's vectors test parses them and re-encodes the valid one).
// A vector edited by hand, or a change to how Go writes the statement,
// fails TestLogKeyVectorsAreGoMade. CUSTODY_WRITE_VECTORS=1 rewrites the
// log_key cases in both files from this code and leaves every other case
// as it is.

var vectorFiles = []string{
	"../testdata/statement/payloads.json",
	"../sdk/typescript/testdata/statement/payloads.json",
}

// vectorCase is one case of payloads.json, its fields in the file's order.
type vectorCase struct {
	Name    string `json:"name"`
	Kind    Kind   `json:"kind"`
	Want    string `json:"want"`
	Payload string `json:"payload"`
	Path    string `json:"path,omitempty"`
}

type vectorFile struct {
	Note  string       `json:"note"`
	Cases []vectorCase `json:"cases"`
}

const logKeyCasePrefix = "log_key "

// logKeyCases returns the log_key vectors: the statement the admin signs
// to rotate the DENIAL key, and the ways a payload of that op breaks the
// statement rules (schema_invalid naming the field). What the authority
// rules refuse of a well-formed one (a name other than the origin, a key
// already bound: identity_conflict) is decided with the log's state and
// tested in authority (TestRotateDenialKey).
func logKeyCases(t *testing.T) []vectorCase {
	t.Helper()
	seed := bytes.Repeat([]byte{0x4c}, ed25519.SeedSize) // 'L'
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	st := LogKeyRotation(Header{Timestamp: "2026-03-19T09:00:00Z", Log: "example.com/custody", Actor: "admin", Seq: 4}, pub)
	valid, err := Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	// mutate returns the valid payload with field k set to v (deleted for
	// nil), re-encoded canonically so that only the named rule breaks.
	mutate := func(k string, v any) string {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		j, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		c, err := canon.Canonicalize(j)
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	vkey, err := note.NewEd25519VerifierKey("example.com/custody", pub)
	if err != nil {
		t.Fatal(err)
	}
	return []vectorCase{
		{Name: "log_key PRINCIPAL, valid", Kind: Principal, Want: "ok", Payload: string(valid)},
		{Name: "log_key PRINCIPAL with a signed-note verifier key as public_key", Kind: Principal, Want: canon.CodeSchemaInvalid,
			Payload: mutate("public_key", vkey), Path: "public_key"},
		{Name: "log_key PRINCIPAL with a small-order key", Kind: Principal, Want: canon.CodeSchemaInvalid,
			Payload: mutate("public_key", "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), Path: "public_key"},
		{Name: "log_key PRINCIPAL without public_key", Kind: Principal, Want: canon.CodeSchemaInvalid,
			Payload: mutate("public_key", nil), Path: "public_key"},
		{Name: "log_key PRINCIPAL whose name is not an identifier", Kind: Principal, Want: canon.CodeSchemaInvalid,
			Payload: mutate("name", "example.com//custody"), Path: "name"},
		{Name: "log_key PRINCIPAL with the op misspelled", Kind: Principal, Want: canon.CodeSchemaInvalid,
			Payload: mutate("op", "log-key"), Path: "op"},
		{Name: "log_key PRINCIPAL carrying GENESIS's log_key field", Kind: Principal, Want: canon.CodeSchemaInvalid,
			Payload: mutate("log_key", vkey), Path: "log_key"},
	}
}

func TestLogKeyVectorsAreGoMade(t *testing.T) {
	want := logKeyCases(t)
	for _, file := range vectorFiles {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f vectorFile
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if os.Getenv("CUSTODY_WRITE_VECTORS") == "1" {
			kept := f.Cases[:0]
			for _, c := range f.Cases {
				if !strings.HasPrefix(c.Name, logKeyCasePrefix) {
					kept = append(kept, c)
				}
			}
			f.Cases = append(kept, want...)
			out, err := json.MarshalIndent(f, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, out, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var got []vectorCase
		for _, c := range f.Cases {
			if strings.HasPrefix(c.Name, logKeyCasePrefix) {
				got = append(got, c)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s holds %d log_key cases, the Go code makes %d (CUSTODY_WRITE_VECTORS=1 go test -run TestLogKeyVectorsAreGoMade ./statement rewrites them)", file, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: case %q is\n%+v\nthe Go code makes\n%+v", file, got[i].Name, got[i], want[i])
			}
		}
	}
}
