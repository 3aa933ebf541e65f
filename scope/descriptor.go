package scope

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/custodylog/custody/canon"
)

// Scope is the "scope" object of a CONFIRM or DELEGATE statement. Its
// limits sit beside it in the statement, not inside it.
type Scope struct {
	Capabilities []string `json:"capabilities"`
	Principals   []string `json:"principals,omitempty"` // nil: grants below are unrestricted
	StepIDs      []string `json:"step_ids,omitempty"`   // nil: any step
	Targets      []string `json:"targets"`
	WorkflowID   string   `json:"workflow_id"`
}

// Descriptor is a grant's scope descriptor (DESIGN §3): what it allows,
// until when, and within which limits. It is derived from the grant by
// Derive, hashed into scope_hash, and compared by Attenuates. A nil set
// means absent, which for step_ids and principals means "any"; a nil or
// empty Limits map means no limits.
type Descriptor struct {
	// Approvals are the grant's own approval rules (DESIGN §7), sorted by
	// rule_id; nil for none. Ancestors' rules stay in force below them
	// but are not copied here.
	Approvals    []Rule           `json:"approvals,omitempty"`
	Capabilities []string         `json:"capabilities"`
	ExpiresAt    string           `json:"expires_at"` // RFC 3339, UTC, "Z", whole seconds
	Limits       map[string]int64 `json:"limits,omitempty"`
	Principals   []string         `json:"principals,omitempty"`
	StepIDs      []string         `json:"step_ids,omitempty"`
	Targets      []string         `json:"targets"`
	WorkflowID   string           `json:"workflow_id"`
}

// TimeLayout is the only accepted form of a statement timestamp and of
// expires_at: RFC 3339 in UTC with "Z" and whole seconds.
const TimeLayout = "2006-01-02T15:04:05Z"

// MaxInt is the largest integer the canonical JSON profile carries
// (2^53-1), and so the largest limit value.
const MaxInt = 1<<53 - 1

// Validate reports whether s is in canonical form: workflow_id an
// identifier, every set canonical (CheckSet). The error is an *Error with
// CodeNonCanonical.
func (s Scope) Validate() error {
	return checkSets(s.WorkflowID, s.Capabilities, s.Principals, s.StepIDs, s.Targets)
}

// Validate reports whether d is in canonical form: workflow_id an
// identifier, every set canonical (CheckSet), expires_at in TimeLayout,
// every limit key an identifier and every value in 0..MaxInt. Fields are
// checked in canonical key order and the first failure is returned, an
// *Error with CodeNonCanonical.
func (d Descriptor) Validate() error {
	_, err := d.validate()
	return err
}

// validate is Validate that also returns the parsed expiry.
func (d Descriptor) validate() (time.Time, error) {
	if err := CheckRules(d.Approvals); err != nil {
		return time.Time{}, err
	}
	if err := CheckSet("capabilities", d.Capabilities, false); err != nil {
		return time.Time{}, err
	}
	exp, err := ParseTime(d.ExpiresAt)
	if err != nil {
		return time.Time{}, prefixed("expires_at", err)
	}
	// The smallest bad key is reported, so the message does not depend on
	// map order; no sorting on the success path.
	if k, ok := firstKey(d.Limits, func(k string, v int64) bool { return identifierProblem(k) != "" || v < 0 || v > MaxInt }); ok {
		if prob := identifierProblem(k); prob != "" {
			return time.Time{}, errorf(CodeNonCanonical, "limit key %s %s", quote(k), prob)
		}
		return time.Time{}, errorf(CodeNonCanonical, "limit %s is %d, outside 0..%d", quote(k), d.Limits[k], int64(MaxInt))
	}
	if err := CheckSet("principals", d.Principals, true); err != nil {
		return time.Time{}, err
	}
	if err := CheckSet("step_ids", d.StepIDs, true); err != nil {
		return time.Time{}, err
	}
	if err := CheckSet("targets", d.Targets, false); err != nil {
		return time.Time{}, err
	}
	if prob := identifierProblem(d.WorkflowID); prob != "" {
		return time.Time{}, errorf(CodeNonCanonical, "workflow_id %s %s", quote(d.WorkflowID), prob)
	}
	return exp, nil
}

func checkSets(workflowID string, capabilities, principals, stepIDs, targets []string) error {
	if err := CheckSet("capabilities", capabilities, false); err != nil {
		return err
	}
	if err := CheckSet("principals", principals, true); err != nil {
		return err
	}
	if err := CheckSet("step_ids", stepIDs, true); err != nil {
		return err
	}
	if err := CheckSet("targets", targets, false); err != nil {
		return err
	}
	if prob := identifierProblem(workflowID); prob != "" {
		return errorf(CodeNonCanonical, "workflow_id %s %s", quote(workflowID), prob)
	}
	return nil
}

// firstKey returns the bytewise-smallest key of m for which bad holds.
func firstKey(m map[string]int64, bad func(string, int64) bool) (string, bool) {
	first, found := "", false
	for k, v := range m {
		if bad(k, v) && (!found || k < first) {
			first, found = k, true
		}
	}
	return first, found
}

// ParseTime parses a timestamp in TimeLayout and nothing else: no offset
// other than "Z", no fractional seconds, no leap second. The error is an
// *Error with CodeNonCanonical.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	// time.Parse accepts a fractional second the layout does not name;
	// the round trip rejects it and any other spelling.
	var buf [len(TimeLayout) + 8]byte
	if err != nil || string(t.AppendFormat(buf[:0], TimeLayout)) != s {
		return time.Time{}, errorf(CodeNonCanonical, "%s is not an RFC 3339 UTC time with whole seconds, like 2026-03-19T08:27:00Z", quote(s))
	}
	return t, nil
}

// Derive builds the descriptor of a grant: its scope, its limits, and
// expires_at = timestamp + ttlSeconds. timestamp must be whole seconds (its
// zone does not matter) and ttlSeconds at least 1; checking ttlSeconds
// against GENESIS's max_ttl_seconds is the caller's job. The result shares
// no memory with s or limits, an empty limits map becomes nil, and the
// result is validated: a nil error means it is canonical and hashable.
func Derive(s Scope, limits map[string]int64, timestamp time.Time, ttlSeconds int64) (Descriptor, error) {
	return DeriveRules(s, limits, nil, timestamp, ttlSeconds)
}

// DeriveRules is Derive for a grant that carries approval rules: they are
// copied into the descriptor as they are (they must already be canonical,
// sorted by rule_id).
func DeriveRules(s Scope, limits map[string]int64, rules []Rule, timestamp time.Time, ttlSeconds int64) (Descriptor, error) {
	if timestamp.Nanosecond() != 0 {
		return Descriptor{}, errorf(CodeNonCanonical, "timestamp %s has a fractional second", timestamp.UTC().Format(time.RFC3339Nano))
	}
	if ttlSeconds < 1 {
		return Descriptor{}, errorf(CodeNonCanonical, "ttl_seconds is %d, below 1", ttlSeconds)
	}
	sec := timestamp.Unix()
	if ttlSeconds > math.MaxInt64-sec {
		return Descriptor{}, errorf(CodeNonCanonical, "ttl_seconds %d overflows the expiry", ttlSeconds)
	}
	exp := time.Unix(sec+ttlSeconds, 0).UTC()
	if exp.Year() > 9999 || exp.Year() < 0 {
		return Descriptor{}, errorf(CodeNonCanonical, "expiry of timestamp %s plus %d seconds is outside years 0000..9999", timestamp.UTC().Format(TimeLayout), ttlSeconds)
	}
	d := Descriptor{
		Approvals:    CloneRules(rules),
		Capabilities: slices.Clone(s.Capabilities),
		ExpiresAt:    exp.Format(TimeLayout),
		Principals:   slices.Clone(s.Principals),
		StepIDs:      slices.Clone(s.StepIDs),
		Targets:      slices.Clone(s.Targets),
		WorkflowID:   s.WorkflowID,
	}
	if len(limits) > 0 {
		d.Limits = maps.Clone(limits)
	}
	if err := d.Validate(); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}

// ParseDescriptor reads a descriptor written as JSON, as `custody scope
// hash` and `custody scope check` do: the strict profile and closed schema
// of package canon, with whitespace and key order free, then Validate.
func ParseDescriptor(data []byte) (Descriptor, error) {
	var d Descriptor
	if err := canon.UnmarshalRelaxed(data, &d); err != nil {
		return Descriptor{}, err
	}
	if err := d.Validate(); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}
