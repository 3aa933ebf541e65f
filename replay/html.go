package replay

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/custodylog/custody/internal/textsafe"
)

// h escapes untrusted text for HTML element content, attributes and SVG
// text.
func h(s string) string { return textsafe.HTML(s) }

// HTML returns one self-contained page: the verification result, what
// needs attention, the timeline as a table and the authority tree drawn as
// inline SVG. It has no scripts and makes no external requests (its
// Content-Security-Policy forbids them), so it can be attached to an
// incident ticket and opened anywhere.
func (r *Report) HTML() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	p("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n")
	p("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	p("<title>custody replay: %s</title>\n<style>%s</style>\n</head>\n<body>\n", h(r.Workflow), pageCSS)
	p("<header><h1>Workflow <code>%s</code></h1>\n<p class=\"meta\">log <code>%s</code> · checkpoint size %d", h(r.Workflow), h(r.Origin), r.CheckpointSize)
	if r.Owner != "" {
		p(" · owner <code>%s</code>", h(r.Owner))
	}
	if r.AsOf != "" {
		p(" · as of %s (UTC)", h(r.AsOf))
	}
	p("</p>\n")
	if r.Verified {
		p("<p class=\"banner ok\" id=\"verdict\">Verified: checkpoint signature, inclusion of all %d entries, back-links, every signature and every decision re-run with the ledger's decision function.</p>\n", len(r.Rows))
	} else if r.Failure != nil {
		p("<p class=\"banner bad\" id=\"verdict\">%s<br><small>Rows marked FAILED failed a check; rows marked unverified were not checked. Treat both as claims, not facts.</small></p>\n", h(r.Failure.String()))
	}
	for _, s := range r.Stops {
		if s.Resumed {
			continue
		}
		what := s.Scope + " " + r.Workflow
		if s.Step != "" {
			what = "step " + s.Step + " of " + r.Workflow
		}
		take := s.TakeoverMode
		if s.TakeoverTo != "" {
			take += " to " + s.TakeoverTo
		}
		p("<p class=\"banner stopped\" id=\"stopped\">STOPPED: <a href=\"#entry-%d\">%s</a> (%s) by <code>%s</code>", s.Index, h(s.ID), h(what), h(s.By))
		if s.Role != "" {
			p(" (%s)", h(s.Role))
		}
		p(", takeover %s, in force<br><small>%s</small></p>\n", h(take), h(s.Reason))
	}
	p("</header>\n")

	p("<section id=\"attention\"><h2>Needs attention (%d)</h2>\n", len(r.Attention))
	if len(r.Attention) == 0 {
		p("<p>Nothing: every statement was within its authority and every pending receipt has its outcome.</p>\n")
	} else {
		p("<ul class=\"attention\">\n")
		for _, a := range r.Attention {
			at := ""
			if a.Index != nil {
				at = fmt.Sprintf(" <a href=\"#entry-%d\">#%d</a>", *a.Index, *a.Index)
			}
			p("<li class=\"%s\"><span class=\"tag\">%s</span>%s %s</li>\n", h(a.Kind), h(a.Kind), at, h(a.Text))
		}
		p("</ul>\n")
	}
	p("</section>\n")

	p("<section><h2>Timeline</h2>\n<table id=\"timeline\">\n<thead><tr><th>#</th><th>logged (UTC)</th><th>kind</th><th>actor</th><th>what</th><th>decision</th><th>authority path</th><th>verified</th></tr></thead>\n<tbody>\n")
	for _, row := range r.Rows {
		cls := []string{"entry", row.Decision}
		if row.Status != Verified {
			cls = append(cls, "st-"+strings.ToLower(row.Status))
		}
		if row.Trust {
			cls = append(cls, "trust")
		}
		p("<tr id=\"entry-%d\" class=\"%s\" data-index=\"%d\">", row.Index, h(strings.Join(cls, " ")), row.Index)
		p("<td class=\"idx\">%d</td><td class=\"time\"><time datetime=\"%s\" title=\"%s\">%s</time></td><td>%s</td><td><code class=\"actor\">%s</code></td>",
			row.Index, h(row.LoggedAt), h(row.LoggedAt), h(shortTime(row.LoggedAt)), h(row.Kind), breakable(orDash(row.Actor)))
		what := "<code>" + h(orDash(row.ID)) + "</code> " + h(row.Action)
		if row.Target != "" {
			what += " → <code>" + h(row.Target) + "</code>"
		}
		if row.Step != "" {
			what += " <span class=\"dim\">(step " + h(row.Step) + ")</span>"
		}
		if row.DenialID != "" {
			what += " <span class=\"dim\">[" + h(row.DenialID) + "]</span>"
		}
		if row.Reason != "" {
			what += "<div class=\"why\">" + h(row.Reason) + "</div>"
		}
		for _, d := range row.Details() {
			cls := "detail"
			if d.Bad {
				cls += " why"
			}
			text := h(d.Text)
			if d.Link != nil {
				text = fmt.Sprintf("<a href=\"#entry-%d\">%s</a>", *d.Link, text)
			}
			what += fmt.Sprintf("<div class=\"%s\"><span class=\"label\">%s:</span> %s</div>", cls, h(d.Label), text)
		}
		dec := h(row.Decision)
		if row.Code != "" {
			dec = "<strong>DENIED</strong> " + h(row.Code)
		}
		if row.Result != "" && row.Decision != "denied" {
			dec += " <span class=\"result\">" + h(row.Result) + "</span>"
		}
		var path []string
		for _, s := range row.Path {
			path = append(path, "<code>"+h(s)+"</code>")
		}
		status := h(row.Status)
		if row.Problem != "" {
			status += "<div class=\"why\">" + h(row.Problem) + "</div>"
		}
		p("<td>%s</td><td>%s</td><td class=\"path\">%s</td><td class=\"status\">%s</td></tr>\n", what, dec, strings.Join(path, " → "), status)
	}
	p("</tbody>\n</table>\n</section>\n")

	p("<section id=\"authority\"><h2>Authority</h2>\n")
	if len(r.Grants) == 0 {
		p("<p>No grants in this workflow.</p>\n")
	} else {
		r.svgTree(&b)
		r.grantTable(&b)
	}
	p("</section>\n")

	if len(r.Stops) > 0 {
		p("<section id=\"stops\"><h2>Stops</h2>\n<ul>\n")
		for _, s := range r.Stops {
			what := s.Scope
			if s.Step != "" {
				what += " " + s.Step
			}
			state := "<strong class=\"bad\">in force</strong>"
			if s.Resumed {
				state = "lifted by <code>" + h(s.ResumedBy) + "</code>"
			}
			take := s.TakeoverMode
			if s.TakeoverTo != "" {
				take += " to " + s.TakeoverTo
			}
			p("<li><a href=\"#entry-%d\">#%d</a> <code>%s</code> %s by <code>%s</code> (%s), takeover %s: %s<div class=\"why\">%s</div></li>\n",
				s.Index, s.Index, h(s.ID), h(what), h(s.By), h(orDash(s.Role)), h(take), state, h(s.Reason))
		}
		p("</ul>\n</section>\n")
	}
	if len(r.LeftToAudit) > 0 {
		p("<footer><p>Left to <code>custody audit</code> (a bundle holds one workflow; these need the whole log):</p><ul>\n")
		for _, s := range r.LeftToAudit {
			p("<li>%s</li>\n", h(s))
		}
		p("</ul></footer>\n")
	}
	p("</body>\n</html>\n")
	return b.Bytes()
}

var lineClass = []string{"t1", "t2", "t3", "t2"}

// nodeLines is what a grant's box says: who to whom, the scope, the marks
// and the limits.
func nodeLines(g *Grant) []string {
	title := fmt.Sprintf("%s  %s → %s  (%s #%d, depth %d)", g.ID, g.Issuer, g.Grantee, g.Kind, g.Index, g.Depth)
	if g.Denied {
		title = "✗ " + title
	}
	var marks []string
	if g.Denied {
		marks = append(marks, "DENIED "+g.Code)
	}
	if g.ExpiresAt != "" {
		marks = append(marks, "expires "+g.ExpiresAt)
	}
	if g.Expired {
		marks = append(marks, "EXPIRED")
	}
	if g.Revoked {
		marks = append(marks, "REVOKED by "+g.RevokedBy)
	}
	if g.RevokedVia != "" {
		marks = append(marks, "REVOKED via "+g.RevokedVia)
	}
	if g.Stopped != "" {
		marks = append(marks, "STOPPED: "+g.Stopped)
	}
	if !g.Denied && g.Status != Verified {
		marks = append(marks, strings.ToUpper(g.Status))
	}
	var lim []string
	for _, l := range g.Limits {
		if g.Denied {
			lim = append(lim, fmt.Sprintf("%s ≤ %d", l.Key, l.Max))
		} else {
			lim = append(lim, fmt.Sprintf("%s %d/%d charged, %d left", l.Key, l.Charged, l.Max, l.Remaining))
		}
	}
	out := []string{title, g.Summary(), strings.Join(marks, " · "), strings.Join(lim, " · ")}
	for i := range out {
		out[i] = textsafe.Clip(out[i], 160)
	}
	return out
}

// treeNode is a grant placed in the drawing.
type treeNode struct {
	g     *Grant
	depth int
	row   int
}

// svgTree draws the grants as an indented tree: each grant a box whose
// left edge shows its depth, joined to its parent by an elbow line.
func (r *Report) svgTree(b *bytes.Buffer) {
	known := map[string]bool{}
	for _, g := range r.Grants {
		if !g.Denied {
			known[g.ID] = true
		}
	}
	kids := map[string][]*Grant{}
	var roots []*Grant
	for _, g := range r.Grants {
		if g.Parent != "" && known[g.Parent] {
			kids[g.Parent] = append(kids[g.Parent], g)
		} else {
			roots = append(roots, g)
		}
	}
	var nodes []treeNode
	pos := map[string]treeNode{}
	var walk func(g *Grant, depth int)
	walk = func(g *Grant, depth int) {
		n := treeNode{g: g, depth: depth, row: len(nodes)}
		nodes = append(nodes, n)
		if !g.Denied {
			pos[g.ID] = n
		}
		for _, c := range kids[g.ID] {
			walk(c, depth+1)
		}
	}
	for _, g := range roots {
		walk(g, 0)
	}
	const (
		indent = 36
		boxW   = 640
		boxH   = 74
		gap    = 14
		margin = 8
		charW  = 8 // 12px monospace is about 7.2px a character
	)
	lines := make([][]string, len(nodes))
	width := 0
	for i, n := range nodes {
		lines[i] = nodeLines(n.g)
		w := boxW
		for _, l := range lines[i] {
			w = max(w, textsafe.Width(textsafe.Text(l))*charW+20)
		}
		width = max(width, margin*2+n.depth*indent+w)
	}
	height := margin*2 + len(nodes)*(boxH+gap)
	fmt.Fprintf(b, "<svg id=\"tree\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"authority tree\">\n", width, height, width, height)
	for _, n := range nodes {
		y := margin + n.row*(boxH+gap)
		x := margin + n.depth*indent
		if p, ok := pos[n.g.Parent]; ok {
			px := margin + p.depth*indent + 14
			py := margin + p.row*(boxH+gap) + boxH
			dash := ""
			if n.g.Denied {
				dash = ` stroke-dasharray="4 3" stroke="#c62828"`
			}
			fmt.Fprintf(b, "<path d=\"M%d %d V%d H%d\" fill=\"none\" stroke=\"#777\"%s/>\n", px, py, y+boxH/2, x, dash)
		}
		fill, stroke, extra := "#f4f8ff", "#3b6fb6", ""
		switch {
		case n.g.Denied:
			fill, stroke, extra = "#fff1f1", "#c62828", ` stroke-dasharray="6 4"`
		case n.g.Status != Verified:
			fill, stroke, extra = "#fff1f1", "#c62828", ` stroke-width="3"`
		case n.g.Revoked || n.g.RevokedVia != "":
			fill, stroke = "#eeeeee", "#888888"
		case n.g.Stopped != "":
			fill, stroke, extra = "#fff8e1", "#c62828", ` stroke-width="2"`
		}
		fmt.Fprintf(b, "<g class=\"grant\" id=\"grant-%s\">", h(n.g.ID))
		bw := boxW
		for _, l := range lines[n.row] {
			bw = max(bw, textsafe.Width(textsafe.Text(l))*charW+20)
		}
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"6\" fill=\"%s\" stroke=\"%s\"%s/>", x, y, bw, boxH, fill, stroke, extra)
		for i, l := range lines[n.row] {
			fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" class=\"%s\">%s</text>", x+10, y+17+i*16, lineClass[i], h(l))
		}
		fmt.Fprintf(b, "</g>\n")
	}
	fmt.Fprintf(b, "</svg>\n")
}

func (r *Report) grantTable(b *bytes.Buffer) {
	fmt.Fprintf(b, "<table id=\"limits\">\n<thead><tr><th>grant</th><th>limit</th><th>max</th><th>reserved</th><th>consumed</th><th>charged</th><th>remaining</th></tr></thead>\n<tbody>\n")
	for _, g := range r.Grants {
		if g.Denied {
			continue
		}
		for _, l := range g.Limits {
			cls := ""
			if l.Remaining < 0 || l.Consumed > l.Reserved {
				cls = " class=\"over\""
			}
			fmt.Fprintf(b, "<tr%s><td><code>%s</code></td><td><code>%s</code></td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>\n",
				cls, h(g.ID), h(l.Key), l.Max, l.Reserved, l.Consumed, l.Charged, l.Remaining)
		}
	}
	fmt.Fprintf(b, "</tbody>\n</table>\n")
}

const pageCSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1d1d1f;margin:24px auto;max-width:1280px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;overflow-wrap:anywhere}
.meta{color:#555;margin:0 0 10px}.dim{color:#777}
.banner{padding:10px 14px;border-radius:6px;font-weight:600}.banner.ok{background:#e8f5e9;color:#1b5e20;border:1px solid #a5d6a7}
.banner.bad{background:#ffebee;color:#b71c1c;border:1px solid #ef9a9a}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e3e3e3;padding:5px 6px;text-align:left;vertical-align:top}
th{background:#f5f5f7;position:sticky;top:0}td.idx{text-align:right;font-variant-numeric:tabular-nums}td.time{white-space:nowrap;font-variant-numeric:tabular-nums}
tr.denied td{background:#fff5f5}tr.denied strong{color:#c62828}tr.trust td{color:#555}
tr.st-failed td{background:#ffe0e0}tr.st-failed td.status{color:#b71c1c;font-weight:700}tr.st-unverified td.status{color:#8d6e00;font-weight:600}
.why{color:#8a1c1c;font-size:12px;margin-top:2px}.result{color:#1b5e20}td.path{font-size:12px}
ul.attention{list-style:none;padding:0}ul.attention li{padding:4px 0;border-bottom:1px dotted #ddd}
.tag{display:inline-block;min-width:90px;font-size:11px;font-weight:700;text-transform:uppercase;color:#8d6e00}
li.verification .tag,li.escalation .tag{color:#c62828}li.note .tag{color:#555}
svg{display:block;margin:8px 0 16px;max-width:100%;height:auto}svg text{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#1d1d1f}
svg text.t1{font-weight:700}svg text.t3{fill:#8a1c1c}
tr.over td{color:#b71c1c;font-weight:600}.bad{color:#c62828}
footer{margin-top:28px;color:#555;font-size:12px}
.banner.stopped{background:#fff3e0;color:#8a3b00;border:1px solid #ffb74d;margin-top:8px}
.detail{font-size:12px;color:#333;margin-top:2px}.detail .label{color:#777}
code.actor{overflow-wrap:normal;word-break:normal;white-space:nowrap}
@media print{body{margin:0;max-width:none;font-size:11px;color:#000}th{position:static}
tr{break-inside:avoid}h2{break-after:avoid}a{color:inherit;text-decoration:none}
.banner{border:2px solid #000;background:none;color:#000}tr.denied td,tr.st-failed td{background:none}
code.actor{white-space:normal}}
`

// shortTime is the time of day of an RFC 3339 time, to the millisecond
// ("14:02:07.123"); the page shows the whole time on hover.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("15:04:05.000")
}

// breakable escapes a name for HTML and lets it break only after a / or
// a : (agent:planner/booker), never inside a word.
func breakable(s string) string {
	out := h(s)
	out = strings.ReplaceAll(out, "/", "/<wbr>")
	return strings.ReplaceAll(out, ":", ":<wbr>")
}
