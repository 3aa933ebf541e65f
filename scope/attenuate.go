package scope

import (
	"maps"
	"slices"
	"strings"
)

// Grant is what Attenuates compares: a grant's descriptor and whether the
// grant is revocable. Revocability is a field of the CONFIRM or DELEGATE
// statement, not of the descriptor, so it is not in the scope hash; the
// caller reads it from the statement. Grant's Hash and Sum are its
// descriptor's.
type Grant struct {
	Descriptor
	Revocable bool
	// Final is set for a grant at the log's max_depth, which can never
	// delegate: its principals restrict nothing, so they never make it
	// narrower than its parent (DESIGN §3). The caller knows the depth;
	// the descriptor does not.
	Final bool
}

// setRule names one of a descriptor's four sets in attenuation order.
type setRule struct {
	name, element string // "step_ids", "step"
	get           func(*Descriptor) []string
}

// setRules is the order in which sets are compared, as DESIGN §3 lists
// them.
var setRules = [...]setRule{
	{"step_ids", "step", func(d *Descriptor) []string { return d.StepIDs }},
	{"targets", "target", func(d *Descriptor) []string { return d.Targets }},
	{"capabilities", "capability", func(d *Descriptor) []string { return d.Capabilities }},
	{"principals", "principal", func(d *Descriptor) []string { return d.Principals }},
}

// Attenuates decides whether child is a proper attenuation of parent
// (DESIGN §3). It returns nil or an *Error; the first rule that fails, in
// this fixed order, decides the code:
//
//  1. non_canonical: parent, then child, fails Validate;
//  2. workflow_mismatch: the workflow_ids differ;
//  3. widening: for step_ids, targets, capabilities, principals in that
//     order, a set present in the parent is absent in the child, or a child
//     element (in sorted order) is covered by no parent element. A set
//     absent in the parent means "any" and covers everything;
//  4. limit_missing: a parent limit key (in sorted order) is absent in the
//     child;
//  5. limit_widened: a child limit is above the parent's (keys sorted);
//  6. expiry_widened: the child expires after the parent;
//  7. revocability_widened: the parent is revocable and the child is not;
//  8. equal_scope: the child is not strictly narrower — no set of it means
//     less than the parent's and no parent limit is lower in it. An earlier
//     expiry, a grant made revocable, or a limit the parent does not have
//     does not make a child narrower; nor, for a Final child (at
//     max_depth), does a narrower principals set.
//
// It is the only place the rule is decided; the ledger and the verifier
// both call it.
func Attenuates(parent, child Grant) error {
	pExp, err := parent.validate()
	if err != nil {
		return prefixed("parent", err)
	}
	cExp, err := child.validate()
	if err != nil {
		return prefixed("child", err)
	}
	p, c := &parent.Descriptor, &child.Descriptor

	if p.WorkflowID != c.WorkflowID {
		return errorf(CodeWorkflowMismatch, "child workflow_id %s differs from parent workflow_id %s", quote(c.WorkflowID), quote(p.WorkflowID))
	}

	for _, r := range setRules {
		ps, cs := r.get(p), r.get(c)
		if ps == nil {
			continue // "any" covers every child set
		}
		if cs == nil {
			return errorf(CodeWidening, "child %s is absent (any) but parent %s is %s", r.name, r.name, quoteSet(ps))
		}
		for _, e := range cs {
			if !coveredBy(ps, e) {
				return errorf(CodeWidening, "child %s %s is not covered by parent %s %s", r.element, quote(e), r.name, quoteSet(ps))
			}
		}
	}

	if k, ok := firstKey(p.Limits, func(k string, _ int64) bool { _, ok := c.Limits[k]; return !ok }); ok {
		return errorf(CodeLimitMissing, "parent limit %s (%d) is missing from child limits", quote(k), p.Limits[k])
	}
	if k, ok := firstKey(p.Limits, func(k string, v int64) bool { return c.Limits[k] > v }); ok {
		return errorf(CodeLimitWidened, "child limit %s is %d, above parent's %d", quote(k), c.Limits[k], p.Limits[k])
	}

	if cExp.After(pExp) {
		return errorf(CodeExpiryWidened, "child expires_at %s is after parent expires_at %s", c.ExpiresAt, p.ExpiresAt)
	}

	if parent.Revocable && !child.Revocable {
		return errorf(CodeRevocabilityWidened, "parent is revocable but child is not")
	}

	for _, r := range setRules {
		if r.name == "principals" && child.Final {
			continue // restricts the grantees below, and there are none
		}
		if narrower(r.get(p), r.get(c)) {
			return nil
		}
	}
	for k, v := range p.Limits {
		if c.Limits[k] < v {
			return nil
		}
	}
	final := ""
	if child.Final {
		final = "; the child is at max_depth, where principals restrict nothing and so do not count"
	}
	return errorf(CodeEqualScope, "child means the same %s as its parent%s; a delegation must be strictly narrower (a transfer is rejected), and an earlier expiry or an added limit does not count%s", sameWhat(), lowersNone(slices.Sorted(maps.Keys(p.Limits))), final)
}

func sameWhat() string {
	names := make([]string, len(setRules))
	for i, r := range setRules {
		names[i] = r.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func lowersNone(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = quote(k)
	}
	return " and lowers none of its limits (" + strings.Join(q, ", ") + ")"
}
