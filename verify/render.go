package verify

import (
	"fmt"
	"io"
	"strings"

	"github.com/custodylog/custody/internal/textsafe"
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

// escape makes untrusted text safe for a terminal: control and
// bidirectional-override characters are shown as escapes (DESIGN §1).
func escape(s string) string { return textsafe.Text(s) }
