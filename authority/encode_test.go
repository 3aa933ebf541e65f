package authority

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/custodylog/custody/scope"
)

// TestAppendRecordMatchesJSON checks that the records appendRecord writes
// are json.Marshal's bytes, whatever their fields hold (empty, nil or
// empty lists and maps, extreme numbers, strings json.Marshal escapes),
// and that it leaves to json.Marshal what it does not write.
func TestAppendRecordMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "a", "wf-1", "ed25519:AbC+/=", "2026-12-02T02:00:00Z", "quote\"", "back\\slash", "<tag>", "a&b",
		"tab\t", "é", "\u2028", "del\x7f", "\xff"}
	str := func() string { return strs[rng.IntN(len(strs))] }
	list := func() []string {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		l := make([]string, 1+rng.IntN(3))
		for i := range l {
			l[i] = str()
		}
		return l
	}
	num := func() uint64 {
		return []uint64{0, 1, 42, 1<<53 - 1, math.MaxUint64}[rng.IntN(5)]
	}
	inum := func() int64 { return []int64{0, 1, -1, 1<<53 - 1, math.MinInt64, math.MaxInt64}[rng.IntN(6)] }
	lim := func() map[string]int64 {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return map[string]int64{}
		}
		m := map[string]int64{}
		for range 1 + rng.IntN(10) {
			m[str()+fmt.Sprint(rng.IntN(20))] = inum()
		}
		return m
	}
	flag := func() bool { return rng.IntN(2) == 0 }
	desc := func() scope.Descriptor {
		d := scope.Descriptor{Capabilities: list(), ExpiresAt: str(), Limits: lim(), Principals: list(), StepIDs: list(), Targets: list(), WorkflowID: str()}
		if rng.IntN(5) == 0 {
			d.Approvals = []scope.Rule{{Approvers: list(), Quorum: 1, RuleID: str()}}
		}
		return d
	}
	written := 0
	for i := range 20000 {
		var rec any
		switch i % 7 {
		case 0:
			rec = &IDRec{Kind: str(), Index: num()}
		case 1:
			rec = &WorkflowRec{Owner: str(), Last: num(), StepStops: inum(), LastStop: num()}
		case 2:
			k := &KeyRec{Role: str(), Name: str(), PublicKey: str(), LastSeq: num(), BoundAt: num(), Retired: flag(), RetiredAt: str()}
			if rng.IntN(4) == 0 {
				k.KeyType, k.RPID, k.Origins, k.AllowedTypes = str(), str(), list(), list()
			}
			rec = k
		case 3:
			p := &PendingRec{ID: str(), Index: num(), SignerKey: str(), Workflow: str(), Grant: str(), Step: str(), Action: str(),
				Target: str(), Reserve: lim(), Outcome: str(), Overrun: flag()}
			if rng.IntN(4) == 0 {
				p.Hold = &HoldRec{}
			}
			rec = p
		case 4:
			rec = &GrantRec{ID: str(), Kind: str(), Index: num(), Workflow: str(), Parent: str(), Depth: inum(), IssuerKey: str(),
				GranteeKey: str(), GranteeName: str(), RootKey: str(), Descriptor: desc(), Revocable: flag(), ScopeHash: str(),
				Revoked: flag(), RevokedAt: str(), RevokedBy: str(), Spent: lim(), NewerHeld: str(), OlderHeld: str(),
				OffHeld: flag(), OnHold: list()}
		case 5:
			rec = &GrantRec{ID: "g", Descriptor: scope.Descriptor{Capabilities: []string{"deploy"}, ExpiresAt: "2027-01-01T00:00:00Z",
				Targets: []string{"prod"}, WorkflowID: "wf"}}
		case 6:
			rec = &KeyWorkflowRec{Held: inum(), Issued: flag(), Newest: str()}
		}
		want, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := encode(rec); !bytes.Equal(got, want) {
			t.Fatalf("encode(%#v)\n got %s\nwant %s", rec, got, want)
		}
		if got, ok := appendRecord([]byte("x"), rec); ok {
			written++
			if !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Fatalf("appendRecord(%#v)\n got %s\nwant x%s", rec, got, want)
			}
		}
	}
	if written < 2000 {
		t.Fatalf("appendRecord wrote only %d of the records itself", written)
	}
}
