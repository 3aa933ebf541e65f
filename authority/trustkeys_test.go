package authority_test

import (
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// expect requires a decision's verdict and code ("accepted", or
// "denied/<code>").
func expect(t *testing.T, what string, d authority.Decision, want string) {
	t.Helper()
	got := d.Verdict.String()
	if d.Verdict != authority.Accepted {
		got += "/" + string(d.Code)
	}
	if got != want {
		t.Fatalf("%s: %s (%s), want %s", what, got, d.Reason, want)
	}
}

// TestRotateDenialKey: an admin PRINCIPAL statement of op log_key names a
// new DENIAL key (DESIGN §1). From its entry on only the new key signs
// DENIALs, the old one is retired for good and stays bound in role log,
// and a replay of the log follows the rotation; a DENIAL the old key
// signs after it is caught.
func TestRotateDenialKey(t *testing.T) {
	h := newHarness(t)
	h.genesis(nil)
	expect(t, "enroll alice", h.submit("admin", statement.Principal, obj{"principal_id": "p1", "key": "user:alice"}, opts{}), "accepted")
	oldID := h.e.DenialKeyID()
	if oldID != h.logKey.KID {
		t.Fatalf("DenialKeyID %s, the GENESIS log key is %s", oldID, h.logKey.KID)
	}
	// A denial before the rotation, signed by the old key.
	expect(t, "a principal's CONFIRM with a bad scope hash", h.submit("user:alice", statement.Confirm, obj{"confirm_id": "c0",
		"grantee": "agent:x", "scope": obj{"workflow_id": "wf1", "capabilities": []string{"a"}, "targets": []string{"t"}}, "scope_hash": zeroHash}, opts{}),
		"denied/scope_hash_mismatch")

	newKey := keyFor("custody.test/denials-2")
	for _, tc := range []struct {
		name   string
		signer string
		o      obj
		want   string
	}{
		{"not the origin's name", "admin", obj{"principal_id": "lk_bad", "op": "log_key", "name": "user:other", "public_key": newKey.B64}, "denied/identity_conflict"},
		{"a key bound already", "admin", obj{"principal_id": "lk_bad", "op": "log_key", "name": testOrigin, "public_key": keyFor("user:alice").B64}, "denied/identity_conflict"},
		{"the old key again", "admin", obj{"principal_id": "lk_bad", "op": "log_key", "name": testOrigin, "public_key": h.logKey.B64}, "denied/identity_conflict"},
		{"by a principal", "user:alice", obj{"principal_id": "lk_bad", "op": "log_key", "name": testOrigin, "public_key": newKey.B64}, "denied/not_authorized"},
	} {
		expect(t, tc.name, h.submit(tc.signer, statement.Principal, tc.o, opts{}), tc.want)
	}
	if h.e.DenialKeyID() != oldID {
		t.Fatal("a denied rotation changed the DENIAL key")
	}
	expect(t, "the rotation", h.submit("admin", statement.Principal, obj{"principal_id": "lk1", "op": "log_key", "name": testOrigin, "public_key": newKey.B64}, opts{}), "accepted")
	// The harness signs DENIALs with the new key from now on.
	oldKey := h.logKey
	h.logKey = newKey
	if h.e.DenialKeyID() != newKey.KID {
		t.Fatalf("after the rotation DenialKeyID is %s, want the new key %s", h.e.DenialKeyID(), newKey.KID)
	}
	old := h.e.Key(oldID)
	if old == nil || old.Role != authority.RoleLog || !old.Retired {
		t.Fatalf("the old DENIAL key: %+v, want it bound as log, retired", old)
	}
	if k := h.e.Key(newKey.KID); k == nil || k.Role != authority.RoleLog || k.Name != testOrigin {
		t.Fatalf("the new DENIAL key: %+v", k)
	}
	expect(t, "rotating to a retired DENIAL key", h.submit("admin", statement.Principal, obj{"principal_id": "lk2", "op": "log_key", "name": testOrigin, "public_key": h.logKey.B64}, opts{}), "denied/identity_conflict")

	// A replay follows the rotation from the trust chain.
	expect(t, "a denial after the rotation", h.submit("user:alice", statement.Confirm, obj{"confirm_id": "c1",
		"grantee": "agent:x", "scope": obj{"workflow_id": "wf1", "capabilities": []string{"a"}, "targets": []string{"t"}}, "scope_hash": zeroHash}, opts{}),
		"denied/scope_hash_mismatch")
	_, ds := replayAll(t, h.leaves)
	if last := ds[len(ds)-1]; last.Verdict != authority.Denied {
		t.Fatalf("replayed the last leaf as %s", last.Verdict)
	}

	// The same DENIAL signed by the old key is caught.
	h.leaves = h.leaves[:len(h.leaves)-1]
	h.index--
	h.logKey = oldKey
	h.e = replayed(t, h.leaves)
	h.submit("user:alice", statement.Confirm, obj{"confirm_id": "c1",
		"grantee": "agent:x", "scope": obj{"workflow_id": "wf1", "capabilities": []string{"a"}, "targets": []string{"t"}}, "scope_hash": zeroHash}, opts{seqDelta: 0})
	err := replayUntilError(h.leaves)
	if err == nil || !strings.Contains(err.Error(), "not the log key") {
		t.Fatalf("a DENIAL signed by the retired key after the rotation: %v", err)
	}
}

func replayed(t *testing.T, leaves [][]byte) *authority.Engine {
	e, _ := replayAll(t, leaves)
	return e
}
