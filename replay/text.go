package replay

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/statement"
)

// TextOptions tune WriteText.
type TextOptions struct {
	// Color adds ANSI colours (the caller decides: a terminal, NO_COLOR unset).
	Color bool
	// Width is the line width to wrap at (default 80).
	Width int
}

// ANSI styles.
const (
	cReset  = "\033[0m"
	cBold   = "\033[1m"
	cRed    = "\033[31m"
	cGreen  = "\033[32m"
	cYellow = "\033[33m"
	cDim    = "\033[2m"
)

// textWriter writes escaped, wrapped lines.
type textWriter struct {
	w     io.Writer
	o     TextOptions
	err   error
	today string
}

func (t *textWriter) paint(style, s string) string {
	if !t.o.Color || style == "" {
		return s
	}
	return style + s + cReset
}

// line writes one line; s must already be escaped.
func (t *textWriter) line(s string) {
	if t.err == nil {
		_, t.err = io.WriteString(t.w, s+"\n")
	}
}

// wrapped writes text (escaped here) wrapped at the width: the first line
// after lead (cont when lead is ""), the others after cont. lead and cont
// are the caller's own, safe text.
func (t *textWriter) wrapped(lead, cont string, text string, style string) {
	if lead == "" {
		lead = cont
	}
	t.wrap(lead, cont, text, style)
}

// wrap is wrapped with lead taken as given, even when empty.
func (t *textWriter) wrap(lead, cont string, text string, style string) {
	indent := max(textsafe.Width(lead), textsafe.Width(cont))
	width := max(t.o.Width-indent, 20)
	words := strings.Fields(textsafe.Text(text))
	var lines []string
	cur := ""
	for _, w := range words {
		switch {
		case cur == "":
			cur = w
		case textsafe.Width(cur)+1+textsafe.Width(w) <= width:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	for i, l := range lines {
		if i == 0 {
			t.line(lead + t.paint(style, l))
		} else {
			t.line(cont + t.paint(style, l))
		}
	}
}

// ind is n spaces.
func ind(n int) string { return strings.Repeat(" ", n) }

// WriteText writes the report for a person at a terminal: a header with
// the verification result, the timeline, the authority tree, the STOPs
// and what needs attention. Every untrusted string is escaped.
func (r *Report) WriteText(w io.Writer, o TextOptions) error {
	if o.Width <= 0 {
		o.Width = 80
	}
	t := &textWriter{w: w, o: o}
	t.header(r)
	t.timeline(r)
	t.tree(r)
	t.stops(r)
	t.attention(r)
	if len(r.LeftToAudit) > 0 {
		t.line("")
		t.wrapped("", "", "Left to custody audit (a bundle holds one workflow; these need the whole log): "+strings.Join(r.LeftToAudit, "; ")+".", cDim)
	}
	return t.err
}

func (t *textWriter) section(title string) {
	t.line("")
	t.line(t.paint(cBold, title))
}

func (t *textWriter) header(r *Report) {
	t.wrapped("", "", fmt.Sprintf("custody replay: workflow %s on %s", r.Workflow, r.Origin), cBold)
	if r.Verified {
		t.wrapped("", "", fmt.Sprintf("verified against checkpoint size %d: checkpoint signature, inclusion of all %d entries, back-links, every signature and decision re-run",
			r.CheckpointSize, len(r.Rows)), cGreen)
	} else if r.Failure != nil {
		t.wrapped("", "", r.Failure.String(), cRed+cBold)
		t.wrapped("", "", "Rows marked FAILED failed a check; rows marked unverified were not checked. Treat both as claims, not facts.", cRed)
	}
	day := ""
	if at, err := statement.ParseLoggedAt(r.AsOf); err == nil {
		day = at.Format("2006-01-02")
		t.today = day
	}
	meta := []string{}
	if r.Owner != "" {
		meta = append(meta, "owner "+r.Owner)
	}
	if r.AsOf != "" {
		meta = append(meta, "as of "+r.AsOf)
	}
	meta = append(meta, "times are UTC")
	t.wrapped("", "", strings.Join(meta, "; "), "")
}

// clock formats a logged time for the timeline column.
func clock(s string) (string, string) {
	at, err := statement.ParseLoggedAt(s)
	if err != nil {
		return "?", ""
	}
	return at.Format("15:04:05.000"), at.Format("2006-01-02")
}

func (t *textWriter) timeline(r *Report) {
	t.section("TIMELINE")
	t.line(t.paint(cDim, fmt.Sprintf("%5s  %-12s  %-9s %-25s %s", "#", "logged", "kind", "actor", "decision")))
	day := ""
	for _, row := range r.Rows {
		tm, d := clock(row.LoggedAt)
		if d != "" && d != day {
			if day != "" || d != t.today {
				t.line(t.paint(cDim, "       -- "+d+" --"))
			}
			day = d
		}
		dec, style := row.Decision, cGreen
		if row.Decision == "denied" {
			dec, style = "DENIED "+row.Code, cRed
		}
		if row.Result != "" && row.Decision != "denied" {
			dec += " " + row.Result
		}
		actor := textsafe.Clip(textsafe.Text(orDash(row.Actor)), 25)
		t.line(fmt.Sprintf("%5d  %-12s  %-9s %-25s %s", row.Index, tm, textsafe.Clip(row.Kind, 9), actor, t.paint(style, textsafe.Text(dec))))
		pad := ind(9)
		what := orDash(row.ID) + ": " + row.Action
		if row.Target != "" {
			what += " → " + row.Target
		}
		if row.Step != "" {
			what += " (step " + row.Step + ")"
		}
		if row.DenialID != "" {
			what += " [" + row.DenialID + "]"
		}
		t.wrapped("", pad, what, "")
		for _, d := range row.Details() {
			style := cDim
			if d.Bad {
				style = cRed
			}
			t.wrapped("", pad, d.Label+": "+d.Text, style)
		}
		if len(row.Path) > 0 {
			t.wrapped("", pad, "via "+strings.Join(row.Path, " → "), cDim)
		}
		if row.Reason != "" {
			t.wrapped("", pad, "why: "+row.Reason, cRed)
		}
		switch row.Status {
		case Failed:
			t.wrapped("", pad, "!! FAILED verification: "+row.Problem, cRed+cBold)
		case Unverified:
			t.wrapped("", pad, "?? unverified: "+row.Problem, cYellow)
		}
	}
}

// tree writes the grants as a tree under their CONFIRMs.
func (t *textWriter) tree(r *Report) {
	t.section("AUTHORITY")
	if len(r.Grants) == 0 {
		t.line("(no grants in this workflow)")
		return
	}
	kids := map[string][]*Grant{}
	var roots []*Grant
	known := map[string]bool{}
	for _, g := range r.Grants {
		if !g.Denied {
			known[g.ID] = true
		}
	}
	for _, g := range r.Grants {
		if g.Parent != "" && known[g.Parent] {
			kids[g.Parent] = append(kids[g.Parent], g)
		} else {
			roots = append(roots, g)
		}
	}
	var walk func(g *Grant, first, rest string)
	walk = func(g *Grant, first, rest string) {
		t.grant(g, first, rest, len(kids[g.ID]) > 0)
		cs := kids[g.ID]
		for i, c := range cs {
			if i == len(cs)-1 {
				walk(c, rest+"└─ ", rest+"   ")
			} else {
				walk(c, rest+"├─ ", rest+"│  ")
			}
		}
	}
	for _, g := range roots {
		walk(g, "", "")
	}
}

func (t *textWriter) grant(g *Grant, first, rest string, hasKids bool) {
	body := rest + "  "
	if hasKids {
		body = rest + "│ "
	}
	if g.Denied {
		t.wrap(first, body+"  ", fmt.Sprintf("✗ %s → %s  DENIED %s (%s #%d by %s, would be depth %d)",
			g.ID, g.Grantee, g.Code, g.Kind, g.Index, orDash(g.Issuer), g.Depth), cRed)
		t.wrapped(body+"  ", body+"  ", "asked for "+g.Summary(), cDim)
		return
	}
	t.wrap(first, body, fmt.Sprintf("%s → %s  (depth %d)", g.ID, g.Grantee, g.Depth), cBold)
	t.wrapped(body, body, fmt.Sprintf("%s #%d by %s: %s", g.Kind, g.Index, g.Issuer, g.Summary()), "")
	var marks []string
	exp := g.ExpiresAt
	if at, err := statement.ParseTimestamp(g.ExpiresAt); err == nil {
		exp = at.Format("15:04:05")
		if d := at.Format("2006-01-02"); d != t.today {
			exp = at.Format("2006-01-02 15:04:05")
		}
	}
	m := "expires " + exp
	if g.TTLSeconds > 0 {
		m += fmt.Sprintf(" (ttl %s)", time.Duration(g.TTLSeconds)*time.Second)
	}
	marks = append(marks, m)
	if g.Revocable {
		marks = append(marks, "revocable")
	} else {
		marks = append(marks, "not revocable")
	}
	style := ""
	if g.Expired {
		marks, style = append(marks, "EXPIRED"), cYellow
	}
	if g.Revoked {
		marks, style = append(marks, "REVOKED by "+g.RevokedBy), cRed
	}
	if g.RevokedVia != "" {
		marks, style = append(marks, "REVOKED via "+g.RevokedVia), cRed
	}
	if g.Stopped != "" {
		marks, style = append(marks, "STOPPED ("+g.Stopped+")"), cRed
	}
	if g.Status != Verified {
		marks, style = append(marks, strings.ToUpper(g.Status)), cRed
	}
	t.wrapped(body, body, strings.Join(marks, "; "), style)
	if len(g.Limits) > 0 {
		t.line(body + t.paint(cDim, fmt.Sprintf("%-16s %8s %8s %8s %8s %9s", "limit", "max", "reserved", "consumed", "charged", "remaining")))
		for _, l := range g.Limits {
			st := ""
			if l.Remaining < 0 || l.Consumed > l.Reserved {
				st = cRed
			}
			t.line(body + t.paint(st, fmt.Sprintf("%-16s %8d %8d %8d %8d %9d", textsafe.Clip(textsafe.Text(l.Key), 16), l.Max, l.Reserved, l.Consumed, l.Charged, l.Remaining)))
		}
	}
}

func (t *textWriter) stops(r *Report) {
	if len(r.Stops) == 0 {
		return
	}
	t.section("STOPS")
	for _, s := range r.Stops {
		what := s.Scope
		if s.Step != "" {
			what += " " + s.Step
		}
		state, style := "IN FORCE", cRed
		if s.Resumed {
			state, style = "lifted by "+s.ResumedBy, ""
		}
		take := s.TakeoverMode
		if s.TakeoverTo != "" {
			take += " to " + s.TakeoverTo
		}
		t.wrapped(fmt.Sprintf("%5d  ", s.Index), ind(7), fmt.Sprintf("%s %s by %s (%s), takeover %s: %s", s.ID, what, s.By, orDash(s.Role), take, state), style)
		t.wrapped("", ind(7), "reason: "+s.Reason, "")
	}
}

func (t *textWriter) attention(r *Report) {
	t.section(fmt.Sprintf("NEEDS ATTENTION (%d)", len(r.Attention)))
	if len(r.Attention) == 0 {
		t.line("nothing: every statement was within its authority and every pending receipt has its outcome")
		return
	}
	for _, a := range r.Attention {
		at := "    "
		if a.Index != nil {
			at = fmt.Sprintf("#%-3d", *a.Index)
		}
		style := cYellow
		switch a.Kind {
		case AttnVerification, AttnEscalation:
			style = cRed
		case AttnNote:
			style = ""
		}
		lead := fmt.Sprintf("%s %s ", at, t.paint(style, fmt.Sprintf("%-12s", a.Kind)))
		t.wrapped(lead, ind(18), a.Text, "")
	}
}
