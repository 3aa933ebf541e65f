package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
)

func init() { register(auditCommand) }

// ledgerFetcher serves a ledger's committed tiles and entry bundles in the
// tlog-tiles layout, so that an audit of a data folder reads exactly what
// an export would hold.
type ledgerFetcher struct{ l *ledger.Ledger }

func (f ledgerFetcher) Fetch(_ context.Context, path string) ([]byte, error) {
	if path == "checkpoint" {
		return f.l.Head().Checkpoint, nil
	}
	t, err := merkle.ParseTilePath(path)
	if err != nil {
		return nil, err
	}
	var data []byte
	if t.Entries {
		data, err = f.l.EntryBundle(t.Index, t.Width)
	} else {
		data, err = f.l.Tile(t.Level, t.Index, t.Width)
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	return data, err
}

// tilesFetcher reads an exported log from a folder or a URL.
func tilesFetcher(loc string) audit.Fetcher {
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		return &audit.HTTP{Base: loc, UserAgent: "custody/" + version()}
	}
	return audit.Dir(loc)
}

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:      "audit",
		Usage:     "check a whole log: every tile, the root, every envelope and every decision",
		UsageText: "custody audit [--dir D | --tiles DIR|URL --log-key VKEY | --ledger URL] [--json]",
		Description: `Audits a whole log: the ledger in --dir, or a static export (custody export)
in a folder or at a URL given with --tiles, which needs no database.

  - the checkpoint's signature against the log key (the ledger's own, or
    --log-key);
  - every hash tile and the root, recomputed from the leaves and compared
    with the stored tiles and the checkpoint;
  - every decision re-run from GENESIS with the ledger's decision function:
    every envelope's signature, an accepted statement that should have
    been denied, a DENIAL that was not justified, back-links, trust heads,
    acceptance times, each key's seq across the whole log and the
    uniqueness of every id (what a bundle cannot show);
  - for a ledger, the stored authority state against the state the replay
    derives, record by record.

It keeps going after a finding and reports them all, each naming the
entry, tile or record. After a decision finding the replay stops (the
engine's state is then unspecified) but the tree and envelope checks go
on. Outcomes above their reserve and pending receipts with no outcome are
listed as flags: the ledger accepts them by design.

A progress line with rate and ETA is drawn on standard error when it is a
terminal.

Exit codes: 0 ok (clean), 4 verification failed (findings), 1 error, 2 usage,
5 unavailable (the server or database could not be reached).

Example:

   custody audit --dir ./custody-data
   custody export --dir ./custody-data --tiles ./public/log
   custody audit --tiles ./public/log --log-key "$(custody checkpoint --dir ./custody-data --verifier-key)"`,
		Flags: []cli.Flag{
			dirFlag(),
			locFlag(location.Store, ""),
			locFlag(location.Tiles, "audit an exported log in this `FOLDER` (or at this http(s) URL) instead of a ledger"),
			locFlag(location.Ledger, "audit the tiles a custody server at this `URL` serves ($CUSTODY_LEDGER)"),
			logKeyFlag("the log's checkpoint verifier key (`VKEY`), or a file holding it; required with --tiles, and with --ledger the server's own is used on first use"),
			&cli.IntFlag{Name: "max-flags", Value: 100, Usage: "list at most this many flags (all are counted)"},
			policyFlag(),
			jsonFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			policy, err := policyArg(c)
			if err != nil {
				return err
			}
			opts := audit.Options{MaxFlags: int(c.Int("max-flags")), Policy: policy}
			var fetcher audit.Fetcher
			loc, err := resolveLocation(c)
			if err != nil {
				return err
			}
			switch loc.Kind {
			case location.Tiles:
				vkey, err := verifierKeyArg(c, "log-key")
				if err != nil {
					return err
				}
				opts.VerifierKey, fetcher = vkey, tilesFetcher(loc.Value)
			case location.Ledger:
				vkey, err := optionalLogKey(c)
				if err != nil {
					return err
				}
				cl, err := remotelog.Client(ctx, loc.Value, vkey, 4)
				if err != nil {
					return fmt.Errorf("audit: %w", err)
				}
				opts.VerifierKey, fetcher = cl.VerifierKey(), tilesFetcher(loc.Value)
			default:
				if policy != nil {
					return usage(c, "--policy goes with --tiles or --ledger: a ledger's data folder keeps no witness cosignatures (a server gathers them as it serves)")
				}
				l, err := openLedgerAt(c, loc, true)
				if err != nil {
					if errors.Is(err, ledger.ErrLocked) {
						return fmt.Errorf("audit: %w; if a server (custody serve) holds it, audit what it serves: custody audit --ledger http://HOST:PORT, or --tiles http://HOST:PORT --log-key VKEY", err)
					}
					if errors.Is(err, ledger.ErrDamaged) || errors.Is(err, ledger.ErrRolledBack) {
						return &exitErr{code: exitVerify, err: fmt.Errorf("audit: %w", err)}
					}
					return err
				}
				defer l.Close()
				opts.VerifierKey = l.VerifierKey()
				if c.IsSet("log-key") {
					if opts.VerifierKey, err = verifierKeyArg(c, "log-key"); err != nil {
						return err
					}
				}
				if d := l.Damage(); d != nil {
					return &exitErr{code: exitVerify, err: fmt.Errorf("audit: %w", d)}
				}
				head := l.Head()
				if head.Checkpoint == nil {
					return fmt.Errorf("audit: the ledger has no checkpoint yet")
				}
				opts.Checkpoint, opts.State, fetcher = head.Checkpoint, l.StateRecords, ledgerFetcher{l}
			}
			stderr := c.Root().ErrWriter
			var bar *progress
			if isTerminal(stderr) {
				bar = &progress{w: stderr}
				start := time.Now()
				opts.Progress = func(done, total uint64) {
					bar.show(done == total, "%s", progressLine(done, total, time.Since(start)))
				}
			}
			rep, err := audit.Run(ctx, fetcher, opts)
			bar.clear()
			if err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				err = writeJSON(w, rep)
			} else {
				err = writeAuditText(w, rep)
			}
			if err != nil {
				return err
			}
			if !rep.Clean() {
				return &exitErr{code: exitVerify, quiet: true}
			}
			return nil
		},
	}
}

// progressLine is "auditing 12,345/1,000,000 entries  1.2%  25,100/s  ETA 39s".
func progressLine(done, total uint64, elapsed time.Duration) string {
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

func writeAuditText(w io.Writer, r *audit.Report) error {
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
