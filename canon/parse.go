package canon

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
// custody's deepest document (a DENIAL leaf holding an envelope) nests 4.
const maxDepth = 32

// Parse reads data under the strict profile and requires that data is
// exactly the canonical encoding of the result.
func Parse(data []byte) (*Value, error) {
	v, err := ParseRelaxed(data)
	if err != nil {
		return nil, err
	}
	if !isCanonical(data, v) {
		return nil, nonCanonical("", "bytes are not in canonical (RFC 8785) form")
	}
	return v, nil
}

// ParseRelaxed reads data under the strict profile, allowing any
// whitespace, key order and escape spelling.
func ParseRelaxed(data []byte) (*Value, error) {
	p := parser{data: data}
	p.skipSpace()
	v, err := p.value("", 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, nonCanonical("", "unexpected data after the JSON value at byte %d", p.pos)
	}
	return v, nil
}

func isCanonical(data []byte, v *Value) bool {
	var b bytes.Buffer
	b.Grow(len(data))
	writeValue(&b, v)
	return bytes.Equal(b.Bytes(), data)
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(path string, depth int) (*Value, error) {
	if depth > maxDepth {
		return nil, nonCanonical(path, "nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.data) {
		return nil, nonCanonical(path, "unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(path, depth)
	case c == '[':
		return p.array(path, depth)
	case c == '"':
		s, err := p.str(path)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: String, Str: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(path)
	case bytes.HasPrefix(p.data[p.pos:], []byte("true")):
		p.pos += 4
		return &Value{Kind: Bool, Bool: true}, nil
	case bytes.HasPrefix(p.data[p.pos:], []byte("false")):
		p.pos += 5
		return &Value{Kind: Bool}, nil
	case bytes.HasPrefix(p.data[p.pos:], []byte("null")):
		return nil, nonCanonical(path, "null is not allowed (omit the field instead)")
	default:
		return nil, nonCanonical(path, "invalid character %q at byte %d", c, p.pos)
	}
}

func (p *parser) object(path string, depth int) (*Value, error) {
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		return nil, nonCanonical(path, "empty objects are not allowed (omit the field instead)")
	}
	v := &Value{Kind: Object}
	seen := make(map[string]struct{}, 8)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, nonCanonical(path, "expected a string key at byte %d", p.pos)
		}
		key, err := p.str(path)
		if err != nil {
			return nil, err
		}
		if _, dup := seen[key]; dup {
			return nil, nonCanonical(joinPath(path, key), "duplicate key %q", key)
		}
		seen[key] = struct{}{}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, nonCanonical(path, "expected ':' after key %q", key)
		}
		p.pos++
		p.skipSpace()
		child, err := p.value(joinPath(path, key), depth+1)
		if err != nil {
			return nil, err
		}
		v.Members = append(v.Members, Member{Key: key, Value: child})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, nonCanonical(path, "unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return nil, nonCanonical(path, "expected ',' or '}' at byte %d", p.pos)
		}
	}
}

func (p *parser) array(path string, depth int) (*Value, error) {
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		return nil, nonCanonical(path, "empty arrays are not allowed (omit the field instead)")
	}
	v := &Value{Kind: Array}
	for {
		p.skipSpace()
		child, err := p.value(indexPath(path, len(v.Elems)), depth+1)
		if err != nil {
			return nil, err
		}
		v.Elems = append(v.Elems, child)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, nonCanonical(path, "unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return nil, nonCanonical(path, "expected ',' or ']' at byte %d", p.pos)
		}
	}
}

func (p *parser) number(path string) (*Value, error) {
	start := p.pos
	neg := false
	if p.data[p.pos] == '-' {
		neg = true
		p.pos++
	}
	digits := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == digits {
		return nil, nonCanonical(path, "invalid number at byte %d", start)
	}
	if p.pos < len(p.data) {
		switch p.data[p.pos] {
		case '.', 'e', 'E':
			return nil, nonCanonical(path, "number %s… is not an integer (no fractions or exponents)", p.data[start:p.pos])
		}
	}
	lit := p.data[digits:p.pos]
	if len(lit) > 1 && lit[0] == '0' {
		return nil, nonCanonical(path, "number %s has a leading zero", p.data[start:p.pos])
	}
	if neg && len(lit) == 1 && lit[0] == '0' {
		return nil, nonCanonical(path, "-0 is not allowed")
	}
	if len(lit) > 16 {
		return nil, nonCanonical(path, "number %s is outside ±(2^53-1)", p.data[start:p.pos])
	}
	var n int64
	for _, d := range lit {
		n = n*10 + int64(d-'0')
	}
	if n > MaxSafeInteger {
		return nil, nonCanonical(path, "number %s is outside ±(2^53-1)", p.data[start:p.pos])
	}
	if neg {
		n = -n
	}
	return &Value{Kind: Int, Int: n}, nil
}

// str reads a JSON string starting at the opening quote.
func (p *parser) str(path string) (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes, ASCII or valid UTF-8 without control characters.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			p.pos++
			if !utf8.Valid(s) {
				return "", nonCanonical(path, "string is not valid UTF-8")
			}
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for {
		if p.pos >= len(p.data) {
			return "", nonCanonical(path, "unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(buf) {
				return "", nonCanonical(path, "string is not valid UTF-8")
			}
			return string(buf), nil
		case c < 0x20:
			return "", nonCanonical(path, "unescaped control character 0x%02x in string", c)
		case c == '\\':
			if p.pos+1 >= len(p.data) {
				return "", nonCanonical(path, "unterminated escape")
			}
			e := p.data[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4(path)
				if err != nil {
					return "", err
				}
				switch {
				case utf16.IsSurrogate(r) && r < 0xdc00:
					// High surrogate: a low one must follow.
					if p.pos+6 > len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
						return "", nonCanonical(path, "lone surrogate \\u%04x", r)
					}
					p.pos += 2
					r2, err := p.hex4(path)
					if err != nil {
						return "", err
					}
					if r2 < 0xdc00 || r2 > 0xdfff {
						return "", nonCanonical(path, "lone surrogate \\u%04x", r)
					}
					buf = utf8.AppendRune(buf, utf16.DecodeRune(r, r2))
				case utf16.IsSurrogate(r):
					return "", nonCanonical(path, "lone surrogate \\u%04x", r)
				default:
					buf = utf8.AppendRune(buf, r)
				}
			default:
				return "", nonCanonical(path, "invalid escape \\%c", e)
			}
		default:
			buf = append(buf, c)
			p.pos++
		}
	}
}

func (p *parser) hex4(path string) (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, nonCanonical(path, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, nonCanonical(path, "invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}
