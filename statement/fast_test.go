package statement

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/sign"
)

// checkFastParse is the differential check behind FuzzFastParse: Parse
// (hand-written decoders first) and parseReflect (the reference) must
// accept and reject the same payloads, with equal statements and errors
// of the same type, code, path and message. It reports whether the fast
// decoder took the payload.
func checkFastParse(t *testing.T, k Kind, payload []byte) bool {
	t.Helper()
	fast := decodeFast(k, payload)
	got, gotErr := Parse(k, payload)
	want, wantErr := parseReflect(k, payload)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s %q: Parse error %v, reference error %v", k, payload, gotErr, wantErr)
	}
	if wantErr != nil {
		var ge, we *canon.Error
		if !errors.As(gotErr, &ge) || !errors.As(wantErr, &we) || *ge != *we {
			t.Fatalf("%s %q: Parse error %#v, reference error %#v", k, payload, gotErr, wantErr)
		}
		return fast != nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %q: Parse read\n%#v\nreference read\n%#v", k, payload, got, want)
	}
	if fast != nil && !reflect.DeepEqual(fast, want) {
		t.Fatalf("%s %q: fast decoder read\n%#v\nreference read\n%#v", k, payload, fast, want)
	}
	return fast != nil
}

// FuzzFastParse: the hand-written statement decoders agree with the
// reflection path on every input, for every kind.
func FuzzFastParse(f *testing.F) {
	fuzzseed.Add(f)
	for _, s := range otherSeeds(f) {
		for i := range Kinds {
			f.Add(uint8(i), s)
		}
	}
	for _, s := range adversarialPayloads(f) {
		f.Add(uint8(indexOfKind(s.kind)), s.payload)
	}
	f.Fuzz(func(t *testing.T, kind uint8, payload []byte) {
		checkFastParse(t, Kinds[int(kind)%len(Kinds)], payload)
		checkFastLeaf(t, kind, payload)
		checkTimestamp(t, string(payload))
	})
}

// TestFastParseTaken: every valid payload of the statement vectors and of
// the adversarial corpus agrees with the reference, and for every kind
// some take the hand-written decoder (so the speed-up cannot silently
// vanish).
func TestFastParseTaken(t *testing.T) {
	raw, err := os.ReadFile("../testdata/statement/payloads.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []payloadCase }
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	taken := map[Kind]int{}
	for _, c := range f.Cases {
		for _, k := range Kinds {
			if checkFastParse(t, k, []byte(c.Payload)) && c.Want == "ok" {
				taken[k]++
			}
		}
	}
	for _, s := range adversarialPayloads(t) {
		checkFastParse(t, s.kind, s.payload)
	}
	for _, k := range Kinds {
		if taken[k] == 0 {
			t.Errorf("no valid %s payload took the hand-written decoder", k)
		}
	}
}

func indexOfKind(k Kind) int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return 0
}

// otherSeeds are the raw documents of the canon, envelope and leaf
// corpora, and the payloads of the envelopes in the leaves.
func otherSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, name := range []string{"FuzzParse", "FuzzParseEnvelope", "FuzzDecodeEntry"} {
		files, _ := filepath.Glob(filepath.Join(fuzzseed.Dir(), name, "*"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				tb.Fatal(err)
			}
			args, err := fuzzseed.Decode(data)
			if err != nil {
				tb.Fatal(err)
			}
			for _, a := range args {
				if b, ok := a.([]byte); ok {
					out = append(out, b)
				}
			}
		}
	}
	for _, b := range out {
		if l, _, err := ParseLeaf(b); err == nil {
			if p, err := sign.ParseEnvelope(l.Envelope); err == nil {
				out = append(out, p.Payload)
			}
		}
	}
	return out
}

type kindPayload struct {
	kind    Kind
	payload []byte
}

// expand fills in the corpus's placeholders with fixed values: the
// payloads need not verify, only exercise the decoders.
func expand(s string) string {
	return fuzzseed.ExpandPlaceholders(s, func(name string) string {
		switch name {
		case "seq", "n":
			return "1"
		case "ts":
			return "2026-03-19T08:12:00Z"
		case "log":
			return "example.com/custody"
		case "hash", "keyid", "rawkeyid":
			return "621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358"
		case "KEYID":
			return "621BB415E7267780004A1086E34284F13FB7F6AB00B623770320CD41E31A3358"
		}
		return "ebVWLo/mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ="
	})
}

// adversarialPayloads turns testdata/adversarial into payloads: each
// step's "set" laid over a valid payload of its kind (from the statement
// vectors), and each payload edit applied to those.
func adversarialPayloads(tb testing.TB) []kindPayload {
	raw, err := os.ReadFile("../testdata/statement/payloads.json")
	if err != nil {
		tb.Fatal(err)
	}
	var vf struct{ Cases []payloadCase }
	if err := json.Unmarshal(raw, &vf); err != nil {
		tb.Fatal(err)
	}
	base := map[Kind]string{}
	for _, c := range vf.Cases {
		if c.Want == "ok" && base[c.Kind] == "" {
			base[c.Kind] = c.Payload
		}
	}
	var out []kindPayload
	for _, data := range fuzzseed.AdversarialCases(tb) {
		var c struct {
			Steps []struct {
				Kind        Kind
				Set         json.RawMessage
				PayloadEdit []struct{ From, To string } `json:"payload_edit"`
			}
		}
		if err := json.Unmarshal(data, &c); err != nil {
			tb.Fatal(err)
		}
		for _, s := range c.Steps {
			b, ok := base[s.Kind]
			if !ok {
				continue
			}
			payload := []byte(b)
			if len(s.Set) > 0 {
				if p, err := overlay(b, expand(string(s.Set))); err == nil {
					payload = p
				}
			}
			out = append(out, kindPayload{s.Kind, payload})
			for _, e := range s.PayloadEdit {
				edited := bytes.Replace(payload, []byte(expand(e.From)), []byte(expand(e.To)), 1)
				out = append(out, kindPayload{s.Kind, edited})
			}
		}
	}
	return out
}

// overlay sets the top-level fields of set over the payload base and
// returns the result in canonical form.
func overlay(base, set string) ([]byte, error) {
	var m, over map[string]any
	for _, x := range []struct {
		s string
		m *map[string]any
	}{{base, &m}, {set, &over}} {
		d := json.NewDecoder(strings.NewReader(x.s))
		d.UseNumber()
		if err := d.Decode(x.m); err != nil {
			return nil, err
		}
	}
	for k, v := range over {
		m[k] = v
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(m); err != nil {
		return nil, err
	}
	c, err := canon.Canonicalize(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("canonicalize: %w", err)
	}
	return c, nil
}

// checkFastLeaf compares MarshalLeaf's hand-written encoder with
// canon.Marshal on a leaf made from the fuzzer's input.
func checkFastLeaf(t *testing.T, kind uint8, payload []byte) {
	t.Helper()
	l := &Leaf{Envelope: payload, LoggedAt: string(payload[:len(payload)/2]), TrustHead: uint64(kind) << 46}
	if kind%2 == 1 {
		prev := uint64(kind) << 45
		l.PrevInWorkflow = &prev
	}
	got, gotOK := appendLeaf(nil, l)
	want, err := canon.Marshal(l)
	if gotOK != (err == nil) || (gotOK && !bytes.Equal(got, want)) {
		t.Fatalf("%#v: appendLeaf %q %v, canon.Marshal %q %v", l, got, gotOK, want, err)
	}
}

// BenchmarkParseReceipt compares Parse (hand-written decoder) with the
// reflection path on a valid pending receipt.
func BenchmarkParseReceipt(b *testing.B) {
	payload := []byte(`{"action":"purchase","actor":"agent:planner/booker","authorization_ref":"d1","log":"example.com/custody","receipt_id":"r1","reserve":{"budget_usd":742,"max_side_effects":0},"result":"pending","scope_hash":"621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358","seq":1,"step_id":"step_3","target":"airline_portal/account_123","timestamp":"2026-03-19T08:12:00Z","type":"RECEIPT","workflow_id":"wf_9f3a"}`)
	for _, c := range []struct {
		name  string
		parse func(Kind, []byte) (Statement, error)
	}{{"fast", Parse}, {"reflect", parseReflect}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.parse(Receipt, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// checkTimestamp compares ParseTimestamp with its reference, time.Parse
// and the round trip through Format.
func checkTimestamp(t *testing.T, s string) {
	t.Helper()
	got, gotErr := ParseTimestamp(s)
	want, err := time.Parse(TimestampLayout, s)
	if err == nil && want.Format(TimestampLayout) != s {
		err = errors.New("not the one spelling")
	}
	if (gotErr == nil) != (err == nil) || (err == nil && (got != want || !reflect.DeepEqual(got, want))) {
		t.Fatalf("ParseTimestamp(%q) = %v, %v; reference %v, %v", s, got, gotErr, want, err)
	}
	if _, ok := parseTimestampFast(s); ok && err != nil {
		t.Fatalf("parseTimestampFast accepted %q", s)
	}
}

// TestTimestampCalendar checks the hand-written timestamp reader against
// time.Parse on every day number 00..32 of every month of years where the
// leap-year rule differs, and on the edges of each time field.
func TestTimestampCalendar(t *testing.T) {
	for _, y := range []int{0, 1, 4, 100, 400, 1900, 1999, 2000, 2024, 2026, 2100, 9999} {
		for m := 0; m <= 13; m++ {
			for d := 0; d <= 32; d++ {
				checkTimestamp(t, fmt.Sprintf("%04d-%02d-%02dT08:12:00Z", y, m, d))
			}
		}
	}
	for _, s := range []string{"2026-03-19T23:59:59Z", "2026-03-19T24:00:00Z", "2026-03-19T00:60:00Z", "2026-03-19T00:00:60Z",
		"2026-03-19T08:12:00z", "2026-03-19 08:12:00Z", "2026-03-19T08:12:00+00:00", "+026-03-19T08:12:00Z", "2026-03-1aT08:12:00Z",
		"2026-03-19T08:12:0 Z", "2026-03-19T08:12:00.0Z", "２026-03-19T08:12:00Z"} {
		checkTimestamp(t, s)
	}
}
