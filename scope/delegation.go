package scope

// DefaultMaxDepth is GENESIS's max_depth when it does not set one: root
// agent (1), coordinator (2), leaf executor (3).
const DefaultMaxDepth = 3

// CheckDepth reports whether a grantee may sit at newDepth when the log's
// max_depth is maxDepth. A CONFIRM's grantee is at depth 1 and each
// DELEGATE adds one, so a DELEGATE from a grant at depth d creates depth
// d+1. newDepth > maxDepth is depth_exceeded. Depths below 1 cannot occur;
// they fail closed with the same code.
func CheckDepth(newDepth, maxDepth int) error {
	if newDepth < 1 || maxDepth < 1 {
		return errorf(CodeDepthExceeded, "depth %d under max_depth %d is not a possible delegation depth (depths start at 1)", newDepth, maxDepth)
	}
	if newDepth > maxDepth {
		return errorf(CodeDepthExceeded, "delegation would create depth %d, above max_depth %d", newDepth, maxDepth)
	}
	return nil
}

// CheckGrantee reports whether a DELEGATE may name grantee name: a grant's
// principals restrict the grantees of every grant below it (not its own),
// so name must be matched by the principals of every ancestor that has
// them. ancestors lists the grant being delegated from first, then its
// parent, up to the CONFIRM; the first ancestor (in that order) that does
// not match decides. A malformed name is non_canonical; a mismatch is
// principal_mismatch.
func CheckGrantee(name string, ancestors []Descriptor) error {
	if err := CheckIdentifier(name); err != nil {
		return prefixed("grantee name", err)
	}
	for i, a := range ancestors {
		if a.Principals != nil && !Covers(a.Principals, name) {
			return errorf(CodePrincipalMismatch, "grantee %s is not matched by principals %s of ancestor %d of %d (1 is the grant delegated from)", quote(name), quoteSet(a.Principals), i+1, len(ancestors))
		}
	}
	return nil
}

// InScope reports whether a RECEIPT's action, target and step lie within
// the grant's descriptor d: action under capabilities, target under
// targets, step under step_ids (absent step_ids: any step), checked in that
// order. Outside is out_of_scope, naming which; a malformed action, target
// or step is non_canonical. d is assumed valid; liveness (expires_at) is
// not checked here.
func InScope(d Descriptor, action, target, step string) error {
	checks := [...]struct {
		what, set, value string
		in               []string
		optional         bool
	}{
		{"capability", "capabilities", action, d.Capabilities, false},
		{"target", "targets", target, d.Targets, false},
		{"step", "step_ids", step, d.StepIDs, true},
	}
	for _, c := range checks {
		if err := CheckIdentifier(c.value); err != nil {
			return prefixed(c.what, err)
		}
		// A required set that is nil covers nothing: fail closed on a
		// descriptor that skipped Validate.
		if (c.in == nil && !c.optional) || !Covers(c.in, c.value) {
			return errorf(CodeOutOfScope, "%s %s is not covered by the grant's %s %s", c.what, quote(c.value), c.set, quoteSet(c.in))
		}
	}
	return nil
}
