package audit

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/custodylog/custody/internal/textsafe"
)

// Open is the fetcher of an exported log in a folder, or at an http(s)
// URL (fetched as userAgent).
func Open(loc, userAgent string) Fetcher {
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		return &HTTP{Base: loc, UserAgent: userAgent}
	}
	return Dir(loc)
}

// ProgressLine is "auditing 12,345/1,000,000 entries  1.2%  25,100/s  ETA 39s".
func ProgressLine(done, total uint64, elapsed time.Duration) string {
	pct := 100 * float64(done) / float64(max(total, 1))
	rate := float64(done) / max(elapsed.Seconds(), 1e-9)
	eta := "?"
	if rate > 0 && done < total {
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	} else if done >= total {
		eta = "0s"
	}
	const barW = 20
	fill := int(pct / 100 * barW)
	return fmt.Sprintf("auditing [%s%s] %s/%s entries %5.1f%%  %s/s  ETA %s",
		strings.Repeat("#", fill), strings.Repeat(".", barW-fill), thousands(done), thousands(total), pct, thousands(uint64(rate)), eta)
}

// thousands writes n with thousands separators.
func thousands(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// WriteText prints the report for people: the verdict, what was checked
// (checkpoint, witnesses, tree, decisions, state), then every finding and
// flag, wrapped at 80 columns, free text escaped (textsafe).
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "CLEAN"
	if !r.Clean() {
		verdict = fmt.Sprintf("%d FINDING(S)", len(r.Findings))
	}
	kv := func(label, text string) { wrapTo(&b, fmt.Sprintf("  %-11s ", label), textsafe.Text(text), 80) }
	wrapTo(&b, "", fmt.Sprintf("custody audit: %s at size %s: %s", textsafe.Text(r.Origin), thousands(r.Size), verdict), 80)
	cp := "signature verified under the log key"
	if !r.CheckpointVerified {
		cp = "SIGNATURE DOES NOT VERIFY"
	}
	kv("checkpoint", fmt.Sprintf("%s; root %s", cp, r.Root))
	if len(r.Witnessed) > 0 {
		var ws []string
		for _, s := range r.Witnessed {
			ws = append(ws, fmt.Sprintf("%s (%s) at %s", s.Witness, s.KeyName, s.Time.Format(time.RFC3339)))
		}
		kv("witnesses", "cosigned by "+strings.Join(ws, ", "))
	}
	tree := fmt.Sprintf("%s of %s entries read; %d tiles recomputed from the leaves and compared", thousands(r.Entries), thousands(r.Size), r.TilesChecked)
	if r.RootChecked {
		tree += "; root recomputed"
	}
	kv("tree", tree)
	dec := fmt.Sprintf("%s re-decided from GENESIS with the ledger's decision function (%s DENIALs re-derived)", thousands(r.Replayed), thousands(r.Denials))
	if r.ReplayStopped != nil {
		dec += fmt.Sprintf("; STOPPED at entry %d, %s later envelopes checked for signature only", *r.ReplayStopped, thousands(r.EnvelopesOnly))
	} else {
		dec += "; every envelope's signature, each key's seq across the log and every id's uniqueness included"
	}
	kv("decisions", dec)
	if r.StateRecords >= 0 {
		kv("state", fmt.Sprintf("%s stored records compared with the replay's", thousands(uint64(r.StateRecords))))
	} else {
		kv("state", "not compared (an export holds no state)")
	}
	kv("flags", fmt.Sprintf("%d listed: outcomes above their reserve, notes, and %d pending receipts with no outcome", len(r.Flags), r.OpenPendings))
	kv("time", fmt.Sprintf("%.2fs, %s entries/s", r.Seconds, thousands(uint64(r.Rate))))
	if len(r.Findings) > 0 {
		b.WriteString("\nFINDINGS\n")
		for _, f := range r.Findings {
			wrapTo(&b, "  - ", textsafe.Text(f.String()), 80)
		}
	}
	if len(r.Flags) > 0 {
		b.WriteString("\nFLAGS (agent behaviour the ledger accepts and flags)\n")
		for _, f := range r.Flags {
			wrapTo(&b, "  - ", textsafe.Text(f.String()), 80)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapTo writes text after lead, wrapped at width with continuation lines
// indented to lead's width. A word longer than the line is not broken.
func wrapTo(b *strings.Builder, lead, text string, width int) {
	pad := strings.Repeat(" ", len([]rune(lead)))
	line := lead
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && len([]rune(line))+1+len([]rune(word)) > width {
			b.WriteString(line + "\n")
			line, empty = pad, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	b.WriteString(line + "\n")
}
