// Package clikit is what every custody command is made with: the exit
// error that carries an exit code (ExitError, Usage, Denied), and how an
// error maps to one (Unavailable); positional arguments, input files,
// --json and a progress line; the location flags and how a command
// resolves them and opens its log (package location's rule); the renamed
// flags' old spellings; --log-key, --policy.
//
// The commands themselves live in the packages under internal/cmd (and
// internal/verifycli); cmd/custody puts them in one tree (newApp), applies
// the tree-wide conventions (configure) and turns the error a command
// returns into an exit code and a message (runApp).
package clikit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/exitcode"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/storage"
)

// Exit codes (the one table is package exitcode's).
const (
	ExitOK          = exitcode.OK
	ExitFail        = exitcode.Error
	ExitUsage       = exitcode.Usage
	ExitDenied      = exitcode.Denied
	ExitVerify      = exitcode.Verification
	ExitUnavailable = exitcode.Unavailable
)

// ExitError is an error that carries the process exit code it maps to.
// Quiet means the command already printed what the user needs (a denial
// line, say), so custody's runApp prints nothing more.
type ExitError struct {
	Code  int
	Err   error
	Quiet bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Denied is exit code 3 after the command printed the denial itself.
func Denied() error { return &ExitError{Code: ExitDenied, Quiet: true} }

// UsageCmd records which command a usage error is about, for the hint.
type UsageCmd struct {
	Path string
	Err  error
}

func (u *UsageCmd) Error() string { return u.Err.Error() }
func (u *UsageCmd) Unwrap() error { return u.Err }

// OneLine keeps an error message on one line and escapes what a terminal
// would interpret.
func OneLine(s string) string {
	return SafeText(strings.TrimRight(s, "\n"))
}

// Usage is a usage error about the command c.
func Usage(c *cli.Command, format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: &UsageCmd{Path: c.FullName(), Err: fmt.Errorf(format, args...)}}
}

// Unavailable reports whether err says the log could not decide now: a
// server that cannot be reached or answers 503, a server or ledger that
// does not sequence the log, or a database that is away.
func Unavailable(err error) bool {
	var he *client.HTTPError
	if errors.As(err, &he) && he.Status == http.StatusServiceUnavailable {
		return true
	}
	// Refused, reset, timed out, no such host: the network's errors. A
	// bare errno satisfies net.Error too (it has Timeout and Temporary),
	// so a file that cannot be opened would count; it counts only inside
	// a network operation.
	var ne net.Error
	if errors.As(err, &ne) {
		if _, errno := ne.(syscall.Errno); !errno {
			return true
		}
	}
	return errors.Is(err, ledger.ErrNotLeader) || errors.Is(err, storage.ErrUnavailable) ||
		errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrCommitUnknown)
}
