package server

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/custodylog/custody/server/api"
)

// appendAnswer appends json.Marshal's encoding of an append's answer to
// b without reflection (it was the most CPU of the handler's own work),
// or reports false when it leaves out to json.Marshal: held receipts'
// rules, and any string with a byte shortEscape does not cover.
// answerjson_test.go compares the two.
func appendAnswer(b []byte, out *api.AppendResponse) ([]byte, bool) {
	if len(out.Rules) > 0 {
		return b, false
	}
	ok := true
	str := func(s string) {
		b = append(b, '"')
		start := 0
		for i := 0; i < len(s); {
			c := s[i]
			if c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			if esc := shortEscape(c); esc != "" {
				b = append(b, s[start:i]...)
				b = append(b, esc...)
				i++
				start = i
				continue
			}
			if c >= 0x80 {
				r, size := utf8.DecodeRuneInString(s[i:])
				if r != utf8.RuneError && r != '\u2028' && r != '\u2029' {
					i += size
					continue
				}
			}
			ok = false
			return
		}
		b = append(b, s[start:]...)
		b = append(b, '"')
	}
	b = append(b, `{"verdict":`...)
	str(out.Verdict)
	b = append(b, `,"index":`...)
	b = strconv.AppendUint(b, out.Index, 10)
	if out.DenialIndex != nil {
		b = append(b, `,"denial_index":`...)
		b = strconv.AppendUint(b, *out.DenialIndex, 10)
	}
	if out.ReasonCode != "" {
		b = append(b, `,"reason_code":`...)
		str(out.ReasonCode)
	}
	if out.Reason != "" {
		b = append(b, `,"reason":`...)
		str(out.Reason)
	}
	if out.Duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	if len(out.Notes) > 0 {
		b = append(b, `,"notes":[`...)
		for i, n := range out.Notes {
			if i > 0 {
				b = append(b, ',')
			}
			str(n)
		}
		b = append(b, ']')
	}
	if out.ExpiresAt != "" {
		b = append(b, `,"expires_at":`...)
		str(out.ExpiresAt)
	}
	b = append(b, `,"leaf":`...)
	if out.Leaf == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, out.Leaf)
		b = append(b, '"')
	}
	b = append(b, `,"checkpoint":`...)
	str(out.Checkpoint)
	b = append(b, `,"inclusion_proof":`...)
	if out.InclusionProof == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, h := range out.InclusionProof {
			if i > 0 {
				b = append(b, ',')
			}
			str(h)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	return b, ok
}

// shortEscape is how json.Marshal writes c in a string, for the bytes an
// answer's strings hold (a checkpoint's newlines, a reason's quotes), or
// "" for a byte written as it is or not covered.
func shortEscape(c byte) string {
	switch c {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '<':
		return `\u003c`
	case '>':
		return `\u003e`
	case '&':
		return `\u0026`
	}
	return ""
}
