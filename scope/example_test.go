package scope_test

import (
	"fmt"

	"github.com/custodylog/custody/scope"
)

func ExampleDescriptor_Hash() {
	d := scope.Descriptor{
		Capabilities: []string{"purchase", "submit_form"},
		ExpiresAt:    "2026-03-19T08:27:00Z",
		Limits:       map[string]int64{"budget_usd": 800, "max_side_effects": 1},
		StepIDs:      []string{"step_2", "step_3"},
		Targets:      []string{"airline_portal/account_123"},
		WorkflowID:   "wf_9f3a",
	}
	h, err := d.Hash()
	fmt.Println(h, err)
	// Output: 621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358 <nil>
}

func ExampleAttenuates() {
	parent := scope.Grant{Descriptor: scope.Descriptor{
		Capabilities: []string{"read"},
		ExpiresAt:    "2026-03-19T08:27:00Z",
		Targets:      []string{"db/a", "db/b"},
		WorkflowID:   "wf_1",
	}, Revocable: true}

	child := parent
	child.Targets = []string{"db/*"}
	fmt.Println(scope.Attenuates(parent, child))

	child.Targets = []string{"db/a"}
	fmt.Println(scope.Attenuates(parent, child))

	child.Targets = parent.Targets
	child.ExpiresAt = "2026-03-19T08:00:00Z"
	fmt.Println(scope.CodeOf(scope.Attenuates(parent, child)))
	// Output:
	// widening: child target "db/*" is not covered by parent targets ["db/a","db/b"]
	// <nil>
	// equal_scope
}

func ExampleMatch() {
	fmt.Println(scope.Match("db/*", "db/orders/42"), scope.Match("db/*", "db"), scope.Match("db/*", "dbx/1"))
	// Output: true false false
}
