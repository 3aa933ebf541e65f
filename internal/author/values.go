package author

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// # Values given on a command line
//
// Sets, amounts and durations come as repeated key=N or pattern strings;
// these turn them into the canonical values a statement holds (DESIGN §3):
// sets sorted and deduplicated, absent when empty, and ["*"] written
// absent where it means the same.

// CanonicalSet sorts and deduplicates a set of patterns; nil when empty
// (an absent set).
func CanonicalSet(vals []string) []string {
	if len(vals) == 0 {
		return nil
	}
	out := slices.Clone(vals)
	slices.Sort(out)
	return slices.Compact(out)
}

// OptionalSet is CanonicalSet for step_ids and principals, where ["*"]
// means the same as absent and is written absent.
func OptionalSet(vals []string) []string {
	s := CanonicalSet(vals)
	if len(s) == 1 && s[0] == "*" {
		return nil
	}
	return s
}

// ParseAmounts reads repeated key=N values of flag (limits, reservations)
// into a map; nil when none were given.
func ParseAmounts(flag string, vals []string) (map[string]int64, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]int64, len(vals))
	for _, v := range vals {
		k, n, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want key=N, like budget_usd=800", flag, v)
		}
		x, err := strconv.ParseInt(n, 10, 64)
		if err != nil || x < 0 || x > scope.MaxInt {
			return nil, fmt.Errorf("--%s %q: %q is not an integer in 0..%d", flag, v, n, int64(scope.MaxInt))
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--%s: key %q given twice", flag, k)
		}
		m[k] = x
	}
	return m, nil
}

// ParsePairs reads repeated key=value values of flag (side effects); nil
// when none.
func ParsePairs(flag string, vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vals))
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want key=value, like booking_ref=XK42", flag, v)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("--%s: key %q given twice", flag, k)
		}
		m[k] = val
	}
	return m, nil
}

// Seconds converts a duration of flag to whole, positive seconds.
func Seconds(flag string, d time.Duration) (int64, error) {
	if d <= 0 || d%time.Second != 0 {
		return 0, fmt.Errorf("--%s %s: want a positive whole number of seconds, like 15m or 90s", flag, d)
	}
	return int64(d / time.Second), nil
}

// NewID returns a fresh statement id: <prefix>_<8 random hex digits>.
func NewID(prefix string) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// GrantSpec is a grant as its issuer describes it: the patterns in any
// order, with repeats.
type GrantSpec struct {
	Grantee                                  string
	GranteeKey                               ed25519.PublicKey
	Workflow                                 string
	Steps, Targets, Capabilities, Principals []string
	Limits                                   map[string]int64
	TTLSeconds                               int64
	Revocable                                bool
	// Approvals is the JSON of the grant's approval rules (nil: none);
	// ApprovalsFrom names where it came from, for the error.
	Approvals     []byte
	ApprovalsFrom string
}

// Grant builds the grant part of a CONFIRM or DELEGATE, its sets
// canonical.
func (g GrantSpec) Grant() (statement.Grant, error) {
	out := statement.Grant{Limits: g.Limits, TTLSeconds: g.TTLSeconds, Revocable: g.Revocable,
		Grantee: statement.Grantee{Name: g.Grantee, PublicKey: sign.EncodePublicKey(g.GranteeKey)}}
	out.Scope.WorkflowID = g.Workflow
	out.Scope.StepIDs = OptionalSet(g.Steps)
	out.Scope.Targets = CanonicalSet(g.Targets)
	out.Scope.Capabilities = CanonicalSet(g.Capabilities)
	out.Scope.Principals = OptionalSet(g.Principals)
	if g.Approvals != nil {
		var err error
		if out.Approvals, err = scope.ParseRules(g.Approvals); err != nil {
			return out, fmt.Errorf("%s: %w", g.ApprovalsFrom, err)
		}
	}
	return out, nil
}

// CompleteOutcome fills the fields an outcome RECEIPT r leaves empty from
// the pending receipt it completes (its grant, workflow, step, action and
// target), reading it from the log when one is empty.
func (s *Session) CompleteOutcome(r *statement.ReceiptDoc, ref string) error {
	if r.AuthorizationRef != "" && r.Workflow != "" && r.StepID != "" && r.Action != "" && r.Target != "" {
		return nil
	}
	e, err := s.Entry(ref, r.PendingRef, statement.Receipt)
	if err != nil {
		return err
	}
	p := e.Statement.(*statement.ReceiptDoc)
	fill := func(dst *string, src string) {
		if *dst == "" {
			*dst = src
		}
	}
	fill(&r.AuthorizationRef, p.AuthorizationRef)
	fill(&r.Workflow, p.Workflow)
	fill(&r.StepID, p.StepID)
	fill(&r.Action, p.Action)
	fill(&r.Target, p.Target)
	return nil
}

// FromGrant fills *workflow and *scopeHash, where empty, from the grant
// id names (the receipt's grant, a delegation's parent).
func (s *Session) FromGrant(ref, id string, workflow, scopeHash *string) error {
	if *workflow != "" && *scopeHash != "" {
		return nil
	}
	g, err := s.Grant(ref, id)
	if err != nil {
		return err
	}
	if *workflow == "" {
		*workflow = g.Scope.WorkflowID
	}
	if *scopeHash == "" {
		*scopeHash = g.ScopeHash
	}
	return nil
}

// BindPasskey fills doc with the key of a passkey file.
func BindPasskey(doc *statement.PrincipalDoc, p *sign.PasskeyFile) {
	doc.PublicKey, doc.KeyType, doc.CredentialID = p.PublicKey, p.KeyType, p.CredentialID
	doc.RPID, doc.Origins, doc.AllowedTypes = p.RPID, p.Origins, p.AllowedTypes
}
