package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/custodylog/custody/internal/nonzero"
	"github.com/custodylog/custody/server/api"
)

// TestAppendAnswerWritesEveryField guards appendAnswer against a field
// added to api.AppendResponse: with each field alone set to a value that
// is not zero, whatever appendAnswer writes must be json.Marshal's bytes.
func TestAppendAnswerWritesEveryField(t *testing.T) {
	typ := reflect.TypeOf(api.AppendResponse{})
	for i := range typ.NumField() {
		var out api.AppendResponse
		nonzero.Set(reflect.ValueOf(&out).Elem().Field(i))
		got, ok := appendAnswer(nil, &out)
		if !ok {
			continue // left to json.Marshal
		}
		want, err := json.Marshal(&out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			t.Errorf("AppendResponse with only %s set: appendAnswer wrote\n%s\nwant (json.Marshal)\n%s", typ.Field(i).Name, got, want)
		}
	}
}
