package canon

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// RawJSON is a JSON value written verbatim by Marshal and filled with the
// canonical bytes of the value by Unmarshal.
type RawJSON []byte

var (
	rawType   = reflect.TypeFor[RawJSON]()
	valueType = reflect.TypeFor[*Value]()
)

// Marshal returns the canonical bytes of v. See the package comment for how
// struct tags are read.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := marshalValue(&b, reflect.ValueOf(v), ""); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Unmarshal decodes data into v, a non-nil pointer, requiring the strict
// profile, the exact canonical bytes and v's closed schema.
func Unmarshal(data []byte, v any) error {
	tree, err := Parse(data)
	if err != nil {
		return err
	}
	return tree.Decode(v)
}

// UnmarshalRelaxed is Unmarshal without the requirement that data be
// byte-for-byte canonical.
func UnmarshalRelaxed(data []byte, v any) error {
	tree, err := ParseRelaxed(data)
	if err != nil {
		return err
	}
	return tree.Decode(v)
}

// Decode stores the Value in v, a non-nil pointer, under v's closed schema.
func (t *Value) Decode(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("canon: Decode needs a non-nil pointer, got %T", v)
	}
	return decodeValue(t, rv.Elem(), "")
}

type field struct {
	name      string
	index     []int // path through embedded structs
	omitEmpty bool
}

type structInfo struct {
	fields []field // sorted in canonical key order
	byName map[string]int
	err    error
}

var structCache sync.Map // reflect.Type -> *structInfo

func infoFor(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{byName: map[string]int{}}
	si.err = collectFields(t, nil, si)
	sort.Slice(si.fields, func(i, j int) bool { return keyLess(si.fields[i].name, si.fields[j].name) })
	for i, f := range si.fields {
		if _, dup := si.byName[f.name]; dup && si.err == nil {
			si.err = fmt.Errorf("canon: %s has two fields named %q", t, f.name)
		}
		si.byName[f.name] = i
	}
	actual, _ := structCache.LoadOrStore(t, si)
	return actual.(*structInfo)
}

// collectFields lists t's encoded fields. An embedded struct without a
// json tag has its fields flattened into the parent, as encoding/json does.
func collectFields(t reflect.Type, prefix []int, si *structInfo) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		index := append(append([]int(nil), prefix...), i)
		tag, tagged := f.Tag.Lookup("json")
		if f.Anonymous && !tagged && f.Type.Kind() == reflect.Struct {
			if err := collectFields(f.Type, index, si); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if !tagged {
			return fmt.Errorf("canon: field %s.%s has no json tag", t, f.Name)
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		si.fields = append(si.fields, field{name: name, index: index, omitEmpty: opts == "omitempty"})
	}
	return nil
}

func marshalValue(b *bytes.Buffer, v reflect.Value, path string) error {
	if !v.IsValid() {
		return schemaInvalid(path, "cannot encode a nil value")
	}
	t := v.Type()
	switch {
	case t == rawType:
		if v.Len() == 0 {
			return schemaInvalid(path, "empty raw JSON value")
		}
		b.Write(v.Bytes())
		return nil
	case t == valueType:
		if v.IsNil() {
			return schemaInvalid(path, "cannot encode a nil value")
		}
		writeValue(b, v.Interface().(*Value))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return schemaInvalid(path, "required value is absent")
		}
		return marshalValue(b, v.Elem(), path)
	case reflect.String:
		s := v.String()
		if !utf8.ValidString(s) {
			return nonCanonical(path, "string is not valid UTF-8")
		}
		writeString(b, s)
	case reflect.Bool:
		if v.Bool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := v.Int()
		if n > MaxSafeInteger || n < -MaxSafeInteger {
			return nonCanonical(path, "integer %d is outside ±(2^53-1)", n)
		}
		b.Write(strconv.AppendInt(b.AvailableBuffer(), n, 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := v.Uint()
		if n > MaxSafeInteger {
			return nonCanonical(path, "integer %d is outside ±(2^53-1)", n)
		}
		b.Write(strconv.AppendUint(b.AvailableBuffer(), n, 10))
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			return schemaInvalid(path, "empty arrays are not allowed (omit the field instead)")
		}
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := marshalValue(b, v.Index(i), indexPath(path, i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return schemaInvalid(path, "map keys must be strings, not %s", t.Key())
		}
		if v.Len() == 0 {
			return schemaInvalid(path, "empty objects are not allowed (omit the field instead)")
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if !utf8.ValidString(k) {
				return nonCanonical(path, "key is not valid UTF-8")
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := marshalValue(b, v.MapIndex(reflect.ValueOf(k).Convert(t.Key())), joinPath(path, k)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case reflect.Struct:
		si := infoFor(t)
		if si.err != nil {
			return si.err
		}
		b.WriteByte('{')
		n := 0
		for _, f := range si.fields {
			fv := v.FieldByIndex(f.index)
			if f.omitEmpty && fv.IsZero() {
				continue
			}
			if f.omitEmpty && (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0 {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			writeString(b, f.name)
			b.WriteByte(':')
			if err := marshalValue(b, fv, joinPath(path, f.name)); err != nil {
				return err
			}
		}
		if n == 0 {
			return schemaInvalid(path, "empty objects are not allowed (omit the field instead)")
		}
		b.WriteByte('}')
	default:
		return schemaInvalid(path, "cannot encode Go type %s", t)
	}
	return nil
}

func decodeValue(src *Value, dst reflect.Value, path string) error {
	t := dst.Type()
	switch {
	case t == rawType:
		dst.SetBytes(Encode(src))
		return nil
	case t == valueType:
		dst.Set(reflect.ValueOf(src))
		return nil
	}
	switch dst.Kind() {
	case reflect.Pointer:
		nv := reflect.New(t.Elem())
		if err := decodeValue(src, nv.Elem(), path); err != nil {
			return err
		}
		dst.Set(nv)
	case reflect.String:
		if src.Kind != String {
			return schemaInvalid(path, "expected a string, found %s", src.Kind)
		}
		dst.SetString(src.Str)
	case reflect.Bool:
		if src.Kind != Bool {
			return schemaInvalid(path, "expected a boolean, found %s", src.Kind)
		}
		dst.SetBool(src.Bool)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if src.Kind != Int {
			return schemaInvalid(path, "expected an integer, found %s", src.Kind)
		}
		if dst.OverflowInt(src.Int) {
			return schemaInvalid(path, "integer %d does not fit", src.Int)
		}
		dst.SetInt(src.Int)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if src.Kind != Int {
			return schemaInvalid(path, "expected an integer, found %s", src.Kind)
		}
		if src.Int < 0 {
			return schemaInvalid(path, "integer %d must not be negative", src.Int)
		}
		if dst.OverflowUint(uint64(src.Int)) {
			return schemaInvalid(path, "integer %d does not fit", src.Int)
		}
		dst.SetUint(uint64(src.Int))
	case reflect.Slice:
		if src.Kind != Array {
			return schemaInvalid(path, "expected an array, found %s", src.Kind)
		}
		s := reflect.MakeSlice(t, len(src.Elems), len(src.Elems))
		for i, e := range src.Elems {
			if err := decodeValue(e, s.Index(i), indexPath(path, i)); err != nil {
				return err
			}
		}
		dst.Set(s)
	case reflect.Map:
		if src.Kind != Object {
			return schemaInvalid(path, "expected an object, found %s", src.Kind)
		}
		if t.Key().Kind() != reflect.String {
			return schemaInvalid(path, "cannot decode into map keyed by %s", t.Key())
		}
		m := reflect.MakeMapWithSize(t, len(src.Members))
		for _, mem := range src.Members {
			ev := reflect.New(t.Elem()).Elem()
			if err := decodeValue(mem.Value, ev, joinPath(path, mem.Key)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(mem.Key).Convert(t.Key()), ev)
		}
		dst.Set(m)
	case reflect.Struct:
		if src.Kind != Object {
			return schemaInvalid(path, "expected an object, found %s", src.Kind)
		}
		si := infoFor(t)
		if si.err != nil {
			return si.err
		}
		var seen [64]bool
		var seenMore map[int]bool
		for _, mem := range src.Members {
			fi, ok := si.byName[mem.Key]
			if !ok {
				return schemaInvalid(joinPath(path, mem.Key), "unknown field %q", mem.Key)
			}
			if fi < len(seen) {
				seen[fi] = true
			} else {
				if seenMore == nil {
					seenMore = map[int]bool{}
				}
				seenMore[fi] = true
			}
			f := si.fields[fi]
			fv := dst.FieldByIndex(f.index)
			if err := decodeValue(mem.Value, fv, joinPath(path, mem.Key)); err != nil {
				return err
			}
			if f.omitEmpty && fv.IsZero() {
				// One meaning, one spelling: an optional zero value is written absent.
				return schemaInvalid(joinPath(path, mem.Key), "optional field %q must be omitted rather than given its zero value", mem.Key)
			}
		}
		for fi, f := range si.fields {
			present := seenMore[fi]
			if fi < len(seen) {
				present = seen[fi]
			}
			if !present && !f.omitEmpty {
				return schemaInvalid(joinPath(path, f.name), "required field %q is missing", f.name)
			}
		}
	default:
		return schemaInvalid(path, "cannot decode into Go type %s", t)
	}
	return nil
}
