package scope

import (
	"github.com/custodylog/custody/canon"

	"fmt"
	"maps"
	"slices"
	"strings"
)

// Rule is one approval rule of a CONFIRM or DELEGATE (DESIGN §7): the
// pending receipts it matches must wait for quorum approvals from
// principals its Approvers cover. It is copied into the grant's
// descriptor, so the scope hash commits to it.
type Rule struct {
	Above        map[string]int64 `json:"above,omitempty"`
	Approvers    []string         `json:"approvers"`
	Capabilities []string         `json:"capabilities"`
	Quorum       int64            `json:"quorum"`
	RuleID       string           `json:"rule_id"`
	StepIDs      []string         `json:"step_ids,omitempty"`
	Targets      []string         `json:"targets,omitempty"`
	TTLSeconds   int64            `json:"ttl_seconds"`
}

// Bounds of DESIGN §7.
const (
	MaxRules     = 16    // rules a grant carries
	MaxApprovers = 16    // patterns in one approvers set
	MaxQuorum    = 16    // distinct approving principals a rule may ask for
	MaxRuleTTL   = 86400 // seconds a held receipt may wait under one rule
)

// CheckRules reports whether rules is a canonical approvals list: at most
// MaxRules rules, sorted by rule_id without repeats, each rule canonical
// (CheckRule). nil (absent) is fine; an empty non-nil list is not (the
// canonical profile has no empty arrays). Ordering and pattern problems
// are CodeNonCanonical, counts and ranges CodeSchemaInvalid.
func CheckRules(rules []Rule) error {
	if rules == nil {
		return nil
	}
	if len(rules) == 0 {
		return errorf(CodeNonCanonical, "approvals is an empty list; omit it instead")
	}
	if len(rules) > MaxRules {
		return errorf(CodeSchemaInvalid, "approvals holds %d rules, above the %d a grant may carry", len(rules), MaxRules)
	}
	for i := range rules {
		if err := CheckRule(&rules[i]); err != nil {
			return prefixed(fmt.Sprintf("approvals[%d]", i), err)
		}
		if i > 0 && rules[i-1].RuleID >= rules[i].RuleID {
			if rules[i-1].RuleID == rules[i].RuleID {
				return errorf(CodeNonCanonical, "approvals: rule_id %s appears twice; rule ids are unique in a grant", quote(rules[i].RuleID))
			}
			return errorf(CodeNonCanonical, "approvals: rule_id %s comes after %s; rules are written sorted by rule_id", quote(rules[i].RuleID), quote(rules[i-1].RuleID))
		}
	}
	return nil
}

// CheckRule reports whether one rule is canonical and within bounds.
func CheckRule(r *Rule) error {
	if prob := identifierProblem(r.RuleID); prob != "" {
		return errorf(CodeNonCanonical, "rule_id %s %s", quote(r.RuleID), prob)
	}
	if k, ok := firstKey(r.Above, func(k string, v int64) bool { return identifierProblem(k) != "" || v < 0 || v > MaxInt }); ok {
		if prob := identifierProblem(k); prob != "" {
			return errorf(CodeNonCanonical, "rule %s: above key %s %s", quote(r.RuleID), quote(k), prob)
		}
		return errorf(CodeNonCanonical, "rule %s: above %s is %d, outside 0..%d", quote(r.RuleID), quote(k), r.Above[k], int64(MaxInt))
	}
	if r.Above != nil && len(r.Above) == 0 {
		return errorf(CodeNonCanonical, "rule %s: above is an empty object; omit it instead", quote(r.RuleID))
	}
	if err := CheckSet("approvers", r.Approvers, false); err != nil {
		return prefixed("rule "+quote(r.RuleID), err)
	}
	if len(r.Approvers) > MaxApprovers {
		return errorf(CodeSchemaInvalid, "rule %s: approvers holds %d patterns, above %d", quote(r.RuleID), len(r.Approvers), MaxApprovers)
	}
	if err := CheckSet("capabilities", r.Capabilities, false); err != nil {
		return prefixed("rule "+quote(r.RuleID), err)
	}
	if r.Quorum < 1 || r.Quorum > MaxQuorum {
		return errorf(CodeSchemaInvalid, "rule %s: quorum %d is outside 1..%d", quote(r.RuleID), r.Quorum, MaxQuorum)
	}
	if err := CheckSet("step_ids", r.StepIDs, true); err != nil {
		return prefixed("rule "+quote(r.RuleID), err)
	}
	if err := CheckSet("targets", r.Targets, true); err != nil {
		return prefixed("rule "+quote(r.RuleID), err)
	}
	if r.TTLSeconds < 1 || r.TTLSeconds > MaxRuleTTL {
		return errorf(CodeSchemaInvalid, "rule %s: ttl_seconds %d is outside 1..%d", quote(r.RuleID), r.TTLSeconds, MaxRuleTTL)
	}
	return nil
}

// ParseRules reads an approvals list written as JSON (the file `custody
// confirm --approvals` and `custody delegate --approvals` take): the
// strict profile and closed schema of package canon, whitespace and key
// order free, then CheckRules. Unsorted rules are sorted by rule_id first,
// as an author would expect; everything else must already be canonical.
func ParseRules(data []byte) ([]Rule, error) {
	var rules []Rule
	if err := canon.UnmarshalRelaxed(data, &rules); err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, errorf(CodeSchemaInvalid, "the approvals file holds no rule")
	}
	slices.SortStableFunc(rules, func(a, b Rule) int { return strings.Compare(a.RuleID, b.RuleID) })
	if err := CheckRules(rules); err != nil {
		return nil, err
	}
	return rules, nil
}

// CloneRules returns a deep copy of rules (nil for none).
func CloneRules(rules []Rule) []Rule {
	if len(rules) == 0 {
		return nil
	}
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = Rule{Above: maps.Clone(r.Above), Approvers: slices.Clone(r.Approvers),
			Capabilities: slices.Clone(r.Capabilities), Quorum: r.Quorum, RuleID: r.RuleID,
			StepIDs: slices.Clone(r.StepIDs), Targets: slices.Clone(r.Targets), TTLSeconds: r.TTLSeconds}
	}
	return out
}

// Matches reports whether the rule holds a pending receipt with this
// action, target, step and reservation (DESIGN §7): action under
// capabilities, target under targets and step under step_ids (absent sets
// match all), and, with above, some key reserved above its threshold.
func (r *Rule) Matches(action, target, step string, reserve map[string]int64) bool {
	if !Covers(r.Capabilities, action) {
		return false
	}
	if r.Targets != nil && !Covers(r.Targets, target) {
		return false
	}
	if r.StepIDs != nil && !Covers(r.StepIDs, step) {
		return false
	}
	if len(r.Above) == 0 {
		return true
	}
	for k, v := range r.Above {
		if reserve[k] > v {
			return true
		}
	}
	return false
}

// CoversApprover reports whether the rule's approvers cover a principal name.
func (r *Rule) CoversApprover(name string) bool { return Covers(r.Approvers, name) }

// ApproversCovered reports whether the approver pattern p is covered by
// some element of the canonical set set.
func ApproversCovered(set []string, p string) bool { return coveredBy(set, p) }

// CheckApprovers decides whether a DELEGATE's rules name only approvers
// that some ancestor rule's approvers cover, or the workflow's owner
// (DESIGN §7): an agent cannot make strangers approvers. ancestors are the
// descriptors above the new grant; owner is the workflow owner's name (""
// when unknown). The error is an *Error with CodeWidening.
func CheckApprovers(rules []Rule, ancestors []Descriptor, owner string) error {
	for _, r := range rules {
		for _, p := range r.Approvers {
			if owner != "" && p == owner {
				continue
			}
			covered := false
			for _, d := range ancestors {
				for i := range d.Approvals {
					if coveredBy(d.Approvals[i].Approvers, p) {
						covered = true
					}
				}
			}
			if !covered {
				return errorf(CodeWidening, "approval rule %s names approver %s, which no ancestor rule's approvers cover and which is not the workflow's owner %s: an agent cannot make strangers approvers", quote(r.RuleID), quote(p), quote(owner))
			}
		}
	}
	return nil
}
