package author

import (
	"strings"
	"testing"

	"github.com/custodylog/custody/statement"
)

const confirmJSON = `{
  "type": "CONFIRM", "timestamp": "2026-03-19T08:12:00Z", "actor": "user:alice",
  "log": "example.com/custody", "seq": 2, "confirm_id": "confirm_1",
  "grantee": {"name": "agent:planner", "public_key": "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="},
  "scope": {"workflow_id": "wf_1", "targets": ["portal/a"], "capabilities": ["purchase"]},
  "ttl_seconds": 900, "revocable": true %s
}`

func TestParseStatementScopeHash(t *testing.T) {
	missing := strings.Replace(confirmJSON, "%s", "", 1)
	if _, _, err := ParseStatement([]byte(missing), false); err == nil || !strings.Contains(err.Error(), "has no scope_hash: custody confirm fills it") {
		t.Fatalf("no scope_hash, no --seal: %v", err)
	}
	st, note, err := ParseStatement([]byte(missing), true)
	if err != nil || note != "" {
		t.Fatalf("--seal: %v %q", err, note)
	}
	sealed := statement.GrantOf(st).ScopeHash
	if len(sealed) != 64 || sealed == strings.Repeat("0", 64) {
		t.Fatalf("sealed scope_hash %q", sealed)
	}
	wrong := strings.Replace(confirmJSON, "%s", `, "scope_hash": "`+strings.Repeat("ab", 32)+`"`, 1)
	st, note, err = ParseStatement([]byte(wrong), false)
	if err != nil || !strings.Contains(note, "scope_hash_mismatch") || statement.GrantOf(st).ScopeHash != strings.Repeat("ab", 32) {
		t.Fatalf("a wrong scope_hash is kept with a note: %v %q", err, note)
	}
}

func TestParseStatementType(t *testing.T) {
	for in, want := range map[string]string{
		`{"seq": 1}`:           `no "type" field`,
		`{"type": "CONFIRMS"}`: `type "CONFIRMS" is not one of`,
		`{"type": "X\u202e"}`:  `\u202e`,
	} {
		if _, _, err := ParseStatement([]byte(in), false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
