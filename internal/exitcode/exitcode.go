// Package exitcode is the one table of process exit codes that every
// custody command, custody-verify, their --help, the README and the
// "kind" of a --json error use. A test in cmd/custody fails when a --help
// or the README lists codes other than these.
package exitcode

import (
	"fmt"
	"strings"
)

// The exit codes.
const (
	OK           = 0 // the command did what it was asked; evidence verified
	Error        = 1 // bad input, I/O, anything else
	Usage        = 2 // bad flags or arguments
	Denied       = 3 // an authority rule said no, or the ledger refused a submission
	Verification = 4 // evidence, a proof or an answer of the server does not verify
	Unavailable  = 5 // the server or database could not decide now; nothing was acknowledged
)

// Code is one row of the table.
type Code struct {
	N       int
	Kind    string // the word --json prints as "kind", and the first word of Meaning
	Meaning string
}

// Table is every exit code, in order.
var Table = []Code{
	{OK, "ok", "ok"},
	{Error, "error", "error (bad input, I/O)"},
	{Usage, "usage", "usage (bad flags or arguments)"},
	{Denied, "denied", "denied: an authority rule said no (logged as a DENIAL), or refused: the ledger would not log the submission (malformed, unknown signer)"},
	{Verification, "verification", "verification failed: evidence, a proof or a server's answer does not verify"},
	{Unavailable, "unavailable", "unavailable: the server or database could not decide now (unreachable, 503, not the leader); nothing was acknowledged, so try again"},
}

// Kind is the kind of code n: "error" for a code outside the table.
func Kind(n int) string {
	for _, c := range Table {
		if c.N == n {
			return c.Kind
		}
	}
	return "error"
}

// Summary is the table in one sentence, for --help: "Exit codes: 0 ok,
// 1 error, ...".
func Summary() string {
	parts := make([]string, len(Table))
	for i, c := range Table {
		short := c.Kind
		switch c.N {
		case Verification:
			short = "verification failed"
		case Unavailable:
			short = "unavailable (server or database)"
		case Denied:
			short = "denied or refused"
		}
		parts[i] = fmt.Sprintf("%d %s", c.N, short)
	}
	return "Exit codes: " + strings.Join(parts, ", ") + "."
}
