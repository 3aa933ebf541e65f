package authority

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/custodylog/custody/internal/nonzero"
)

// TestAppendRecordWritesEveryField guards appendRecord against a field
// added to a record it writes by hand: for each field of each such record
// alone set to a value that is not zero (nested fields too), whatever
// appendRecord writes must be json.Marshal's bytes. A new field it does not
// write shows here as a record that lost it.
func TestAppendRecordWritesEveryField(t *testing.T) {
	for _, rec := range []any{&IDRec{}, &WorkflowRec{}, &KeyRec{}, &PendingRec{}, &GrantRec{}} {
		typ := reflect.TypeOf(rec).Elem()
		for _, path := range fieldPaths(typ, nil) {
			v := reflect.New(typ)
			nonzero.Set(v.Elem().FieldByIndex(path))
			got, ok := appendRecord(nil, v.Interface())
			if !ok {
				continue // left to json.Marshal: nothing to compare
			}
			want, err := json.Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s with only field %v set: appendRecord wrote\n%s\nwant (json.Marshal)\n%s", typ.Name(), path, got, want)
			}
		}
	}
}

// fieldPaths lists the exported fields of struct type t, each nested
// struct's fields one by one (a descriptor's too), as FieldByIndex paths.
func fieldPaths(t reflect.Type, prefix []int) [][]int {
	var out [][]int
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		p := append(append([]int(nil), prefix...), i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, fieldPaths(f.Type, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}
