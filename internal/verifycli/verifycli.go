// Package verifycli is the `verify` command: it checks custody evidence
// offline with package verify and nothing else, so that both the full
// custody binary and the verifier-only custody-verify binary can carry it
// without the ledger or Badger.
//
// # Exit status
//
// custody's one table (package exitcode):
//
//	0  ok: the evidence is valid
//	4  verification failed: the evidence is invalid (the verdict says which check failed)
//	1  error: the input is unusable (unreadable file, not a bundle, bad key)
//	2  usage
//
// Errors come back from the command's Action as *ExitError, which carries
// the status; the root command decides how to exit (see Exit).
package verifycli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/internal/exitcode"
	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/internal/version"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/verify"
	"github.com/custodylog/custody/witness"
)

// Exit statuses.
const (
	ExitValid    = exitcode.OK
	ExitUnusable = exitcode.Error
	ExitUsage    = exitcode.Usage
	ExitInvalid  = exitcode.Verification
)

// ExitError is an error with the process exit status it calls for. It
// satisfies urfave/cli's ExitCoder, so a root command without its own
// ExitErrHandler prints it and exits with Code.
type ExitError struct {
	Code int
	Err  error
	// JSON says the command already wrote its answer as JSON on standard
	// output (a verdict, or the error object of --json), so a caller
	// printing errors as JSON adds nothing there.
	JSON bool
}

// WroteJSON reports whether the command already wrote its JSON answer.
func (e *ExitError) WroteJSON() bool { return e.JSON }

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode implements cli.ExitCoder.
func (e *ExitError) ExitCode() int { return e.Code }

// ErrInvalid is the error of an invalid verdict (exit status 4); the
// verdict itself has been written to the command's output.
var ErrInvalid = errors.New("the evidence does not verify")

func usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

func unusable(err error) error {
	return &ExitError{Code: ExitUnusable, Err: err}
}

// Exit turns the error a command returned into an exit status, printing
// it to stderr prefixed with prog. Errors that are not *ExitError come from
// flag parsing and are usage errors.
func Exit(err error, prog string, stderr io.Writer) int {
	if err == nil {
		return ExitValid
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitUsage
}

const tlogProofHeader = "c2sp.org/tlog-proof@v1"

// Command returns the `verify` command for the custody CLI.
func Command() *cli.Command { return newCommand("verify", "custody verify") }

// Standalone returns the command as the root of the custody-verify binary:
// named custody-verify, and returning its errors instead of exiting, so
// that main can pass them to Exit.
func Standalone() *cli.Command {
	c := newCommand("custody-verify", "custody-verify")
	c.Version = version.String()
	c.ExitErrHandler = func(context.Context, *cli.Command, error) {}
	return c
}

func newCommand(name, prog string) *cli.Command {
	// Each command has its own flags: one flag value must not be parsed by
	// two commands.
	keyFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "log-key", Local: true, TakesFile: true,
			Usage: "the log's checkpoint verifier key (`VKEY`: <origin>+<hash>+<key>), or a file holding it"}
	}
	jsonFlag := func() cli.Flag { return &cli.BoolFlag{Name: "json", Local: true, Usage: "print the verdict as JSON"} }
	policyFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "policy", Local: true, TakesFile: true,
			Usage: "a witness policy `FILE` (Tessera's grammar): require its quorum's cosignatures on the checkpoint"}
	}
	tilesFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "tiles", Local: true, TakesFile: true,
			Usage: "the published log (an http(s) `URL` of a bucket or CDN, or an export folder): require its checkpoint to extend the proof's"}
	}
	onUsage := func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
		return usagef("%v (see %s --help)", err, prog)
	}
	consistency := &cli.Command{
		Name:      "consistency",
		Usage:     "check that a newer checkpoint extends an older one",
		ArgsUsage: "OLD NEW",
		UsageText: prog + " consistency OLD NEW --proof FILE --log-key VKEY [--json]",
		Description: strings.TrimSpace(`
OLD and NEW are checkpoint files (signed notes) of the same log. FILE holds
the RFC 6962 consistency proof between their sizes, one base64 hash per
line, as custody prints it. Both checkpoints must be signed by the log key;
equal sizes must have equal roots; a newer checkpoint smaller than the
older is a rollback.

Example:

  ` + prog + ` consistency checkpoint.old checkpoint.new \
      --proof consistency.proof --log-key log.vkey`),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "proof", Local: true, Usage: "the consistency proof `FILE`", TakesFile: true},
			keyFlag(), jsonFlag(),
		},
		OnUsageError: onUsage,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runConsistency(cmd, prog)
		},
	}
	return &cli.Command{
		Name:      name,
		Usage:     "verify a bundle or tlog-proof offline, with only the log's public key",
		ArgsUsage: "BUNDLE",
		UsageText: prog + " BUNDLE --log-key VKEY [--policy FILE] [--tiles URL|DIR] [--json]\n" + prog + " consistency OLD NEW --proof FILE --log-key VKEY [--json]",
		Description: strings.TrimSpace(`
BUNDLE is a bundle file made by custody prove (custody-bundle/v1), or a
C2SP tlog-proof file (detected by its first line, ` + tlogProofHeader + `);
- reads standard input. VKEY is the log's signed-note verifier key, given
as the string itself or as a file holding it.

For a bundle, the verifier checks the checkpoint signature, every inclusion
proof, the trust chain and the workflow's back-links, and re-runs the
ledger's decision function over every entry: a log that admitted what it
should have refused is caught, and the verdict names the entry and the
rule. A tlog-proof proves inclusion of one entry only.

With --policy FILE (a witness policy: witness NAME VKEY [URL], group NAME
N|any|all MEMBER..., quorum NAME, as Tessera reads it), the checkpoint must
also carry valid cosignatures (C2SP tlog-cosignature) of the policy's
quorum; the verdict names each witness that cosigned and when. A
checkpoint published before its witnesses answered is rejected, and the
verdict says so.

With --tiles URL (a published log: a bucket or CDN serving C2SP
tlog-tiles, custody serve --publish, or a folder from custody export), the
published checkpoint must verify under the same key and extend the one the
proof was made under: the verifier computes the consistency proof itself
from the published tiles with plain GETs. A published log that has
forked from, or rolled back past, the proof's checkpoint makes the verdict
invalid (check "published").

Example:

  ` + prog + ` receipt.bundle.json --log-key log.vkey
  ` + prog + ` receipt.bundle.json --log-key 'example.com/custody+1a2b3c4d+AU...'
  ` + prog + ` receipt.tlog-proof --log-key log.vkey
  ` + prog + ` receipt.tlog-proof --log-key log.vkey --tiles https://cdn.example/log
  ` + prog + ` receipt.bundle.json --log-key log.vkey --policy witnesses.policy
  ` + prog + ` workflow.bundle.json --log-key log.vkey --json | jq .valid
  ` + prog + ` consistency checkpoint.old checkpoint.new --proof consistency.proof --log-key log.vkey

Exit codes: 0 ok (valid), 4 verification failed (invalid), 1 error
(unusable input), 2 usage.`),
		Flags:                  []cli.Flag{keyFlag(), policyFlag(), tilesFlag(), jsonFlag()},
		Commands:               []*cli.Command{consistency},
		OnUsageError:           onUsage,
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runVerify(ctx, cmd, prog)
		},
	}
}

// checkPublished adds the check "published": the log published at loc
// (C2SP tlog-tiles over HTTP, or a folder) serves a checkpoint that
// extends cp, proved from its tiles.
func checkPublished(ctx context.Context, v *verify.Verdict, loc, vkey string, cp []byte) error {
	var f audit.Fetcher = audit.Dir(loc)
	if strings.HasPrefix(loc, "http://") || strings.HasPrefix(loc, "https://") {
		f = &audit.HTTP{Base: strings.TrimRight(loc, "/"), UserAgent: "custody-verify"}
	}
	r, err := audit.Watch(ctx, f, vkey, cp)
	if err != nil {
		return fmt.Errorf("--tiles %s: %w", textsafe.Text(loc), err)
	}
	c := verify.Check{Name: "published", OK: !r.Alert}
	if r.Alert {
		c.Detail = fmt.Sprintf("the log published at %s does not extend the proof's checkpoint (%s): %s", textsafe.Text(loc), r.Outcome, r.Detail)
		v.Valid = false
	} else {
		c.Detail = fmt.Sprintf("the log published at %s (size %d) extends the proof's checkpoint (size %d)", textsafe.Text(loc), r.Size, r.OldSize)
	}
	v.Checks = append(v.Checks, c)
	return nil
}

func runVerify(ctx context.Context, cmd *cli.Command, prog string) error {
	args := cmd.Args().Slice()
	if len(args) != 1 {
		return usagef("want one BUNDLE argument, got %d (see %s --help)", len(args), prog)
	}
	vkey, err := logKey(cmd, prog)
	if err != nil {
		return err
	}
	policy, err := readPolicy(cmd)
	if err != nil {
		return err
	}
	data, err := readInput(cmd, args[0])
	if err != nil {
		return emitUnusable(cmd, err)
	}
	var v *verify.Verdict
	var checkpoint []byte
	if line, _, _ := bytes.Cut(data, []byte("\n")); string(line) == tlogProofHeader {
		v, err = verify.VerifyTLogProof(data, vkey)
		checkpoint = verify.TLogProofCheckpoint(data)
	} else {
		var b *verify.Bundle
		b, err = verify.ParseBundle(data)
		if err != nil {
			return emitUnusable(cmd, fmt.Errorf("%s: %w", args[0], err))
		}
		v, err = verify.VerifyBundle(b, vkey)
		checkpoint = []byte(b.Checkpoint)
	}
	if err != nil {
		return emitUnusable(cmd, fmt.Errorf("%s: %w", args[0], err))
	}
	if policy != nil && v.Valid {
		verify.CheckWitnesses(v, checkpoint, policy)
	} else if policy == nil {
		v.Notes = append(v.Notes, UnwitnessedNote(checkpoint, v.Origin))
	}
	if loc := flagString(cmd, "tiles"); loc != "" && v.Valid {
		if err := checkPublished(ctx, v, loc, vkey, checkpoint); err != nil {
			return emitUnusable(cmd, err)
		}
	}
	return emit(cmd, v)
}

// UnwitnessedNote says, for a verdict without --policy, that the
// checkpoint's cosignature lines were not checked, and how many there
// are: a valid verdict must not read as "witnessed".
func UnwitnessedNote(checkpoint []byte, origin string) string {
	n := 0
	if _, sigs, ok := bytes.Cut(checkpoint, []byte("\n\n")); ok {
		for _, line := range strings.Split(string(sigs), "\n") {
			name, _, ok := strings.Cut(strings.TrimPrefix(line, "\u2014 "), " ")
			if ok && strings.HasPrefix(line, "\u2014 ") && name != origin {
				n++
			}
		}
	}
	if n == 0 {
		return "witness cosignatures not checked (no --policy): the checkpoint carries none"
	}
	return fmt.Sprintf("witness cosignatures not checked (no --policy): the checkpoint carries %d signature line(s) besides the log's, verified by nobody here; give --policy FILE to require a quorum", n)
}

// readPolicy reads --policy, if given.
func readPolicy(cmd *cli.Command) (*witness.Policy, error) {
	name := flagString(cmd, "policy")
	if name == "" {
		return nil, nil
	}
	p, err := ReadPolicy(name)
	if err != nil {
		return nil, emitUnusable(cmd, fmt.Errorf("--policy %w", err))
	}
	return p, nil
}

// ReadPolicy reads a witness policy file (the grammar of package witness).
func ReadPolicy(name string) (*witness.Policy, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	p, err := witness.ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", textsafe.Text(name), err)
	}
	return p, nil
}

func runConsistency(cmd *cli.Command, prog string) error {
	args := cmd.Args().Slice()
	if len(args) != 2 {
		return usagef("want OLD and NEW checkpoint arguments, got %d (see %s consistency --help)", len(args), prog)
	}
	if cmd.String("proof") == "" {
		return usagef("--proof FILE is required (see %s consistency --help)", prog)
	}
	vkey, err := logKey(cmd, prog)
	if err != nil {
		return err
	}
	var in [3][]byte
	for i, name := range []string{args[0], args[1], cmd.String("proof")} {
		if in[i], err = readInput(cmd, name); err != nil {
			return emitUnusable(cmd, err)
		}
	}
	hashes, err := verify.ParseHashes(in[2])
	if err != nil {
		return emitUnusable(cmd, fmt.Errorf("%s: %w", cmd.String("proof"), err))
	}
	v, err := verify.VerifyConsistency(in[0], in[1], hashes, vkey)
	if err != nil {
		return emitUnusable(cmd, err)
	}
	return emit(cmd, v)
}

// logKey reads --log-key: a verifier key, or a file holding one or the
// log's key set.
func logKey(cmd *cli.Command, prog string) (string, error) {
	arg := flagString(cmd, "log-key")
	if arg == "" {
		return "", usagef("--log-key VKEY is required: the log's checkpoint verifier key, or a file holding it (see %s --help)", prog)
	}
	k, err := ReadKeySet(arg)
	if err != nil {
		return "", emitUnusable(cmd, fmt.Errorf("--log-key %w", err))
	}
	return k, nil
}

// ReadKeySet reads the log's checkpoint keys as a flag gives them: a
// signed-note verifier key (<origin>+<hash>+<key>), or a file holding one,
// or holding the log's key set after a checkpoint key rotation (one key a
// line, retired keys with max_size=N root=R). It returns the set's text.
func ReadKeySet(arg string) (string, error) {
	arg = strings.TrimSpace(arg)
	if ks, err := merkle.ParseKeySet(arg); err == nil {
		return ks.String(), nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", fmt.Errorf("%q is neither a verifier key nor a readable file: %v", textsafe.Text(arg), err)
	}
	ks, err := merkle.ParseKeySet(string(data))
	if err != nil {
		return "", fmt.Errorf("file %s does not hold a signed-note verifier key (<origin>+<hash>+<key>), or a key set of them one a line: %v", textsafe.Text(arg), err)
	}
	return ks.String(), nil
}

// readInput reads a named file, or standard input for "-".
func readInput(cmd *cli.Command, name string) ([]byte, error) {
	if name == "-" {
		r := cmd.Root().Reader
		if r == nil {
			r = os.Stdin
		}
		return io.ReadAll(r)
	}
	return os.ReadFile(name)
}

func stdout(cmd *cli.Command) io.Writer {
	if w := cmd.Root().Writer; w != nil {
		return w
	}
	return os.Stdout
}

// emit writes the verdict and returns the error its validity calls for.
func emit(cmd *cli.Command, v *verify.Verdict) error {
	w := stdout(cmd)
	if flagBool(cmd, "json") {
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return unusable(err)
		}
		w.Write(append(out, '\n'))
	} else {
		v.WriteText(w)
	}
	if v.Valid {
		return nil
	}
	err := ErrInvalid
	if f := v.Failure(); f != nil {
		err = fmt.Errorf("%w: %s: %s", ErrInvalid, f.Name, f.Detail)
	}
	return &ExitError{Code: ExitInvalid, Err: err, JSON: flagBool(cmd, "json")}
}

// emitUnusable reports unusable input; with --json it also writes
// {"error": ..., "exit_code": 1, "kind": "error", "unusable": true}, the
// error object every custody command prints, so that a script reading
// stdout sees it.
func emitUnusable(cmd *cli.Command, err error) error {
	if flagBool(cmd, "json") {
		out, _ := json.Marshal(struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
			Kind     string `json:"kind"`
			Unusable bool   `json:"unusable"`
		}{err.Error(), ExitUnusable, exitcode.Kind(ExitUnusable), true})
		stdout(cmd).Write(append(out, '\n'))
		return &ExitError{Code: ExitUnusable, Err: err, JSON: true}
	}
	return unusable(err)
}

// hasFlag reports whether c itself defines the named flag.
func hasFlag(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// flagString reads a flag given to cmd or, as in `verify --log-key K
// consistency ...`, to the command above it.
func flagString(cmd *cli.Command, name string) string {
	for _, c := range cmd.Lineage() {
		if hasFlag(c, name) && c.IsSet(name) {
			return c.String(name)
		}
	}
	return ""
}

func flagBool(cmd *cli.Command, name string) bool {
	for _, c := range cmd.Lineage() {
		if hasFlag(c, name) && c.IsSet(name) {
			return c.Bool(name)
		}
	}
	return false
}
