package verify

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the verdict as a readable tree: one line per check,
// "ok" or "FAIL", with the failing entry and values.
func (v *Verdict) WriteText(w io.Writer) {
	status := "VALID"
	if !v.Valid {
		status = "INVALID"
	}
	fmt.Fprintf(w, "custody verify: %s\n", status)
	fmt.Fprintf(w, "  log        %s\n", v.Origin)
	if v.Size > 0 {
		fmt.Fprintf(w, "  checkpoint size %d\n", v.Size)
	}
	if v.Kind != "" {
		subj := fmt.Sprintf("#%d %s %s", v.Subject, v.Kind, v.ID)
		if v.Workflow != "" {
			subj += " in workflow " + v.Workflow
		}
		fmt.Fprintf(w, "  subject    %s\n", subj)
	}
	var walk func(cs []Check, depth int)
	walk = func(cs []Check, depth int) {
		for _, c := range cs {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
			}
			line := fmt.Sprintf("%s%s %s", strings.Repeat("  ", depth), mark, c.Name)
			if c.Detail != "" {
				line += ": " + c.Detail
			}
			fmt.Fprintln(w, escape(line))
			// Passing children of a passing check are summarised by its detail,
			// unless they are few.
			if !c.OK || len(c.Checks) <= 40 {
				walk(c.Checks, depth+1)
			}
		}
	}
	walk(v.Checks, 0)
	for _, n := range v.Notes {
		fmt.Fprintln(w, escape("note: "+n))
	}
	for _, n := range v.LeftToAudit {
		fmt.Fprintln(w, escape("left to custody audit (needs the whole log): "+n))
	}
}

// escape makes untrusted text safe for a terminal: control characters and
// bidirectional overrides are shown as escapes (DESIGN §1).
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
