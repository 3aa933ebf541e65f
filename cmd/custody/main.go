// Command custody is the command-line tool of the custody ledger: it makes
// keys, authors and signs statements, runs a ledger (in a data folder or a
// database) and serves it, gates MCP servers, and prints, proves, audits
// and replays what a log holds.
//
// The rules live in the packages it calls (statement, scope, authority,
// ledger, merkle, verify), and what each command does in a package tested
// on its own (internal/author, internal/submit, internal/location,
// internal/serving, ...: docs/ARCHITECTURE.md, "Where the CLI reads and
// writes"). The commands (their flags, help and actions) are packages of
// their own, internal/cmd/... and internal/verifycli, made with
// internal/clikit; this one lists them in one tree (newApp), applies the
// tree-wide conventions (configure) and maps errors to exit codes (runApp).
//
// # Exit codes
//
// One table for every command (package internal/exitcode):
//
//	0  ok
//	1  error (bad input, I/O)
//	2  usage (bad flags or arguments)
//	3  denied (an authority rule said no, or the ledger refused a submission)
//	4  verification failed (evidence, a proof or a server's answer)
//	5  unavailable: the server or database could not decide now (unreachable,
//	   a 503, a server that does not sequence the log, a database that is
//	   away); nothing was acknowledged, so try again or try another server
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/cmd/auditcmd"
	"github.com/custodylog/custody/internal/cmd/authorcmd"
	"github.com/custodylog/custody/internal/cmd/benchcmd"
	"github.com/custodylog/custody/internal/cmd/democmd"
	"github.com/custodylog/custody/internal/cmd/gatecmd"
	"github.com/custodylog/custody/internal/cmd/keycmd"
	"github.com/custodylog/custody/internal/cmd/ledgercmd"
	"github.com/custodylog/custody/internal/cmd/servecmd"
	"github.com/custodylog/custody/internal/cmd/signcmd"
	"github.com/custodylog/custody/internal/exitcode"
	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/internal/suggest"
	"github.com/custodylog/custody/internal/verifycli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the tool with args (args[0] is the program name) and returns the
// exit code. Standard input is os.Stdin; see runIO.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIO(ctx, args, os.Stdin, stdout, stderr)
}

// runIO is run with an explicit standard input.
func runIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runApp(ctx, newApp(stdin, stdout, stderr), args)
}

// runApp runs the command tree app with args and returns the exit code,
// printing the error, if any, on app's ErrWriter.
func runApp(ctx context.Context, app *cli.Command, args []string) int {
	stderr := app.ErrWriter
	err := app.Run(ctx, args)
	if err == nil {
		return clikit.ExitOK
	}
	code, quiet := clikit.ExitFail, false
	var ee *clikit.ExitError
	var coder interface{ ExitCode() int } // e.g. verifycli.ExitError
	switch {
	case errors.As(err, &ee):
		code, quiet = ee.Code, ee.Quiet
	case errors.As(err, &coder):
		code = coder.ExitCode()
	case clikit.Unavailable(err):
		code = clikit.ExitUnavailable
	case errors.Is(err, client.ErrUnverified):
		code = clikit.ExitVerify
	}
	if !quiet {
		fmt.Fprintf(stderr, "custody: %s\n", clikit.OneLine(err.Error()))
		if code == clikit.ExitUsage {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", usagePath(err, args))
		}
		var wrote interface{ WroteJSON() bool } // verifycli.ExitError
		if wantsJSON(args) && !(errors.As(err, &wrote) && wrote.WroteJSON()) {
			// A script that asked for JSON reads standard output: the
			// error is there too, as one object.
			clikit.WriteJSON(app.Writer, jsonError{Error: err.Error(), ExitCode: code, Kind: exitcode.Kind(code)})
		}
	}
	return code
}

// jsonError is what --json prints on standard output when a command fails
// with an error it did not print itself.
type jsonError struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
	Kind     string `json:"kind"` // exitcode.Kind: error, usage, denied, verification, unavailable
}

// wantsJSON reports whether args ask for --json (before a "--").
func wantsJSON(args []string) bool {
	for _, a := range args[1:] {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

func usagePath(err error, args []string) string {
	var u *clikit.UsageCmd
	if errors.As(err, &u) {
		return u.Path
	}
	return "custody"
}

// newApp builds the command tree. It is built afresh for every run: urfave
// keeps parsed flag values in the tree.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	app := &cli.Command{
		Name:  "custody",
		Usage: "a tamper-evident ledger of delegated authority for software agents",
		Description: `custody records who allowed a software agent to do what: people grant agents
bounded, revocable authority (confirm), agents hand narrower parts of it to
sub-agents (delegate), and before an irreversible step an agent writes a
receipt the ledger checks and makes durable (receipt). Every accepted
statement is a signed entry in a Merkle log with signed checkpoints, so
anyone with the log's public key can verify it offline.

Where every command reads and writes, one rule: a location flag you type
(--dir, --ledger, --store, --bundle, --tiles) wins, and two of them are a
usage error; otherwise the first set of $CUSTODY_LEDGER, $CUSTODY_STORE and
$CUSTODY_DIR, among those the command takes; otherwise ./custody-data.

` + exitcode.Summary() + `

Example:

   custody demo                      # the whole story in one second
   custody init --dir ./custody-data --origin example.com/custody
   custody get --dir ./custody-data --index 0`,
		Version:   clikit.Version(),
		Reader:    stdin,
		Writer:    stdout,
		ErrWriter: stderr,
		// Errors are printed once, by run, with their exit code.
		ExitErrHandler:        func(context.Context, *cli.Command, error) {},
		EnableShellCompletion: true,
		ConfigureShellCompletionCommand: func(c *cli.Command) {
			c.Hidden = false
			c.Usage = "print a shell completion script: bash, zsh or fish"
			c.Description = `Prints a script that completes custody's commands and flags in your shell.

Example:

   source <(custody completion bash)      # in ~/.bashrc
   source <(custody completion zsh)       # in ~/.zshrc
   custody completion fish > ~/.config/fish/completions/custody.fish`
		},
		Commands: []*cli.Command{
			keycmd.KeyCommand(),
			signcmd.SignCommand(),
			signcmd.ScopeCommand(),
			ledgercmd.InitCommand(),
			ledgercmd.AppendCommand(),
			ledgercmd.GetCommand(),
			ledgercmd.CheckpointCommand(),
			ledgercmd.ProofCommand(),
			ledgercmd.ExportCommand(),
			ledgercmd.ProveCommand(),
			authorcmd.PrincipalCommand(),
			authorcmd.ConfirmCommand(),
			authorcmd.DelegateCommand(),
			authorcmd.ReceiptCommand(),
			authorcmd.StopCommand(),
			authorcmd.ResumeCommand(),
			authorcmd.RevokeCommand(),
			democmd.DemoCommand(),
			democmd.VersionCommand(),
			authorcmd.ApproveCommand(),
			authorcmd.ApprovalsCommand(),
			auditcmd.AuditCommand(),
			benchcmd.BenchCommand(),
			gatecmd.GateCommand(),
			ledgercmd.LogsCommand(),
			auditcmd.ReplayCommand(),
			servecmd.ServeCommand(),
			verifycli.Command(),
			auditcmd.WatchCommand(),
		},
	}
	configure(app, "custody")
	return app
}

// configure applies the tree-wide conventions to cmd and its subcommands:
// usage errors exit 2, slice flags are repeated rather than split on commas
// (free text may hold commas), and a group without its own action rejects
// an unknown subcommand.
func configure(cmd *cli.Command, path string) {
	clikit.AddRenamedFlags(cmd, path)
	cmd.OnUsageError = func(_ context.Context, c *cli.Command, err error, _ bool) error {
		return &clikit.ExitError{Code: clikit.ExitUsage, Err: &clikit.UsageCmd{Path: path, Err: err}}
	}
	cmd.DisableSliceFlagSeparator = true
	if kinds := clikit.LocationKinds(cmd); len(kinds) > 0 {
		if (slices.Contains(kinds, location.Store) || slices.Contains(kinds, location.Ledger)) && !hasFlag(cmd, "log") {
			cmd.Flags = append(cmd.Flags, clikit.LogFlag())
		}
		heading := clikit.WhereCategory(kinds)
		for _, f := range cmd.Flags {
			if cf, ok := f.(cli.CategorizableFlag); ok && strings.HasPrefix(cf.GetCategory(), clikit.LocCategory) {
				cf.SetCategory(heading)
			}
		}
	}
	if len(cmd.Commands) > 0 && cmd.Action == nil {
		cmd.Action = func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				name := c.Args().First()
				msg := fmt.Sprintf("unknown command %q", name)
				if s := suggest.Closest(name, commandNames(c)); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				return &clikit.ExitError{Code: clikit.ExitUsage, Err: &clikit.UsageCmd{Path: path, Err: errors.New(msg)}}
			}
			if c.Root() == c {
				return cli.ShowRootCommandHelp(c)
			}
			return cli.ShowSubcommandHelp(c)
		}
	}
	for _, sub := range cmd.Commands {
		configure(sub, path+" "+sub.Name)
	}
}

// hasFlag reports whether cmd has a flag called name.
func hasFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// commandNames lists c's visible subcommands.
func commandNames(c *cli.Command) []string {
	var out []string
	for _, sub := range c.Commands {
		if !sub.Hidden {
			out = append(out, sub.Name)
		}
	}
	return out
}
