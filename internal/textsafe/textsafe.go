// Package textsafe makes untrusted text safe to show to a person.
//
// DESIGN §1: free text is printed with control and bidirectional-override
// characters escaped. Statements come from agents, and an incident
// responder reads them in a terminal or a browser; a crafted reason must
// not move the cursor, recolour the screen or reorder what is shown.
//
// [Text] escapes for a terminal line: control and format characters
// (which include every bidirectional override and isolate), the line and
// paragraph separators, and invalid UTF-8 become visible escapes (\n,
// \u202e, \xff). [HTML] does the same and then escapes HTML's special
// characters, so the result can be placed in element content or in a
// quoted attribute. [JSON] escapes the same runes inside a JSON text as
// \uXXXX, which keeps it the same JSON ([WriteJSON], [PrettyJSON] print
// with it).
package textsafe

import (
	"fmt"
	"html"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Dangerous reports whether r would be interpreted rather than shown:
// control characters (Cc), format characters (Cf, the bidirectional
// controls among them), and U+2028/U+2029.
func Dangerous(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// Text returns s with dangerous runes and invalid UTF-8 escaped; every
// other character is kept. Text of safe input is the input.
func Text(s string) string {
	if !strings.ContainsFunc(s, Dangerous) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case Dangerous(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case Dangerous(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// HTML returns s escaped by Text and then for HTML (&, <, >, ", ').
func HTML(s string) string { return html.EscapeString(Text(s)) }

// Width is the number of runes of s, an estimate of its width in a
// terminal cell grid (custody's identifiers are ASCII; free text is
// usually narrow).
func Width(s string) int { return utf8.RuneCountInString(s) }

// Clip shortens s to at most n runes, ending with "…" when it cut.
func Clip(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
