package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestBatchWrapperStrict: the batch wrapper is exactly
// {"envelopes":[...]}: an unknown member, a member spelled in another
// case, "envelopes" twice, or data after the object is refused with 400
// naming what is wrong, before any envelope is decided; the plain wrapper
// still reaches the ledger (an envelope it cannot parse is answered inside
// the batch).
func TestBatchWrapperStrict(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	post := func(body string) (int, string) {
		r, err := http.Post(lg.URL+"/v1/entries/batch", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	env := `{"payload":"e30=","payloadType":"x","signatures":[]}`
	for body, want := range map[string]string{
		`{"envelopes":[` + env + `],"note":"x"}`:                `unknown member \"note\"`,
		`{"Envelopes":[` + env + `]}`:                           `unknown member \"Envelopes\"`,
		`{"envelopes":[` + env + `],"envelopes":[` + env + `]}`: `given twice`,
		`{"envelopes":[` + env + `]} {}`:                        `data after the batch object`,
		`{}`:                                                    `no member`,
		`[` + env + `]`:                                         `is a JSON object`,
	} {
		code, got := post(body)
		if code != http.StatusBadRequest || !strings.Contains(got, want) {
			t.Errorf("%s: %d %s (want 400 naming %s)", body, code, got, want)
		}
	}
	code, got := post(`{"envelopes":[` + env + `]}`)
	var resp struct {
		Answers []json.RawMessage `json:"answers"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(got), &resp) != nil || len(resp.Answers) != 1 {
		t.Errorf("the plain wrapper: %d %s", code, got)
	}
	before := lg.Ledger.Head().Size
	post(`{"envelopes":[` + env + `],"envelopes":[` + env + `]}`)
	if after := lg.Ledger.Head().Size; after != before {
		t.Errorf("a refused wrapper logged %d entries", after-before)
	}
}
