package ledger

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// TestBudgetRace: 64 agents' pending receipts race for one budget through
// the real pipeline. Exactly floor(limit/each) win, the sum reserved never
// exceeds the limit, and the stored state equals a replay.
func TestBudgetRace(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	const racers, limit, each = 64, 1000, 30 // 33 can win
	type racer struct {
		a    *actor
		hash string
		id   string
	}
	var rs []racer
	for i := 0; i < racers; i++ {
		a := newActor(t, fmt.Sprintf("agent:r%02d", i))
		c := w.confirm(alice, fmt.Sprintf("c%02d", i), grant(a, "wf_race", []string{"shop/*"}, []string{"buy"}, nil, map[string]int64{"usd": limit}, 900))
		w.must(alice, c, authority.Accepted, "")
		rs = append(rs, racer{a: a, hash: c.ScopeHash, id: c.ConfirmID})
	}
	// All racers spend from one shared parent: each racer's grant is a
	// delegation from a single planner.
	planner := newActor(t, "agent:planner")
	pc := w.confirm(alice, "c_planner", grant(planner, "wf_shared", []string{"shop/*"}, []string{"buy"}, nil, map[string]int64{"usd": limit}, 900))
	w.must(alice, pc, authority.Accepted, "")
	var envs [][]byte
	for i := range rs {
		d := w.delegate(planner, fmt.Sprintf("d%02d", i), "c_planner", pc.ScopeHash,
			grant(rs[i].a, "wf_shared", []string{"shop/a"}, []string{"buy"}, nil, map[string]int64{"usd": limit - 1}, 600))
		w.must(planner, d, authority.Accepted, "")
		p := w.pending(rs[i].a, fmt.Sprintf("r%02d", i), "wf_shared", d.DelegationID, d.ScopeHash, "s", "buy", "shop/a", map[string]int64{"usd": each})
		if err := statement.Seal(p); err != nil {
			t.Fatal(err)
		}
		_, raw, err := statement.Sign(rs[i].a.priv, p)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, raw)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		denied   = map[authority.Code]int{}
	)
	for _, env := range envs {
		wg.Add(1)
		go func(env []byte) {
			defer wg.Done()
			res, err := w.l.Append(context.Background(), env)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Verdict == authority.Accepted {
				accepted++
			} else {
				denied[res.Code]++
			}
		}(env)
	}
	wg.Wait()
	if accepted != limit/each || denied[authority.LimitExceeded] != racers-limit/each {
		t.Fatalf("accepted %d, denied %v; want %d accepted", accepted, denied, limit/each)
	}
	state, err := w.l.StateRecords()
	if err != nil {
		t.Fatal(err)
	}
	var g authority.GrantRec
	if err := jsonUnmarshal(state["grant/c_planner"], &g); err != nil {
		t.Fatal(err)
	}
	if g.Spent["usd"] != int64(accepted*each) || g.Spent["usd"] > limit {
		t.Fatalf("planner grant spent %d, want %d (limit %d)", g.Spent["usd"], accepted*each, limit)
	}
	compareState(t, w.l, w.replay())
}
