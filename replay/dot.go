package replay

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/custodylog/custody/internal/textsafe"
)

// dotQuote quotes s as a DOT string: escaped for a terminal first (so no
// control or bidi character reaches a renderer), then for DOT.
func dotQuote(s string) string {
	s = textsafe.Text(s)
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}

// dotLabel joins label lines with DOT's centred line break.
func dotLabel(lines ...string) string {
	for i, l := range lines {
		l = textsafe.Text(l)
		l = strings.ReplaceAll(l, `\`, `\\`)
		lines[i] = strings.ReplaceAll(l, `"`, `\"`)
	}
	return `"` + strings.Join(lines, `\n`) + `"`
}

// DOT returns the authority tree as a Graphviz digraph: principals, the
// grants below them (revoked ones grey, stopped ones outlined red) and
// denied attempts as dashed red nodes.
func (r *Report) DOT() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "digraph authority {\n")
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n", dotQuote(fmt.Sprintf("workflow %s on %s (checkpoint size %d, %s)", r.Workflow, r.Origin, r.CheckpointSize, verifiedWord(r))))
	fmt.Fprintf(&b, "  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n  edge [color=\"#555555\"];\n")
	principals := map[string]bool{}
	known := map[string]bool{}
	for _, g := range r.Grants {
		if !g.Denied {
			known[g.ID] = true
		}
	}
	for _, g := range r.Grants {
		if g.Kind == "CONFIRM" && !g.Denied && !principals[g.Issuer] {
			principals[g.Issuer] = true
			fmt.Fprintf(&b, "  %s [shape=ellipse, label=%s];\n", dotQuote("p:"+g.Issuer), dotLabel(g.Issuer, "principal"))
		}
	}
	for _, g := range r.Grants {
		lines := []string{fmt.Sprintf("%s (%s #%d)", g.ID, g.Kind, g.Index), fmt.Sprintf("→ %s, depth %d", g.Grantee, g.Depth), g.Summary()}
		attrs := ""
		if g.Denied {
			lines = append(lines, "DENIED "+g.Code)
			attrs = `, style=dashed, color="#c62828", fontcolor="#c62828"`
		} else {
			if g.ExpiresAt != "" {
				lines = append(lines, "expires "+g.ExpiresAt)
			}
			for _, l := range g.Limits {
				lines = append(lines, fmt.Sprintf("%s: %d of %d charged, %d left", l.Key, l.Charged, l.Max, l.Remaining))
			}
			var marks []string
			if g.Revoked {
				marks = append(marks, "REVOKED by "+g.RevokedBy)
			}
			if g.RevokedVia != "" {
				marks = append(marks, "REVOKED via "+g.RevokedVia)
			}
			if g.Expired {
				marks = append(marks, "EXPIRED")
			}
			if g.Stopped != "" {
				marks = append(marks, "STOPPED: "+g.Stopped)
			}
			if g.Status != Verified {
				marks = append(marks, strings.ToUpper(g.Status))
			}
			if len(marks) > 0 {
				lines = append(lines, strings.Join(marks, "; "))
			}
			switch {
			case g.Status != Verified:
				attrs = `, color="#c62828", penwidth=2, style=dashed`
			case g.Revoked || g.RevokedVia != "":
				attrs = `, style=filled, fillcolor="#eeeeee", fontcolor="#666666"`
			case g.Stopped != "":
				attrs = `, color="#c62828", penwidth=2`
			}
		}
		fmt.Fprintf(&b, "  %s [label=%s%s];\n", dotQuote("g:"+g.ID), dotLabel(lines...), attrs)
		switch {
		case g.Parent != "" && known[g.Parent]:
			style := ""
			if g.Denied {
				style = ` [style=dashed, color="#c62828"]`
			}
			fmt.Fprintf(&b, "  %s -> %s%s;\n", dotQuote("g:"+g.Parent), dotQuote("g:"+g.ID), style)
		case g.Kind == "CONFIRM" && principals[g.Issuer]:
			fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote("p:"+g.Issuer), dotQuote("g:"+g.ID))
		}
	}
	fmt.Fprintf(&b, "}\n")
	return b.Bytes()
}

func verifiedWord(r *Report) string {
	if r.Verified {
		return "verified"
	}
	return "VERIFICATION FAILED"
}
