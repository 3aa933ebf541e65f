package textsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// JSON rewrites the dangerous runes of a JSON text as \uXXXX escapes
// (a surrogate pair above U+FFFF). They can occur only inside strings,
// where the escape means the same thing, so the result is equivalent JSON
// that a terminal shows as it is. Newlines between tokens are kept.
func JSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r != '\n' && Dangerous(r) }) {
		return b
	}
	var out bytes.Buffer
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == '\n' || !Dangerous(r):
			out.Write(b[:n])
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xd800+(r>>10)&0x3ff, 0xdc00+r&0x3ff)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
		b = b[n:]
	}
	return out.Bytes()
}

// WriteJSON writes v to w as one indented JSON document, HTML characters
// as they are and dangerous runes escaped (JSON).
func WriteJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(JSON(b.Bytes()))
	return err
}

// PrettyJSON indents a JSON text for people, escaped as JSON does; text
// that is not JSON is escaped as Text.
func PrettyJSON(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return []byte(Text(string(raw)))
	}
	return JSON(b.Bytes())
}
