package canon

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
)

type vector struct {
	Name      string `json:"name"`
	Input     string `json:"input"`
	InputHex  string `json:"input_hex"`
	Mode      string `json:"mode"`
	Want      string `json:"want"`
	Canonical string `json:"canonical"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile("../testdata/canon/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []vector `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 30 {
		t.Fatalf("only %d vectors", len(f.Cases))
	}
	return f.Cases
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			in := []byte(v.Input)
			if v.InputHex != "" {
				var err error
				if in, err = hex.DecodeString(v.InputHex); err != nil {
					t.Fatal(err)
				}
			}
			var (
				val *Value
				err error
			)
			if v.Mode == "strict" {
				val, err = Parse(in)
			} else {
				val, err = ParseRelaxed(in)
			}
			if v.Want == "ok" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				got := string(Encode(val))
				want := v.Input
				if v.Canonical != "" {
					want = v.Canonical
				}
				if got != want {
					t.Fatalf("canonical form %q, want %q", got, want)
				}
				// The canonical form is a fixed point under strict parsing.
				if _, err := Parse([]byte(got)); err != nil {
					t.Fatalf("canonical output rejected by Parse: %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("accepted (or untyped error %v), want %s", err, v.Want)
			}
			if ce.Code != v.Want {
				t.Fatalf("code %s (%v), want %s", ce.Code, err, v.Want)
			}
		})
	}
}

type inner struct {
	Name  string `json:"name"`
	Count int64  `json:"count,omitempty"`
}

type outer struct {
	Type   string           `json:"type"`
	Seq    uint64           `json:"seq"`
	Flag   bool             `json:"flag"`
	Items  []string         `json:"items,omitempty"`
	Limits map[string]int64 `json:"limits,omitempty"`
	In     inner            `json:"in"`
	Opt    *uint64          `json:"opt,omitempty"`
	Raw    RawJSON          `json:"raw,omitempty"`
}

func TestUnmarshalClosedSchema(t *testing.T) {
	cases := []struct {
		name, in, code, path string
	}{
		{"ok", `{"flag":false,"in":{"name":"x"},"seq":1,"type":"T"}`, "", ""},
		{"unknown field", `{"extra":1,"flag":false,"in":{"name":"x"},"seq":1,"type":"T"}`, CodeSchemaInvalid, "extra"},
		{"case variant of a field", `{"Type":"T","flag":false,"in":{"name":"x"},"seq":1}`, CodeSchemaInvalid, "Type"},
		{"missing required", `{"flag":false,"in":{"name":"x"},"type":"T"}`, CodeSchemaInvalid, "seq"},
		{"missing nested required", `{"flag":false,"in":{"count":2},"seq":1,"type":"T"}`, CodeSchemaInvalid, "in.name"},
		{"wrong type", `{"flag":false,"in":{"name":"x"},"seq":"1","type":"T"}`, CodeSchemaInvalid, "seq"},
		{"negative into unsigned", `{"flag":false,"in":{"name":"x"},"seq":-1,"type":"T"}`, CodeSchemaInvalid, "seq"},
		{"optional zero spelled out", `{"flag":false,"in":{"count":0,"name":"x"},"seq":1,"type":"T"}`, CodeSchemaInvalid, "in.count"},
		{"optional pointer zero is a value", `{"flag":false,"in":{"name":"x"},"opt":0,"seq":1,"type":"T"}`, "", ""},
		{"not canonical", `{"seq":1,"flag":false,"in":{"name":"x"},"type":"T"}`, CodeNonCanonical, ""},
		{"wrong type in array", `{"flag":false,"in":{"name":"x"},"items":["a",2],"seq":1,"type":"T"}`, CodeSchemaInvalid, "items[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o outer
			err := Unmarshal([]byte(c.in), &o)
			if c.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				out, err := Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				if string(out) != c.in {
					t.Fatalf("round trip %s, want %s", out, c.in)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Code != c.code || ce.Path != c.path {
				t.Fatalf("got %#v, want code %s at %q", err, c.code, c.path)
			}
		})
	}
}

func TestMarshal(t *testing.T) {
	one := uint64(0)
	o := outer{Type: "T", Seq: 7, Flag: true, Items: []string{"b", "a"},
		Limits: map[string]int64{"z": 1, "a": 0}, In: inner{Name: "n\u2028<"}, Opt: &one,
		Raw: RawJSON(`{"k":1}`)}
	got, err := Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"flag":true,"in":{"name":"n` + "\u2028" + `<"},"items":["b","a"],"limits":{"a":0,"z":1},"opt":0,"raw":{"k":1},"seq":7,"type":"T"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for name, bad := range map[string]any{
		"empty required slice": struct {
			A []string `json:"a"`
		}{},
		"too big": struct {
			A int64 `json:"a"`
		}{A: MaxSafeInteger + 1},
		"bad utf8": struct {
			A string `json:"a"`
		}{A: "\xff"},
		"untagged": struct{ A string }{A: "x"},
		"empty object": struct {
			A string `json:"a,omitempty"`
		}{},
	} {
		if _, err := Marshal(bad); err == nil {
			t.Errorf("%s: Marshal accepted it", name)
		}
	}
}

func TestErrorNamesPath(t *testing.T) {
	_, err := ParseRelaxed([]byte(`{"scope":{"targets":["a",null]}}`))
	if err == nil || !strings.Contains(err.Error(), "scope.targets[1]") {
		t.Fatalf("error %v does not name scope.targets[1]", err)
	}
}

func FuzzParse(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseRelaxed(data)
		if err != nil {
			return
		}
		c := Encode(v)
		v2, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical output %q of %q rejected: %v", c, data, err)
		}
		if string(Encode(v2)) != string(c) {
			t.Fatalf("canonical form not a fixed point for %q", data)
		}
		// Go's decoder must agree that it is JSON.
		if !json.Valid(c) {
			t.Fatalf("canonical output %q is not valid JSON", c)
		}
	})
}

type header struct {
	Type string `json:"type"`
	Seq  int64  `json:"seq"`
}

type withEmbedded struct {
	header
	ID string `json:"id"`
}

func TestEmbeddedStructsFlatten(t *testing.T) {
	in := `{"id":"x","seq":2,"type":"T"}`
	var w withEmbedded
	if err := Unmarshal([]byte(in), &w); err != nil {
		t.Fatal(err)
	}
	if w.Type != "T" || w.Seq != 2 || w.ID != "x" {
		t.Fatalf("decoded %+v", w)
	}
	out, err := Marshal(w)
	if err != nil || string(out) != in {
		t.Fatalf("Marshal = %s, %v", out, err)
	}
}
