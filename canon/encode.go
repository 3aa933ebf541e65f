package canon

import (
	"bytes"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize parses data under the strict profile (any whitespace, key
// order and escape spelling) and returns its canonical bytes.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := ParseRelaxed(data)
	if err != nil {
		return nil, err
	}
	return Encode(v), nil
}

// Encode returns the canonical bytes of a parsed Value.
func Encode(v *Value) []byte {
	var b bytes.Buffer
	writeValue(&b, v)
	return b.Bytes()
}

func writeValue(b *bytes.Buffer, v *Value) {
	switch v.Kind {
	case String:
		writeString(b, v.Str)
	case Int:
		b.Write(strconv.AppendInt(b.AvailableBuffer(), v.Int, 10))
	case Bool:
		if v.Bool {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case Array:
		b.WriteByte('[')
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case Object:
		ms := v.Members
		if !sortedMembers(ms) {
			ms = append([]Member(nil), ms...)
			sort.Slice(ms, func(i, j int) bool { return keyLess(ms[i].Key, ms[j].Key) })
		}
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.Key)
			b.WriteByte(':')
			writeValue(b, m.Value)
		}
		b.WriteByte('}')
	}
}

func sortedMembers(ms []Member) bool {
	for i := 1; i < len(ms); i++ {
		if !keyLess(ms[i-1].Key, ms[i].Key) {
			return false
		}
	}
	return true
}

// keyLess orders object keys as RFC 8785 §3.2.3 requires: by their UTF-16
// code units, which differs from UTF-8 byte order only when a key holds a
// character above U+FFFF next to one in U+E000..U+FFFF.
func keyLess(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return a < b
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// writeString writes s as RFC 8785 §3.2.2.2 serialises strings: '"' and '\'
// escaped, the five short control escapes, other controls as \u00xx in
// lowercase hex, everything else (including non-ASCII and U+007F) literally.
// s must be valid UTF-8.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
