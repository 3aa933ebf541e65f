package canon

// Kind is the JSON type of a Value. The profile has no null and no
// non-integer numbers, so there are five.
type Kind uint8

const (
	String Kind = iota + 1
	Int
	Bool
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case String:
		return "string"
	case Int:
		return "integer"
	case Bool:
		return "boolean"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "invalid"
}

// Member is one key/value pair of an Object, in document order.
type Member struct {
	Key   string
	Value *Value
}

// Value is a parsed document under the profile.
type Value struct {
	Kind    Kind
	Str     string   // String
	Int     int64    // Int
	Bool    bool     // Bool
	Elems   []*Value // Array, never empty
	Members []Member // Object, never empty, keys unique
}

// Get returns the member named key of an Object, or nil.
func (v *Value) Get(key string) *Value {
	if v == nil || v.Kind != Object {
		return nil
	}
	for i := range v.Members {
		if v.Members[i].Key == key {
			return v.Members[i].Value
		}
	}
	return nil
}

// MaxSafeInteger is 2^53-1, the largest magnitude the profile admits.
const MaxSafeInteger = 1<<53 - 1
