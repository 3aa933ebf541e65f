// Package ledgercmd holds the commands that make a ledger and read what it
// holds: init, append, get, checkpoint, proof, export, prove, and logs (the
// logs of a database). What they do is in internal/submit, internal/location,
// package ledger and internal/remotelog; these are the flags, their help and
// the printing.
package ledgercmd

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/author"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/entryview"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/submit"
	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/publish"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// InitCommand is `custody init`.
func InitCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "create a ledger in a data folder",
		UsageText: "custody init --dir D --origin ORIGIN [--admin-name N] [--admin-key FILE] [--log-private-key FILE] [--max-depth N] [--clock-skew 5m] [--max-ttl 720h] [--json]\n" +
			"   custody init --store postgres://... [--log NAME] --origin ORIGIN [...]",
		Description: `Creates a ledger: its Badger database, and GENESIS as entry 0, signed by the
admin key, naming the log key that signs checkpoints and the log's
parameters. The origin names the log in every statement and checkpoint (use
a domain you control, like example.com/custody). Keys you do not give are
generated into D/keys with mode 0600; keep the admin key offline. Prints the
checkpoint verifier key, which is all an auditor needs.

In a PostgreSQL database (--store), one database holds any number of logs:
the default log, and logs with names (--log NAME, or $CUSTODY_LOG), each in a
schema of its own with its own origin, keys and sequencer lease. init
--log NAME creates the log NAME; an origin another log of the database has
is refused. custody logs lists them; every command takes --log to choose
one.

Example:

   custody init --dir ./custody-data --origin example.com/custody --admin-name admin
   custody init --store postgres://custody@db/custody --log payments --origin example.com/payments`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
			&cli.StringFlag{Name: "origin", Usage: "the log's origin, like example.com/custody", Required: true},
			&cli.StringFlag{Name: "admin-name", Value: "admin", Usage: "the admin key's name"},
			&cli.StringFlag{Name: "admin-key", Usage: "use this private key as the admin key (default: generate D/keys/admin.key)", TakesFile: true},
			&cli.StringFlag{Name: "log-private-key", Usage: "use this private key `FILE` as the log key that signs checkpoints (default: generate D/keys/log.key)", TakesFile: true},
			&cli.IntFlag{Name: "max-depth", Value: statement.DefaultMaxDepth, Usage: "deepest delegation chain (1..16)"},
			&cli.DurationFlag{Name: "clock-skew", Value: statement.DefaultClockSkewSeconds * time.Second, Usage: "how far a statement's timestamp may be from the ledger's clock"},
			&cli.DurationFlag{Name: "max-ttl", Value: statement.DefaultMaxTTLSeconds * time.Second, Usage: "the longest ttl a grant may have"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			loc, err := clikit.ResolveNoArgs(c)
			if err != nil {
				return err
			}
			dir := loc.Value
			o := ledger.InitOptions{AdminName: c.String("admin-name"), MaxDepth: int64(c.Int("max-depth"))}
			if o.MaxDepth < 1 || o.MaxDepth > 16 {
				return clikit.Usage(c, "--max-depth %d: want 1..16", o.MaxDepth)
			}
			if o.ClockSkewSeconds, err = author.Seconds("clock-skew", c.Duration("clock-skew")); err != nil {
				return clikit.Usage(c, "%v", err)
			}
			if o.MaxTTLSeconds, err = author.Seconds("max-ttl", c.Duration("max-ttl")); err != nil {
				return clikit.Usage(c, "%v", err)
			}
			adminFile := filepath.Join(dir, ledger.AdminKeyFile)
			generated := false // the admin key was generated here, into a file of the current folder
			if f := c.String("admin-key"); f != "" {
				if o.AdminKey, err = keyfile.ReadPrivate(f); err != nil {
					return fmt.Errorf("init: admin key: %w", err)
				}
				adminFile = f
			} else if ledger.IsStoreURL(dir) {
				// A log in a database keeps only what its servers need
				// there; the admin key goes to a file here, to keep offline.
				adminFile = "custody-admin.key"
				if loc.Log != "" {
					adminFile = "custody-admin-" + loc.Log + ".key"
				}
				priv, err := keyfile.Generate(adminFile, nil, false)
				if err != nil {
					return fmt.Errorf("init: writing the new admin key: %w (give one with --admin-key)", err)
				}
				o.AdminKey, generated = priv, true
			}
			logFile := filepath.Join(dir, ledger.LogKeyFile)
			if ledger.IsStoreURL(dir) {
				logFile = ledger.LogKeyFile + " (in the database)"
			}
			if f := c.String("log-private-key"); f != "" {
				if o.LogKey, err = keyfile.ReadPrivate(f); err != nil {
					return fmt.Errorf("init: log key: %w", err)
				}
				if logFile, err = filepath.Abs(f); err != nil {
					return err
				}
				o.LogKeyFile = logFile
			}
			o.Options.Passphrase = sign.Passphrase("passphrase for " + logFile + ": ")
			l, err := ledger.Init(dir, c.String("origin"), o)
			if err != nil {
				if generated {
					// Kept, not deleted: whether the log was created before
					// the error is for the operator to check, and a log
					// whose admin key is gone cannot be administered.
					return fmt.Errorf("init: %w (the admin key generated for it stays in %s: to try again with it, add --admin-key %s)", err, adminFile, adminFile)
				}
				return fmt.Errorf("init: %w", err)
			}
			defer l.Close()
			g, err := l.Entry(0)
			if err != nil {
				return err
			}
			gd := g.Statement.(*statement.GenesisDoc)
			adminPub, err := sign.ParsePublicKey(gd.AdminKey)
			if err != nil {
				return err
			}
			maxDepth, skew, maxTTL := gd.Params()
			out := InitInfo{Dir: dir, Log: loc.Log, Origin: l.Origin(), VerifierKey: l.VerifierKey(), AdminName: gd.Actor,
				AdminKeyFile: adminFile, AdminKeyID: sign.KeyID(adminPub), LogKeyFile: logFile,
				MaxDepth: maxDepth, ClockSkewSeconds: skew, MaxTTLSeconds: maxTTL, Size: l.Head().Size}
			if c.Bool("json") {
				return clikit.WriteJSON(c.Root().Writer, out)
			}
			w := c.Root().Writer
			fmt.Fprintf(w, "created ledger %s in %s\n", out.Origin, dir)
			fmt.Fprintf(w, "verifier key  %s\n", out.VerifierKey)
			fmt.Fprintf(w, "admin key     %s (name %s, key id %s)\n", adminFile, clikit.SafeText(out.AdminName), out.AdminKeyID)
			fmt.Fprintf(w, "log key       %s\n", logFile)
			fmt.Fprintf(w, "parameters    max_depth %d, clock_skew %s, max_ttl %s\n", maxDepth, time.Duration(skew)*time.Second, time.Duration(maxTTL)*time.Second)
			fmt.Fprintf(w, "\nNext steps:\n")
			fmt.Fprintf(w, "   custody key generate --out alice.key --name user:alice\n")
			where := "--" + string(loc.Kind)
			fmt.Fprintf(w, "   custody principal enroll %s %s --admin-key %s --name user:alice --public-key alice.key\n", where, dir, adminFile)
			fmt.Fprintf(w, "   custody key generate --out planner.key --name agent:planner\n")
			fmt.Fprintf(w, "   custody confirm %s %s --key alice.key --grantee agent:planner --grantee-key planner.key \\\n", where, dir)
			fmt.Fprintf(w, "       --workflow wf_1 --target airline_portal/account_123 --capability purchase --limit budget_usd=800 --ttl 15m\n")
			fmt.Fprintf(w, "Give auditors the verifier key above; keep %s offline.\n", adminFile)
			return nil
		},
	}
}

// InitInfo is what init prints with --json.
type InitInfo struct {
	Dir              string `json:"dir"`
	Log              string `json:"log,omitempty"` // the log's name in its database
	Origin           string `json:"origin"`
	VerifierKey      string `json:"verifier_key"`
	AdminName        string `json:"admin_name"`
	AdminKeyFile     string `json:"admin_key_file"`
	AdminKeyID       string `json:"admin_key_id"`
	LogKeyFile       string `json:"log_key_file"`
	MaxDepth         int64  `json:"max_depth"`
	ClockSkewSeconds int64  `json:"clock_skew_seconds"`
	MaxTTLSeconds    int64  `json:"max_ttl_seconds"`
	Size             uint64 `json:"size"`
}

// AppendCommand is `custody append`.
func AppendCommand() *cli.Command {
	return &cli.Command{
		Name:      "append",
		Usage:     "submit signed envelopes to the ledger",
		UsageText: "custody append --dir D [--parallel N] [--json] [FILE|-]",
		Description: `Reads DSSE envelopes, one JSON document per line (blank lines are skipped),
from FILE or standard input, submits them in order, and prints one line per
envelope: "accepted 12", "held 12 until T" (a pending receipt an approval
rule holds: logged, its step waits for people to approve it until T),
"denied 13 limit_exceeded: ..." (the ledger logged a DENIAL at index 13), or
"refused: ..." (not logged: malformed, or no known signer). Each answer comes after the entry is durable under a signed
checkpoint. Exits 3 if any envelope was denied or refused.

Envelopes are logged in input order, so each sees every earlier one; on a
local ledger up to 512 are in flight at once, so they are committed in
batches. Against a server (--ledger) they are sent one after another;
--parallel N keeps N in flight there, for independent envelopes only (no
envelope depending on another in the same input), since their order in the
log is then not guaranteed. Output stays in input order.

Example:

   custody append --dir ./custody-data envelopes.jsonl`,
		Flags: clikit.WithRemote(
			clikit.DirFlag(),
			&cli.IntFlag{Name: "parallel", Value: 1, Usage: "envelopes in flight at once (only for independent envelopes)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per line"},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := clikit.Args(c, 0, 1, "")
			if err != nil {
				return err
			}
			n := c.Int("parallel")
			if n < 1 || n > 4096 {
				return clikit.Usage(c, "--parallel %d: want 1..4096", n)
			}
			name := "-"
			if len(a) == 1 {
				name = a[0]
			}
			in, total, err := openInput(c, name)
			if err != nil {
				return fmt.Errorf("append: %w", err)
			}
			defer in.Close()
			l, err := clikit.OpenStore(ctx, c)
			if err != nil {
				return err
			}
			defer l.Close()
			var bar *clikit.Progress
			// On a terminal the output lines are the progress; redirected, a
			// large input gets a progress line on stderr instead.
			if clikit.IsTerminal(c.Root().ErrWriter) && !clikit.IsTerminal(c.Root().Writer) && (total < 0 || total > 1<<20) {
				bar = &clikit.Progress{W: c.Root().ErrWriter}
			}
			src, w, count := submit.NewInput(in, total), c.Root().Writer, 0
			bad, err := submit.All(ctx, l, src, int(n), func(a submit.Answer) error {
				count++
				if c.Bool("json") {
					b, err := json.Marshal(a)
					if err != nil {
						return err
					}
					fmt.Fprintf(w, "%s\n", textsafe.JSON(b))
				} else {
					fmt.Fprintln(w, appendText(a))
				}
				if pct := src.Percent(); pct >= 0 {
					bar.Show(false, "appended %d envelopes (%d%% of the input)", count, pct)
				} else {
					bar.Show(false, "appended %d envelopes", count)
				}
				return nil
			})
			bar.Clear()
			if err != nil {
				return fmt.Errorf("append: %w", err)
			}
			if bad > 0 {
				return clikit.Denied()
			}
			return nil
		},
	}
}

// openInput opens FILE or standard input and returns its size if known
// (-1 otherwise).
func openInput(c *cli.Command, name string) (io.ReadCloser, int64, error) {
	if name == "-" {
		return io.NopCloser(c.Root().Reader), -1, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return f, size, nil
}

func appendText(o submit.Answer) string {
	dup := ""
	if o.Duplicate {
		dup = " (duplicate: decided before)"
	}
	switch o.Verdict {
	case "accepted":
		return fmt.Sprintf("accepted %d%s", *o.Index, dup)
	case "held":
		return fmt.Sprintf("held %d until %s%s", *o.Index, o.ExpiresAt, dup)
	case "denied":
		return fmt.Sprintf("denied %d %s: %s%s", *o.Index, o.ReasonCode, clikit.SafeText(o.Reason), dup)
	default:
		return fmt.Sprintf("refused: line %d: %s: %s", o.Line, o.ReasonCode, clikit.SafeText(o.Reason))
	}
}

// GetCommand is `custody get`.
func GetCommand() *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "print one entry of the log",
		UsageText: "custody get --dir D (--index N | --id ID) [--json]",
		Description: `Prints the entry at an index, or the entry of a statement id: when and in
which order it was logged, its kind, signer and workflow, its back-links
(prev_in_workflow, the previous entry of its workflow; trust_head, the latest
GENESIS/PRINCIPAL entry it relied on), and the statement itself. For a DENIAL
it also prints the decision and the denied statement. Control and
bidirectional-override characters in free text are printed escaped.

Example:

   custody get --dir ./custody-data --id confirm_42c1`,
		Flags: clikit.WithRemote(
			clikit.DirFlag(),
			&cli.Uint64Flag{Name: "index", Usage: "the entry's index"},
			&cli.StringFlag{Name: "id", Usage: "a statement id (the entry of its statement or DENIAL)"},
			clikit.JSONFlag(),
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			if c.IsSet("index") == c.IsSet("id") {
				return clikit.Usage(c, "give exactly one of --index and --id")
			}
			l, err := clikit.OpenStoreRO(ctx, c)
			if err != nil {
				return err
			}
			defer l.Close()
			var e *ledger.Entry
			if c.IsSet("id") {
				e, err = l.EntryByID(c.String("id"))
			} else {
				e, err = l.Entry(c.Uint64("index"))
			}
			if err != nil {
				return fmt.Errorf("get: %w", err)
			}
			out := entryview.Describe(e)
			if c.Bool("json") {
				return clikit.WriteJSON(c.Root().Writer, out)
			}
			out.WriteText(c.Root().Writer, l.Head().Size)
			return nil
		},
	}
}

// CheckpointCommand is `custody checkpoint`.
func CheckpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "print the latest signed checkpoint, or the verifier key",
		UsageText: "custody checkpoint --dir D [--verifier-key] [--json]",
		Description: `Prints the log's latest checkpoint: a C2SP signed note holding the origin,
the tree size and the root hash, signed by the log key. Every answer the
ledger gives is included under a checkpoint. With --verifier-key it prints the
signed-note verifier key instead, which is what an auditor needs to check
checkpoints offline; after a checkpoint key rotation (custody key
rotate-log) it prints the log's key set, one key a line, which --log-key
takes as a file.

Example:

   custody checkpoint --dir ./custody-data > checkpoint.txt
   custody checkpoint --dir ./custody-data --verifier-key > log.vkey`,
		Flags: clikit.WithRemote(
			clikit.DirFlag(),
			&cli.BoolFlag{Name: "verifier-key", Usage: "print the checkpoint verifier key (what --log-key takes) instead of the checkpoint"},
			clikit.JSONFlag(),
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.Bool("verifier-key") && !c.Bool("json") {
				// The key comes from the config and key files alone, so
				// that it prints from a damaged folder too.
				if loc, err := clikit.ResolveLocation(c); err == nil && loc.Kind == location.Dir {
					if _, err := clikit.Args(c, 0, 0, ""); err != nil {
						return err
					}
					vk, err := ledger.FolderVerifierKey(loc.Value, ledger.Options{
						Passphrase: sign.Passphrase("passphrase for the log key of " + loc.Value + ": ")})
					if err != nil {
						return fmt.Errorf("reading the verifier key%s: %w", loc.Why(), err)
					}
					_, err = fmt.Fprintln(c.Root().Writer, vk)
					return err
				}
			}
			return checkpointAction(ctx, c)
		},
	}
}

var checkpointAction = readAction(func(ctx context.Context, c *cli.Command, l clikit.LogStore) error {
	h := l.Head()
	w := c.Root().Writer
	var err error
	switch {
	case c.Bool("json"):
		return clikit.WriteJSON(w, CheckpointInfo{Origin: l.Origin(), Size: h.Size, Root: h.Root.String(),
			Checkpoint: string(h.Checkpoint), VerifierKey: l.VerifierKey()})
	case c.Bool("verifier-key"):
		_, err = fmt.Fprintln(w, l.VerifierKey())
	default:
		_, err = w.Write(h.Checkpoint)
	}
	return err
})

// CheckpointInfo is what checkpoint prints with --json.
type CheckpointInfo struct {
	Origin      string `json:"origin"`
	Size        uint64 `json:"size"`
	Root        string `json:"root"`
	Checkpoint  string `json:"checkpoint"`
	VerifierKey string `json:"verifier_key"`
}

// ProofCommand is `custody proof`.
func ProofCommand() *cli.Command {
	return &cli.Command{
		Name:  "proof",
		Usage: "print Merkle inclusion and consistency proofs",
		Description: `Proofs are RFC 6962 audit paths of base64 SHA-256 hashes, nearest sibling
first, as checkpoints and bundles use them.

Example:

   custody proof inclusion --dir ./custody-data --index 3
   custody proof consistency --dir ./custody-data --from 10 --to 20`,
		Commands: []*cli.Command{proofInclusionCommand(), proofConsistencyCommand()},
	}
}

func proofInclusionCommand() *cli.Command {
	return &cli.Command{
		Name:      "inclusion",
		Usage:     "prove an entry is in the tree",
		UsageText: "custody proof inclusion --dir D --index N [--size M] [--json]",
		Description: `Prints the inclusion proof of entry N in the tree of size M (default: the
latest checkpoint's size), one base64 hash per line. --json adds the leaf
hash, the root at that size and, for the latest size, the signed checkpoint,
so the proof can be checked offline.

Example:

   custody proof inclusion --dir ./custody-data --index 3 --json`,
		Flags: clikit.WithRemote(
			clikit.DirFlag(),
			&cli.Uint64Flag{Name: "index", Usage: "the entry's index", Required: true},
			&cli.Uint64Flag{Name: "size", Usage: "the tree size (default: the latest)"},
			clikit.JSONFlag(),
		),
		Action: readAction(func(ctx context.Context, c *cli.Command, l clikit.LogStore) error {
			head := l.Head()
			index, size := c.Uint64("index"), c.Uint64("size")
			if !c.IsSet("size") {
				size = head.Size
			}
			if size == 0 {
				return clikit.Usage(c, "--size must be at least 1")
			}
			proof, err := l.InclusionProof(index, size)
			if err != nil {
				return fmt.Errorf("proof inclusion: %w", err)
			}
			if !c.Bool("json") {
				return printHashes(c.Root().Writer, proof)
			}
			leaf, err := l.LeafBytes(index)
			if err != nil {
				return err
			}
			root, err := l.RootAt(size)
			if err != nil {
				return err
			}
			out := api.Inclusion{Index: index, Size: size, LeafHash: merkle.LeafHash(leaf).String(), Root: root.String(), Proof: hashStrings(proof)}
			if size == head.Size {
				out.Checkpoint = string(head.Checkpoint)
			}
			return clikit.WriteJSON(c.Root().Writer, out)
		}),
	}
}

func proofConsistencyCommand() *cli.Command {
	return &cli.Command{
		Name:      "consistency",
		Usage:     "prove an older tree is a prefix of a newer one",
		UsageText: "custody proof consistency --dir D --from A [--to B] [--json]",
		Description: `Prints the consistency proof between the trees of sizes A and B (default: the
latest size), one base64 hash per line: it shows that the log only appended
between the two checkpoints. --json adds both roots.

Example:

   custody proof consistency --dir ./custody-data --from 10 --to 20 --json`,
		Flags: clikit.WithRemote(
			clikit.DirFlag(),
			&cli.Uint64Flag{Name: "from", Usage: "the older tree size", Required: true},
			&cli.Uint64Flag{Name: "to", Usage: "the newer tree size (default: the latest)"},
			clikit.JSONFlag(),
		),
		Action: readAction(func(ctx context.Context, c *cli.Command, l clikit.LogStore) error {
			from, to := c.Uint64("from"), c.Uint64("to")
			if !c.IsSet("to") {
				to = l.Head().Size
			}
			proof, err := l.ConsistencyProof(from, to)
			if err != nil {
				return fmt.Errorf("proof consistency: %w", err)
			}
			if !c.Bool("json") {
				return printHashes(c.Root().Writer, proof)
			}
			r1, err := l.RootAt(from)
			if err != nil {
				return err
			}
			r2, err := l.RootAt(to)
			if err != nil {
				return err
			}
			return clikit.WriteJSON(c.Root().Writer, api.Consistency{From: from, To: to, FromRoot: r1.String(), ToRoot: r2.String(), Proof: hashStrings(proof)})
		}),
	}
}

func hashStrings(hs []merkle.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.String()
	}
	return out
}

func printHashes(w io.Writer, hs []merkle.Hash) error {
	for _, h := range hs {
		if _, err := fmt.Fprintln(w, h); err != nil {
			return err
		}
	}
	return nil
}

// ExportCommand is `custody export`.
func ExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write the log as static C2SP tlog-tiles files",
		UsageText: "custody export --dir D --tiles OUTDIR|s3://BUCKET/PREFIX [--json]",
		Description: `Writes the log, as of its latest checkpoint, into OUTDIR as a static C2SP
tlog-tiles tree (checkpoint, tile/<L>/<N>[.p/<W>], tile/entries/<N>[.p/<W>])
that any web server or CDN can serve to standard tlog clients. Files are
written atomically and the checkpoint last, so OUTDIR is always consistent.
Run it again to publish new entries: only new tiles are written. It refuses
an OUTDIR holding another log's checkpoint, or a newer one.

With --tiles s3://BUCKET/PREFIX it publishes to an S3-compatible bucket
instead, once, as custody serve --publish does continuously: each tile and
entry bundle the bucket's checkpoint lacks is written with If-None-Match: *
(never overwritten: an object with other bytes is an alarm, exit 1), then
the checkpoint. Credentials, region and endpoint come from the AWS SDK's
standard environment and files (AWS_ENDPOINT_URL_S3 for an S3-compatible
store, addressed path-style). Run only where no server publishes the log.

Example:

   custody export --dir ./custody-data --tiles ./public/log
   AWS_ENDPOINT_URL_S3=http://127.0.0.1:7070 custody export --dir ./custody-data --tiles s3://logs/prod`,
		Flags: []cli.Flag{
			clikit.DirFlag(),
			clikit.LocFlag(location.Store, ""),
			&cli.StringFlag{Name: "tiles", Usage: "the folder to write, or an s3://BUCKET/PREFIX to publish to", Required: true, TakesFile: true},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			l, err := clikit.OpenLedger(c, true)
			if err != nil {
				return err
			}
			defer l.Close()
			out := c.String("tiles")
			if publish.IsURL(out) {
				return exportBucket(ctx, c, l, out)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			var bar *clikit.Progress
			if clikit.IsTerminal(c.Root().ErrWriter) {
				bar = &clikit.Progress{W: c.Root().ErrWriter}
			}
			files := 0
			err = ledger.Export(l, out, func(done, total int) {
				files = total
				bar.Show(done == total, "exporting: %d/%d files", done, total)
			})
			bar.Clear()
			if err != nil {
				return err
			}
			h := l.Head()
			if c.Bool("json") {
				return clikit.WriteJSON(c.Root().Writer, map[string]any{"tiles": out, "origin": l.Origin(), "size": h.Size, "root": h.Root.String(), "files_written": files})
			}
			fmt.Fprintf(c.Root().Writer, "exported %s at size %d to %s (%d files)\n", l.Origin(), h.Size, out, files)
			return nil
		},
	}
}

// exportBucket publishes the log to an S3 bucket once.
func exportBucket(ctx context.Context, c *cli.Command, l *ledger.Ledger, u string) error {
	b, err := publish.Open(ctx, u)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	res, err := publish.New(l, b, publish.Options{}).Once(ctx)
	if err != nil {
		return err
	}
	h := l.Head()
	if c.Bool("json") {
		return clikit.WriteJSON(c.Root().Writer, map[string]any{"tiles": u, "origin": l.Origin(), "size": res.Size, "from": res.From,
			"root": h.Root.String(), "objects_written": res.Written, "objects_existing": res.Existing})
	}
	fmt.Fprintf(c.Root().Writer, "published %s at size %d to %s (from size %d; %d objects written, %d already there)\n",
		l.Origin(), res.Size, u, res.From, res.Written, res.Existing)
	return nil
}

// keyName returns the name bound to a key in the ledger.
func keyName(l clikit.LogStore, pub ed25519.PublicKey) (string, error) {
	rec, err := l.KeyBinding(sign.KeyID(pub))
	if err != nil {
		return "", err
	}
	if rec == nil {
		return "", nil
	}
	return rec.Name, nil
}

// readAction is the action of a reading command that takes no arguments:
// it opens the ledger (--dir or --ledger), runs f, and closes it.
func readAction(f func(ctx context.Context, c *cli.Command, l clikit.LogStore) error) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		if _, err := clikit.Args(c, 0, 0, ""); err != nil {
			return err
		}
		l, err := clikit.OpenStoreRO(ctx, c)
		if err != nil {
			return err
		}
		defer l.Close()
		return f(ctx, c, l)
	}
}
