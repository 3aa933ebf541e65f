package scope

import (
	"fmt"
	"strings"
	"testing"
)

func rule(id string) Rule {
	return Rule{RuleID: id, Capabilities: []string{"purchase"}, Approvers: []string{"user:alice"}, Quorum: 1, TTLSeconds: 900}
}

// TestCheckRules pins each canonical-form and bounds rule of an approvals
// list (DESIGN §7) to its code.
func TestCheckRules(t *testing.T) {
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("user:%02d", i)
		}
		return out
	}
	cases := []struct {
		name  string
		rules []Rule
		want  Code
		msg   string
	}{
		{"absent", nil, "", ""},
		{"one rule", []Rule{rule("a")}, "", ""},
		{"sorted", []Rule{rule("a"), rule("b")}, "", ""},
		{"empty list", []Rule{}, CodeNonCanonical, "empty"},
		{"unsorted", []Rule{rule("b"), rule("a")}, CodeNonCanonical, `"a" comes after "b"`},
		{"repeated id", []Rule{rule("a"), rule("a")}, CodeNonCanonical, "appears twice"},
		{"17 rules", func() []Rule {
			var rs []Rule
			for i := 0; i < 17; i++ {
				rs = append(rs, rule(fmt.Sprintf("r%02d", i)))
			}
			return rs
		}(), CodeSchemaInvalid, "17 rules"},
		{"bad rule id", []Rule{rule("a b")}, CodeNonCanonical, "rule_id"},
		{"quorum 0", []Rule{func() Rule { r := rule("a"); r.Quorum = 0; return r }()}, CodeSchemaInvalid, "quorum 0"},
		{"quorum 17", []Rule{func() Rule { r := rule("a"); r.Quorum = 17; return r }()}, CodeSchemaInvalid, "quorum 17"},
		{"ttl 0", []Rule{func() Rule { r := rule("a"); r.TTLSeconds = 0; return r }()}, CodeSchemaInvalid, "ttl_seconds 0"},
		{"ttl above a day", []Rule{func() Rule { r := rule("a"); r.TTLSeconds = 86401; return r }()}, CodeSchemaInvalid, "86401"},
		{"16 approvers", []Rule{func() Rule { r := rule("a"); r.Approvers = many(16); return r }()}, "", ""},
		{"17 approvers", []Rule{func() Rule { r := rule("a"); r.Approvers = many(17); return r }()}, CodeSchemaInvalid, "17 patterns"},
		{"unsorted approvers", []Rule{func() Rule { r := rule("a"); r.Approvers = []string{"user:b", "user:a"}; return r }()}, CodeNonCanonical, "approvers"},
		{"covered approver", []Rule{func() Rule { r := rule("a"); r.Approvers = []string{"org/*", "org/x"}; return r }()}, CodeNonCanonical, "approvers"},
		{"no approvers", []Rule{func() Rule { r := rule("a"); r.Approvers = nil; return r }()}, CodeNonCanonical, "approvers"},
		{"no capabilities", []Rule{func() Rule { r := rule("a"); r.Capabilities = nil; return r }()}, CodeNonCanonical, "capabilities"},
		{"targets everything", []Rule{func() Rule { r := rule("a"); r.Targets = []string{"*"}; return r }()}, CodeNonCanonical, "targets"},
		{"step_ids everything", []Rule{func() Rule { r := rule("a"); r.StepIDs = []string{"*"}; return r }()}, CodeNonCanonical, "step_ids"},
		{"above negative", []Rule{func() Rule { r := rule("a"); r.Above = map[string]int64{"usd": -1}; return r }()}, CodeNonCanonical, "above"},
		{"above bad key", []Rule{func() Rule { r := rule("a"); r.Above = map[string]int64{"a b": 1}; return r }()}, CodeNonCanonical, "above key"},
		{"above empty", []Rule{func() Rule { r := rule("a"); r.Above = map[string]int64{}; return r }()}, CodeNonCanonical, "empty object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRules(c.rules)
			if got := CodeOf(err); got != c.want {
				t.Fatalf("CheckRules: %v, want code %q", err, c.want)
			}
			if err != nil && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q does not say %q", err, c.msg)
			}
		})
	}
}

// TestRuleMatches: capabilities, targets, step_ids and above decide which
// pending receipts a rule holds; reserving exactly the threshold does not.
func TestRuleMatches(t *testing.T) {
	r := Rule{RuleID: "big", Capabilities: []string{"purchase"}, Targets: []string{"portal/*"}, StepIDs: []string{"s3"},
		Above: map[string]int64{"usd": 300, "items": 5}, Approvers: []string{"user:a"}, Quorum: 1, TTLSeconds: 60}
	cases := []struct {
		action, target, step string
		reserve              map[string]int64
		want                 bool
	}{
		{"purchase", "portal/x", "s3", map[string]int64{"usd": 301}, true},
		{"purchase", "portal/x", "s3", map[string]int64{"usd": 300, "items": 6}, true},
		{"purchase", "portal/x", "s3", map[string]int64{"usd": 300, "items": 5}, false},
		{"purchase", "portal/x", "s3", nil, false},
		{"refund", "portal/x", "s3", map[string]int64{"usd": 301}, false},
		{"purchase", "other", "s3", map[string]int64{"usd": 301}, false},
		{"purchase", "portal/x", "s4", map[string]int64{"usd": 301}, false},
	}
	for _, c := range cases {
		if got := r.Matches(c.action, c.target, c.step, c.reserve); got != c.want {
			t.Errorf("Matches(%s, %s, %s, %v) = %v, want %v", c.action, c.target, c.step, c.reserve, got, c.want)
		}
	}
	open := Rule{RuleID: "all", Capabilities: []string{"*"}, Approvers: []string{"user:a"}, Quorum: 1, TTLSeconds: 60}
	if !open.Matches("x", "y", "z", nil) {
		t.Error("a rule with no targets, step_ids or above matches every action under its capabilities")
	}
}

// TestParseRules reads an approvals file: sorted for the author, strict
// otherwise.
func TestParseRules(t *testing.T) {
	rs, err := ParseRules([]byte(`[{"rule_id":"z","capabilities":["a"],"approvers":["user:x"],"quorum":1,"ttl_seconds":5},
	  {"rule_id":"b","capabilities":["a"],"approvers":["user:x"],"quorum":2,"ttl_seconds":5,"above":{"usd":3}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].RuleID != "b" || rs[1].RuleID != "z" {
		t.Errorf("not sorted: %+v", rs)
	}
	for _, bad := range []string{`[]`, `{}`, `[{"rule_id":"a"}]`, `[{"rule_id":"a","capabilities":["a"],"approvers":["u"],"quorum":1,"ttl_seconds":5,"extra":1}]`, `[{"rule_id":"a","capabilities":["a"],"approvers":["u"],"quorum":1.5,"ttl_seconds":5}]`} {
		if _, err := ParseRules([]byte(bad)); err == nil {
			t.Errorf("ParseRules(%s) accepted", bad)
		}
	}
}

// TestCheckApprovers: a child's rules may name approvers an ancestor rule
// covers or the owner, and no one else (widening).
func TestCheckApprovers(t *testing.T) {
	parent := Descriptor{Approvals: []Rule{{RuleID: "p", Capabilities: []string{"*"}, Approvers: []string{"org:acme/finance/*"}, Quorum: 1, TTLSeconds: 60}}}
	child := func(approvers ...string) []Rule {
		return []Rule{{RuleID: "c", Capabilities: []string{"*"}, Approvers: approvers, Quorum: 1, TTLSeconds: 60}}
	}
	if err := CheckApprovers(child("org:acme/finance/bob"), []Descriptor{parent}, "user:alice"); err != nil {
		t.Error(err)
	}
	if err := CheckApprovers(child("user:alice"), []Descriptor{parent}, "user:alice"); err != nil {
		t.Error(err)
	}
	if err := CheckApprovers(child("org:acme/*"), []Descriptor{parent}, "user:alice"); CodeOf(err) != CodeWidening {
		t.Errorf("a wider pattern: %v, want widening", err)
	}
	if err := CheckApprovers(child("user:mallory"), []Descriptor{{}}, "user:alice"); CodeOf(err) != CodeWidening || !strings.Contains(err.Error(), "user:mallory") {
		t.Errorf("a stranger: %v, want widening naming the stranger", err)
	}
}

// FuzzParseRules: the rule parser never panics, and whatever it accepts
// is canonical, hashes inside a descriptor, and survives a round trip.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(`[{"rule_id":"big_spend","capabilities":["purchase"],"targets":["airline_portal/*"],"above":{"budget_usd":300},"approvers":["org:acme/finance/*","user:alice"],"quorum":1,"ttl_seconds":900}]`))
	f.Add([]byte(`[{"rule_id":"a","capabilities":["*"],"approvers":["*"],"quorum":16,"ttl_seconds":86400,"step_ids":["s/*"]}]`))
	f.Add([]byte(`[{"rule_id":"a","capabilities":["x"],"approvers":["u"],"quorum":0,"ttl_seconds":1}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseRules(data)
		if err != nil {
			return
		}
		if err := CheckRules(rs); err != nil {
			t.Fatalf("accepted rules fail CheckRules: %v", err)
		}
		d := Descriptor{Approvals: rs, Capabilities: []string{"x"}, ExpiresAt: "2026-01-01T00:00:00Z", Targets: []string{"t"}, WorkflowID: "wf"}
		if _, err := d.Hash(); err != nil {
			t.Fatalf("a descriptor with accepted rules has no hash: %v", err)
		}
		for i := range rs {
			rs[i].Matches("x", "t", "s", map[string]int64{"usd": 1})
		}
	})
}
