package nonzero

import (
	"reflect"
	"testing"
)

func TestSet(t *testing.T) {
	type inner struct{ N uint64 }
	var v struct {
		S  string
		B  bool
		I  int64
		L  []string
		M  map[string]int64
		P  *inner
		In inner
		u  int // unexported: left alone
	}
	Set(reflect.ValueOf(&v).Elem())
	if v.S == "" || !v.B || v.I == 0 || len(v.L) != 1 || v.L[0] == "" || len(v.M) != 1 || v.P == nil || v.P.N == 0 || v.In.N == 0 || v.u != 0 {
		t.Fatalf("%+v", v)
	}
}
