package canon

import (
	"bytes"
	"unicode/utf8"
)

// Reader reads a document that is already in canonical form without
// building a Value tree or using reflection, for the few decoders on the
// ledger's hot path (envelopes, statements, leaves).
//
// It accepts only a subset of what Parse accepts: no whitespace, object
// keys in strictly ascending order of ASCII bytes without escapes, strings
// without escapes or control characters, valid UTF-8, integers as JCS writes
// them. Whatever it accepts, Parse accepts too and reads to the same values.
// It never reports why it stopped: when any method returns false the input
// is either invalid or merely unusual (an escape, a non-ASCII key), and the
// caller must decode it again with Unmarshal or Parse, which decides and
// explains. That fallback is what keeps errors identical to the reference
// decoder; a Reader must never be used to reject input on its own.
type Reader struct {
	data []byte
	pos  int
}

// NewReader returns a Reader at the start of data.
func NewReader(data []byte) Reader { return Reader{data: data} }

// Done reports whether the whole input has been read.
func (r *Reader) Done() bool { return r.pos == len(r.data) }

// Pos is the offset of the next unread byte.
func (r *Reader) Pos() int { return r.pos }

// Object reads an object, calling member for each key in order; member
// must read exactly one value. It returns false if the input is not a
// non-empty object with keys in canonical order, or if member does.
func (r *Reader) Object(member func(key []byte) bool) bool {
	if r.pos >= len(r.data) || r.data[r.pos] != '{' {
		return false
	}
	r.pos++
	var prev []byte
	for first := true; ; first = false {
		key, ok := r.key()
		if !ok || (!first && bytes.Compare(prev, key) >= 0) {
			return false
		}
		prev = key
		if r.pos >= len(r.data) || r.data[r.pos] != ':' {
			return false
		}
		r.pos++
		if !member(key) || r.pos >= len(r.data) {
			return false
		}
		switch r.data[r.pos] {
		case ',':
			r.pos++
		case '}':
			r.pos++
			return true
		default:
			return false
		}
	}
}

// key reads an object key: a string of printable ASCII without escapes.
// Under that restriction byte order is the UTF-16 order RFC 8785 sorts by.
func (r *Reader) key() ([]byte, bool) {
	if r.pos >= len(r.data) || r.data[r.pos] != '"' {
		return nil, false
	}
	start := r.pos + 1
	for i := start; i < len(r.data); i++ {
		switch c := r.data[i]; {
		case c == '"':
			r.pos = i + 1
			return r.data[start:i], true
		case c < 0x20 || c == '\\' || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// Array reads a non-empty array, calling elem once per element; elem must
// read exactly one value.
func (r *Reader) Array(elem func() bool) bool {
	if r.pos >= len(r.data) || r.data[r.pos] != '[' {
		return false
	}
	r.pos++
	for {
		if !elem() || r.pos >= len(r.data) {
			return false
		}
		switch r.data[r.pos] {
		case ',':
			r.pos++
		case ']':
			r.pos++
			return true
		default:
			return false
		}
	}
}

// StringBytes reads a string and returns its bytes, which alias the input.
// It returns false for a string with an escape or a control character
// (those are read by the reference decoder), and for invalid UTF-8.
func (r *Reader) StringBytes() ([]byte, bool) {
	if r.pos >= len(r.data) || r.data[r.pos] != '"' {
		return nil, false
	}
	start := r.pos + 1
	ascii := true
	for i := start; i < len(r.data); i++ {
		switch c := r.data[i]; {
		case c == '"':
			s := r.data[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			r.pos = i + 1
			return s, true
		case c < 0x20 || c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// String reads a string as StringBytes does and copies it.
func (r *Reader) String() (string, bool) {
	b, ok := r.StringBytes()
	if !ok {
		return "", false
	}
	return string(b), true
}

// Int reads an integer written as JCS writes it: no leading zero, no "-0",
// no fraction or exponent, |n| <= 2^53-1.
func (r *Reader) Int() (int64, bool) {
	i := r.pos
	neg := false
	if i < len(r.data) && r.data[i] == '-' {
		neg = true
		i++
	}
	start := i
	var n int64
	for i < len(r.data) && r.data[i] >= '0' && r.data[i] <= '9' {
		if i-start >= 16 {
			return 0, false
		}
		n = n*10 + int64(r.data[i]-'0')
		i++
	}
	switch {
	case i == start, n > MaxSafeInteger:
		return 0, false
	case r.data[start] == '0' && (i-start > 1 || neg):
		return 0, false
	}
	if i < len(r.data) {
		switch r.data[i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	r.pos = i
	if neg {
		n = -n
	}
	return n, true
}

// Uint reads a non-negative integer as Int does.
func (r *Reader) Uint() (uint64, bool) {
	n, ok := r.Int()
	if !ok || n < 0 {
		return 0, false
	}
	return uint64(n), true
}

// Bool reads true or false.
func (r *Reader) Bool() (v, ok bool) {
	switch {
	case bytes.HasPrefix(r.data[r.pos:], []byte("true")):
		r.pos += 4
		return true, true
	case bytes.HasPrefix(r.data[r.pos:], []byte("false")):
		r.pos += 5
		return false, true
	}
	return false, false
}

// Raw reads any value the Reader can read and returns its bytes, which
// alias the input. It reads at most maxDepth levels, as Parse does.
func (r *Reader) Raw() ([]byte, bool) {
	start := r.pos
	if !r.skip(0) {
		return nil, false
	}
	return r.data[start:r.pos], true
}

func (r *Reader) skip(depth int) bool {
	if depth > maxDepth || r.pos >= len(r.data) {
		return false
	}
	switch c := r.data[r.pos]; {
	case c == '{':
		return r.Object(func([]byte) bool { return r.skip(depth + 1) })
	case c == '[':
		return r.Array(func() bool { return r.skip(depth + 1) })
	case c == '"':
		_, ok := r.StringBytes()
		return ok
	case c == 't' || c == 'f':
		_, ok := r.Bool()
		return ok
	default:
		_, ok := r.Int()
		return ok
	}
}

// IntMap reads an object of integers, as decoding into a
// map[string]int64 would.
func (r *Reader) IntMap() (map[string]int64, bool) {
	var m map[string]int64
	ok := r.Object(func(k []byte) bool {
		n, ok := r.Int()
		if m == nil {
			m = make(map[string]int64, 2)
		}
		m[string(k)] = n
		return ok
	})
	return m, ok
}

// StringMap reads an object of strings, as decoding into a
// map[string]string would.
func (r *Reader) StringMap() (map[string]string, bool) {
	var m map[string]string
	ok := r.Object(func(k []byte) bool {
		s, ok := r.String()
		if m == nil {
			m = make(map[string]string, 2)
		}
		m[string(k)] = s
		return ok
	})
	return m, ok
}

// Strings reads a non-empty array of strings.
func (r *Reader) Strings() ([]string, bool) {
	var out []string
	ok := r.Array(func() bool {
		s, ok := r.String()
		out = append(out, s)
		return ok
	})
	return out, ok
}

// AppendString appends s as a JCS string, exactly as Marshal writes it,
// and reports false (appending nothing) if s is not valid UTF-8, which
// Marshal refuses.
func AppendString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, `\u00`...)
			b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
