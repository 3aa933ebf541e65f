package scope

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestTable runs testdata/scope/attenuation.json: attenuation, depth and
// principal cases with the expected code (or "ok") and, where given, a
// substring of the message.
func TestTable(t *testing.T) {
	var f tableFile
	readJSON(t, &f, "scope", "attenuation.json")
	if len(f.Cases) < 50 {
		t.Fatalf("%d cases, want at least 50", len(f.Cases))
	}
	seen := map[string]bool{}
	for _, tc := range f.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			var err error
			switch tc.Check {
			case "":
				if tc.Parent == nil || tc.Child == nil {
					t.Fatal("attenuation case needs parent and child")
				}
				err = Attenuates(tc.Parent.grant(), tc.Child.grant())
			case "depth":
				err = CheckDepth(tc.NewDepth, tc.MaxDepth)
			case "grantee":
				err = CheckGrantee(tc.Grantee, tc.Ancestors)
			default:
				t.Fatalf("unknown check %q", tc.Check)
			}
			checkResult(t, err, tc.Want, tc.Msg)
		})
		seen[tc.Want] = true
	}
	for _, c := range []Code{CodeNonCanonical, CodeWorkflowMismatch, CodeWidening, CodeLimitMissing,
		CodeLimitWidened, CodeExpiryWidened, CodeRevocabilityWidened, CodeEqualScope,
		CodePrincipalMismatch, CodeDepthExceeded} {
		if !seen[string(c)] {
			t.Errorf("no table case expects %s", c)
		}
	}
	if !seen["ok"] {
		t.Error("no table case expects ok")
	}
}

func checkResult(t *testing.T, err error, want, msg string) {
	t.Helper()
	if want == "ok" {
		if err != nil {
			t.Fatalf("got %v, want ok", err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want *Error with code %s", err, want)
	}
	if string(e.Code) != want {
		t.Fatalf("got %v, want code %s", err, want)
	}
	if e.Msg == "" {
		t.Error("empty message")
	}
	if !strings.Contains(e.Msg, msg) {
		t.Errorf("message %q does not contain %q", e.Msg, msg)
	}
}

// TestAttenuatesNonCanonicalInGo covers what canonical JSON cannot even
// express, so the table cannot: empty sets and nil required sets.
func TestAttenuatesNonCanonicalInGo(t *testing.T) {
	p := Grant{Descriptor: Descriptor{Capabilities: []string{"a", "b"}, ExpiresAt: "2026-03-19T08:27:00Z", Targets: []string{"t"}, WorkflowID: "wf"}}
	for name, mutate := range map[string]func(*Descriptor){
		"empty step_ids":      func(d *Descriptor) { d.StepIDs = []string{} },
		"empty principals":    func(d *Descriptor) { d.Principals = []string{} },
		"nil targets":         func(d *Descriptor) { d.Targets = nil },
		"empty capabilities":  func(d *Descriptor) { d.Capabilities = []string{} },
		"limit above 2^53-1":  func(d *Descriptor) { d.Limits = map[string]int64{"x": MaxInt + 1} },
		"empty limit key":     func(d *Descriptor) { d.Limits = map[string]int64{"": 1} },
		"non-ASCII target":    func(d *Descriptor) { d.Targets = []string{"t\u202e"} },
		"empty workflow":      func(d *Descriptor) { d.WorkflowID = "" },
		"missing expires_at":  func(d *Descriptor) { d.ExpiresAt = "" },
		"257-byte capability": func(d *Descriptor) { d.Capabilities = []string{strings.Repeat("a", 257)} },
	} {
		c := p
		c.Capabilities = []string{"a"}
		mutate(&c.Descriptor)
		err := Attenuates(p, c)
		if CodeOf(err) != CodeNonCanonical || !strings.HasPrefix(err.(*Error).Msg, "child: ") {
			t.Errorf("%s: got %v, want non_canonical about the child", name, err)
		}
		if strings.ContainsRune(err.Error(), '\u202e') {
			t.Errorf("%s: message carries a raw bidi override: %q", name, err)
		}
	}
	if err := Attenuates(p, Grant{Descriptor: Descriptor{Capabilities: []string{"a"}, ExpiresAt: "2026-03-19T08:27:00Z", Targets: []string{"t"}, WorkflowID: "wf"}}); err != nil {
		t.Errorf("control case: %v", err)
	}
}

// TestAttenuatesLongSetMessage checks that a message lists a bounded part
// of a long set.
func TestAttenuatesLongSetMessage(t *testing.T) {
	var targets []string
	for c := 'a'; c <= 'z'; c++ {
		targets = append(targets, string(c))
	}
	p := Grant{Descriptor: Descriptor{Capabilities: []string{"x"}, ExpiresAt: "2026-03-19T08:27:00Z", Targets: targets, WorkflowID: "wf"}}
	c := p
	c.Targets = []string{"zz"}
	err := Attenuates(p, c)
	if CodeOf(err) != CodeWidening || !strings.Contains(err.Error(), "(18 more)") {
		t.Errorf("got %v", err)
	}
}

func TestInScope(t *testing.T) {
	d := Descriptor{
		Capabilities: []string{"purchase", "submit_form"},
		ExpiresAt:    "2026-03-19T08:27:00Z",
		StepIDs:      []string{"step_2", "step_3/*"},
		Targets:      []string{"airline_portal/*"},
		WorkflowID:   "wf_9f3a",
	}
	for _, tc := range []struct {
		action, target, step string
		want                 Code
		msg                  string
	}{
		{"purchase", "airline_portal/account_123", "step_2", "", ""},
		{"submit_form", "airline_portal/a/b", "step_3/x", "", ""},
		{"refund", "airline_portal/account_123", "step_2", CodeOutOfScope, `capability "refund"`},
		{"purchase", "airline_portal", "step_2", CodeOutOfScope, `target "airline_portal"`},
		{"purchase", "bank/x", "step_2", CodeOutOfScope, "target"},
		{"purchase", "airline_portal/a", "step_3", CodeOutOfScope, `step "step_3"`},
		{"purchase", "airline_portal/a", "step_4", CodeOutOfScope, "step_ids"},
		{"purchase", "airline_portal/a", "", CodeNonCanonical, "step"},
		{"purchase", "airline_portal/../x", "step_2", CodeNonCanonical, "target"},
	} {
		err := InScope(d, tc.action, tc.target, tc.step)
		if CodeOf(err) != tc.want || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("InScope(%q, %q, %q) = %v, want %q containing %q", tc.action, tc.target, tc.step, err, tc.want, tc.msg)
		}
	}
	// Absent step_ids: any step.
	d.StepIDs = nil
	if err := InScope(d, "purchase", "airline_portal/a", "anything/at/all"); err != nil {
		t.Error(err)
	}
	// A required set left nil covers nothing.
	d.Capabilities = nil
	if err := InScope(d, "purchase", "airline_portal/a", "s"); CodeOf(err) != CodeOutOfScope {
		t.Errorf("nil capabilities: %v", err)
	}
}

func TestCheckDepthRejectsImpossible(t *testing.T) {
	for _, c := range [][2]int{{0, 3}, {-1, 3}, {1, 0}} {
		if err := CheckDepth(c[0], c[1]); CodeOf(err) != CodeDepthExceeded {
			t.Errorf("CheckDepth(%d, %d) = %v", c[0], c[1], err)
		}
	}
	if err := CheckDepth(DefaultMaxDepth, DefaultMaxDepth); err != nil {
		t.Error(err)
	}
}

func TestCheckGranteeEmptyPrincipals(t *testing.T) {
	// A non-nil empty principals set (never canonical) admits nobody.
	if err := CheckGrantee("agent:a", []Descriptor{{Principals: []string{}}}); CodeOf(err) != CodePrincipalMismatch {
		t.Errorf("got %v", err)
	}
}

func TestErrorsAs(t *testing.T) {
	err := CheckDepth(4, 3)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeDepthExceeded {
		t.Fatalf("errors.As: %v", err)
	}
	if err.Error() != "depth_exceeded: "+e.Msg {
		t.Errorf("Error() = %q", err.Error())
	}
	if CodeOf(nil) != "" || CodeOf(errors.New("x")) != "" {
		t.Error("CodeOf of a foreign error")
	}
}

// TestEqualScopeNearLengthLimit pins the one way two different canonical
// sets can mean the same: a wildcard two bytes from the 256-byte limit
// matches exactly the 4828 identifiers with a one- or two-byte last
// segment, so a child listing all of them is a transfer.
func TestEqualScopeNearLengthLimit(t *testing.T) {
	prefix := strings.Repeat("q", 253) + "/"
	var all []string
	allSegments(nil, 2, func(s []byte) bool {
		all = append(all, prefix+string(s))
		return true
	})
	slices.Sort(all)
	if len(all) != 68+69*69-1 {
		t.Fatalf("%d identifiers", len(all))
	}
	parent := Grant{Descriptor: Descriptor{Capabilities: []string{"x"}, ExpiresAt: "2026-03-19T08:27:00Z", Targets: []string{prefix + "*"}, WorkflowID: "wf"}}
	child := parent
	child.Targets = all
	if err := Attenuates(parent, child); CodeOf(err) != CodeEqualScope {
		t.Errorf("all %d identifiers: %v, want equal_scope", len(all), err)
	}
	for _, drop := range []int{0, 67, len(all) - 1} {
		child.Targets = slices.Delete(slices.Clone(all), drop, drop+1)
		if err := Attenuates(parent, child); err != nil {
			t.Errorf("without %q: %v, want ok", all[drop], err)
		}
	}
}
