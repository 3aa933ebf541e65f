package scope

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Code is a stable reason code, as named in DESIGN §3 and §4. The ledger
// puts it in a DENIAL's reason_code; callers branch on it, never on Msg.
type Code string

// The codes this package returns.
const (
	CodeNonCanonical        Code = "non_canonical"        // a set, pattern, identifier, limit or time is not in canonical form
	CodeWorkflowMismatch    Code = "workflow_mismatch"    // child and parent name different workflows
	CodeWidening            Code = "widening"             // a child pattern is not covered by the parent's set
	CodeLimitMissing        Code = "limit_missing"        // a parent limit is absent from the child
	CodeLimitWidened        Code = "limit_widened"        // a child limit is above the parent's
	CodeExpiryWidened       Code = "expiry_widened"       // the child expires after the parent
	CodeRevocabilityWidened Code = "revocability_widened" // the parent is revocable and the child is not
	CodeEqualScope          Code = "equal_scope"          // the child is not strictly narrower (a transfer)
	CodePrincipalMismatch   Code = "principal_mismatch"   // a grantee name is outside an ancestor's principals
	CodeDepthExceeded       Code = "depth_exceeded"       // a delegation would go deeper than max_depth
	CodeOutOfScope          Code = "out_of_scope"         // a receipt's action, target or step is outside its grant
	CodeSchemaInvalid       Code = "schema_invalid"       // an approval rule's count or range is out of bounds
)

// Error is a denial with a stable Code and a sentence that names the
// element and the values that broke the rule. Use errors.As to get it.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Msg }

// CodeOf returns the Code of the first *Error in err's chain, or "" if there
// is none (including when err is nil).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// prefixed returns err with "who: " put before its message; err is always
// an *Error made by this package.
func prefixed(who string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Code: e.Code, Msg: who + ": " + e.Msg}
	}
	return err
}

// maxQuoted bounds how much of one untrusted string a message repeats.
const maxQuoted = MaxIdentifierLen + 8

// quote prints s for a message: Go-quoted with every non-ASCII, control and
// bidirectional-override character escaped (DESIGN §1), cut to maxQuoted
// bytes so that a hostile input cannot blow up a log line.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.QuoteToASCII(s[:maxQuoted]) + "..."
	}
	return strconv.QuoteToASCII(s)
}

// maxListed bounds how many elements of a set a message lists.
const maxListed = 8

// quoteSet prints a set as a JSON-like list; an absent set prints as
// "absent (any)".
func quoteSet(set []string) string {
	if set == nil {
		return "absent (any)"
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range set {
		if i == maxListed {
			fmt.Fprintf(&b, ",... (%d more)", len(set)-maxListed)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(s))
	}
	b.WriteByte(']')
	return b.String()
}
