package scope

import "testing"

func BenchmarkAttenuates(b *testing.B) {
	parent := Grant{Descriptor: Descriptor{
		Capabilities: []string{"purchase", "submit_form"},
		ExpiresAt:    "2026-03-19T08:27:00Z",
		Limits:       map[string]int64{"budget_usd": 800, "max_side_effects": 1},
		StepIDs:      []string{"step_2", "step_3"},
		Targets:      []string{"airline_portal/*"},
		WorkflowID:   "wf_9f3a",
	}, Revocable: true}
	child := Grant{Descriptor: Descriptor{
		Capabilities: []string{"purchase"},
		ExpiresAt:    "2026-03-19T08:22:00Z",
		Limits:       map[string]int64{"budget_usd": 742, "max_side_effects": 1},
		Principals:   []string{"agent:booker"},
		StepIDs:      []string{"step_3"},
		Targets:      []string{"airline_portal/account_123"},
		WorkflowID:   "wf_9f3a",
	}, Revocable: true}
	b.ReportAllocs()
	for b.Loop() {
		if err := Attenuates(parent, child); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	d := Descriptor{
		Capabilities: []string{"purchase", "submit_form"},
		ExpiresAt:    "2026-03-19T08:27:00Z",
		Limits:       map[string]int64{"budget_usd": 800, "max_side_effects": 1},
		StepIDs:      []string{"step_2", "step_3"},
		Targets:      []string{"airline_portal/account_123"},
		WorkflowID:   "wf_9f3a",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Sum(); err != nil {
			b.Fatal(err)
		}
	}
}
