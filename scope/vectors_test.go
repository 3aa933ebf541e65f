package scope

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/custodylog/custody/canon"
)

// testdata returns the path of a file in the repository's top-level
// testdata folder.
func testdata(elem ...string) string {
	return filepath.Join(append([]string{"..", "testdata"}, elem...)...)
}

// readJSON reads a testdata file into v with canon's strict profile and
// closed schema, so a typo in a vector file fails instead of being ignored.
func readJSON(t testing.TB, v any, elem ...string) {
	t.Helper()
	data, err := os.ReadFile(testdata(elem...))
	if err != nil {
		t.Fatal(err)
	}
	if err := canon.UnmarshalRelaxed(data, v); err != nil {
		t.Fatalf("%s: %v", filepath.Join(elem...), err)
	}
}

// grantJSON is a Grant as the attenuation table writes it: the
// descriptor's fields with "revocable" beside them.
type grantJSON struct {
	Capabilities []string         `json:"capabilities"`
	ExpiresAt    string           `json:"expires_at"`
	Limits       map[string]int64 `json:"limits,omitempty"`
	Principals   []string         `json:"principals,omitempty"`
	Revocable    bool             `json:"revocable"`
	Final        bool             `json:"final,omitempty"` // at max_depth
	StepIDs      []string         `json:"step_ids,omitempty"`
	Targets      []string         `json:"targets"`
	WorkflowID   string           `json:"workflow_id"`
}

func (g *grantJSON) grant() Grant {
	return Grant{
		Descriptor: Descriptor{
			Capabilities: g.Capabilities,
			ExpiresAt:    g.ExpiresAt,
			Limits:       g.Limits,
			Principals:   g.Principals,
			StepIDs:      g.StepIDs,
			Targets:      g.Targets,
			WorkflowID:   g.WorkflowID,
		},
		Revocable: g.Revocable,
		Final:     g.Final,
	}
}

// tableCase is one row of testdata/scope/attenuation.json.
type tableCase struct {
	Name      string       `json:"name"`
	Check     string       `json:"check,omitempty"` // "" (attenuates), "depth", "grantee"
	Parent    *grantJSON   `json:"parent,omitempty"`
	Child     *grantJSON   `json:"child,omitempty"`
	NewDepth  int          `json:"new_depth,omitempty"`
	MaxDepth  int          `json:"max_depth,omitempty"`
	Grantee   string       `json:"grantee,omitempty"`
	Ancestors []Descriptor `json:"ancestors,omitempty"`
	Want      string       `json:"want"`          // "ok" or a Code
	Msg       string       `json:"msg,omitempty"` // a substring the message must hold
}

type tableFile struct {
	Note  string      `json:"note"`
	Cases []tableCase `json:"cases"`
}

type hashVector struct {
	Name       string     `json:"name"`
	Descriptor Descriptor `json:"descriptor"`
	JCS        string     `json:"jcs,omitempty"`
	ScopeHash  string     `json:"scope_hash"`
}
