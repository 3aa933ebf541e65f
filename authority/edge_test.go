package authority_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestBeforeGenesis: nothing but a GENESIS signed by the admin_key it names,
// at index 0, starts a log; a bad GENESIS is refused (there is no log to
// hold a DENIAL yet).
func TestBeforeGenesis(t *testing.T) {
	k := keyFor("admin")
	build := func(o obj, signer *testKey) *sign.Parsed {
		h := newHarness(t)
		env := h.envelope(signer, statement.Genesis, h.build(k, statement.Genesis, o, opts{}), opts{})
		p, err := sign.ParseEnvelopeValue(env)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name  string
		p     *sign.Parsed
		index uint64
		want  string
	}{
		{"signed by another key", build(obj{}, keyFor("mallory")), 0, "refused/unknown_key"},
		{"not at index 0", build(obj{}, k), 1, "refused/unknown_key"},
		{"seq 2", build(obj{"seq": 2}, k), 0, "refused/seq_mismatch"},
		{"log key = admin key", build(obj{"log_key": verifierKey(testOrigin, k.Pub)}, k), 0, "refused/identity_conflict"},
		{"admin named as the origin", build(obj{"actor": testOrigin}, k), 0, "refused/identity_conflict"},
		{"timestamp out of skew", build(obj{"timestamp": "2026-03-19T07:54:59Z"}, k), 0, "refused/clock_skew"},
		{"good", build(obj{}, k), 0, "accepted"},
	}
	for _, c := range cases {
		e := authority.New(authority.MemStore{})
		d := e.Decide(authority.Submission{Env: c.p}, c.index, t0)
		if got := verdictString(d); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, d.Reason, c.want)
		}
		if (e.Meta() != nil) != (c.want == "accepted") {
			t.Errorf("%s: meta %v after %s", c.name, e.Meta(), c.want)
		}
	}

	// A non-GENESIS statement before GENESIS, even by the future admin.
	h := newHarness(t)
	d := h.submit("admin", statement.Principal, obj{"principal_id": "p", "key": "principal:a"}, opts{})
	if got := verdictString(d); got != "refused/unknown_key" || h.index != 0 {
		t.Errorf("PRINCIPAL before GENESIS: %s at index %d", got, h.index)
	}
}

// TestHugeClockSkew: a clock_skew_seconds beyond what a time.Duration holds
// means "any skew", not the tiny tolerance a wrapped product would give.
func TestHugeClockSkew(t *testing.T) {
	for _, skew := range []int64{18446744074, 9223372037, 1<<53 - 1} {
		h := newHarness(t)
		h.genesis(obj{"clock_skew_seconds": skew})
		h.advance(time.Hour)
		d := h.submit("admin", statement.Principal, obj{"principal_id": "p", "key": "principal:a"}, opts{tsOffset: -24 * 365 * time.Hour})
		if d.Verdict != authority.Accepted {
			t.Errorf("clock_skew_seconds %d: a year's skew is %s %s: %s", skew, d.Verdict, d.Code, d.Reason)
		}
	}
}

// TestSmallOrderKeys: a small-order key is never bound (DESIGN §1).
func TestSmallOrderKeys(t *testing.T) {
	const identity = "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" // y = 1
	h := newHarness(t)
	h.genesis(nil)
	d := h.submit("admin", statement.Principal, obj{"principal_id": "p0", "name": "principal:weak", "public_key": identity}, opts{})
	if d.Code != authority.SchemaInvalid {
		t.Errorf("PRINCIPAL with a small-order key: %s %s", d.Verdict, d.Code)
	}
	h.submit("admin", statement.Principal, obj{"principal_id": "p1", "key": "principal:a"}, opts{})
	d = h.submit("principal:a", statement.Confirm, obj{"confirm_id": "c", "grantee": obj{"name": "agent:weak", "public_key": identity},
		"scope": obj{"workflow_id": "wf", "capabilities": []string{"a"}, "targets": []string{"t"}}}, opts{})
	if d.Code != authority.SchemaInvalid {
		t.Errorf("CONFIRM to a small-order key: %s %s", d.Verdict, d.Code)
	}
}

// failStore fails every Load after n of them, or every Load of a key
// with the prefix fail.
type failStore struct {
	authority.MemStore
	n    int
	fail string
}

var errDisk = errors.New("disk on fire")

func (f *failStore) Load(k string) ([]byte, error) {
	if f.fail != "" {
		if strings.HasPrefix(k, f.fail) {
			return nil, errDisk
		}
		return f.MemStore.Load(k)
	}
	if f.n <= 0 {
		return nil, errDisk
	}
	f.n--
	return f.MemStore.Load(k)
}

// TestStoreFailure: when the store fails the engine refuses (bad_envelope:
// nothing is logged) and keeps refusing until Discard.
func TestStoreFailure(t *testing.T) {
	h := newHarness(t)
	h.genesis(nil)
	h.submit("admin", statement.Principal, obj{"principal_id": "p1", "key": "principal:a"}, opts{})
	h.flush()
	fs := &failStore{MemStore: h.store, n: 0}
	e := authority.New(fs)
	k := keyFor("principal:a")
	env := h.envelope(k, statement.Confirm, h.build(k, statement.Confirm, obj{"confirm_id": "c", "grantee": "agent:x",
		"scope": obj{"workflow_id": "wf", "capabilities": []string{"a"}, "targets": []string{"t"}}}, opts{}), opts{})
	p, _ := sign.ParseEnvelopeValue(env)
	for i := range 2 {
		d := e.Decide(authority.Submission{Env: p}, h.index, h.now)
		if d.Verdict != authority.Refused || d.Code != authority.BadEnvelope {
			t.Fatalf("try %d with a failing store: %s %s", i, d.Verdict, d.Code)
		}
	}
	fs.n = math.MaxInt
	if d := e.Decide(authority.Submission{Env: p}, h.index, h.now); d.Verdict != authority.Refused {
		t.Fatalf("the engine decided after a store failure, before Discard: %s", d.Verdict)
	}
	e.Discard()
	if d := e.Decide(authority.Submission{Env: p}, h.index, h.now); d.Verdict != authority.Accepted {
		t.Fatalf("after Discard: %s %s %s", d.Verdict, d.Code, d.Reason)
	}
}

// TestStoreFailureMidDecision: a store that fails while the rules read it
// must not yield a decision: a record that could not be read is not an
// absent record. The submission names agent:x, a name already bound to
// another key; with the name record unreadable, deciding anyway would
// accept it and bind the name twice. Whatever fails, the answer is the
// healthy one or a refusal, and a refusal leaves no dirty record behind.
func TestStoreFailureMidDecision(t *testing.T) {
	for _, prefix := range []string{"name/", "key/", "meta", "grant/", "keywf/", "wf/", "id/"} {
		h := newHarness(t)
		h.genesis(nil)
		h.submit("admin", statement.Principal, obj{"principal_id": "p1", "key": "principal:a"}, opts{})
		h.submit("principal:a", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:x",
			"scope": obj{"workflow_id": "wf", "capabilities": []string{"a"}, "targets": []string{"t"}}}, opts{})
		h.advance(time.Second)
		h.flush()
		k := keyFor("principal:a")
		env := h.envelope(k, statement.Confirm, h.build(k, statement.Confirm, obj{"confirm_id": "c2",
			"grantee": obj{"name": "agent:x", "key": "agent:y"},
			"scope":   obj{"workflow_id": "wf2", "capabilities": []string{"a"}, "targets": []string{"t"}}}, opts{}), opts{})
		p, _ := sign.ParseEnvelopeValue(env)
		healthy := authority.New(h.store).Decide(authority.Submission{Env: p}, h.index, h.now)
		if healthy.Code != authority.IdentityConflict {
			t.Fatalf("healthy store: %s %s", healthy.Verdict, healthy.Code)
		}
		e := authority.New(&failStore{MemStore: h.store, fail: prefix})
		d := e.Decide(authority.Submission{Env: p}, h.index, h.now)
		got := verdictString(d)
		if got != verdictString(healthy) && got != "refused/bad_envelope" || prefix == "name/" && got != "refused/bad_envelope" {
			t.Errorf("store failing on %s: %s (%s)", prefix, got, d.Reason)
		}
		if d.Verdict == authority.Refused && len(dirtyMap(e)) != 0 {
			t.Errorf("store failing on %s: a refusal left dirty records %v", prefix, dirtyMap(e))
		}
	}
}

// TestDryRunChangesNothing: DryRun decides as Decide does and leaves the
// state as it was.
func TestDryRunChangesNothing(t *testing.T) {
	g := newGen(t, 7)
	for range 300 {
		g.step()
	}
	g.h.flush()
	before := dirtyMap(g.h.e)
	for _, gid := range g.grants {
		gr := g.h.e.Grant(gid)
		signer := keyFor(g.handles[gr.GranteeKey])
		o := obj{"receipt_id": g.id("dry"), "authorization_ref": gid, "action": gr.Descriptor.Capabilities[0], "target": "t/0/0"}
		if m := g.limitsInForce(gr); len(m) > 0 {
			o["reserve"] = anyMap(m)
		}
		env := g.h.envelope(signer, statement.Receipt, g.h.build(signer, statement.Receipt, o, opts{}), opts{})
		p, _ := sign.ParseEnvelopeValue(env)
		dry := g.h.e.DryRun(authority.Submission{Env: p}, g.h.index, g.h.now)
		if after := dirtyMap(g.h.e); len(after) != len(before) {
			t.Fatalf("DryRun left %d dirty records", len(after))
		}
		real := g.h.submitEnv(env, false)
		if verdictString(dry) != verdictString(real) {
			t.Fatalf("DryRun said %s, Decide %s", verdictString(dry), verdictString(real))
		}
		g.h.flush()
	}
}

func anyMap(m map[string]int64) obj {
	o := obj{}
	for k := range m {
		o[k] = 1
	}
	return o
}

// TestBudgetRace: 64 agents, each holding its own delegation under one
// grant with a budget, submit a pending receipt at the same moment; the
// sequencer decides them in whatever order they arrive. The sum reserved
// never exceeds the limit and exactly floor(limit/each) are accepted.
func TestBudgetRace(t *testing.T) {
	for _, c := range []struct{ limit, each int64 }{{1000, 70}, {64 * 15, 15}, {64*15 - 1, 15}, {0, 1}, {999, 1000}} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("limit%d/each%d/seed%d", c.limit, c.each, seed), func(t *testing.T) {
				budgetRace(t, c.limit, c.each, seed)
			})
		}
	}
}

func budgetRace(t *testing.T, limit, each int64, seed uint64) {
	const n = 64
	h := newHarness(t)
	h.genesis(nil)
	h.submit("admin", statement.Principal, obj{"principal_id": "p", "key": "principal:a"}, opts{})
	h.submit("principal:a", statement.Confirm, obj{"confirm_id": "c", "grantee": "agent:root",
		"scope": obj{"workflow_id": "wf", "capabilities": []string{"buy"}, "targets": []string{"shop/*"}}, "limits": obj{"usd": limit}}, opts{})
	for i := range n {
		d := h.submit("agent:root", statement.Delegate, obj{"delegation_id": fmt.Sprintf("d%d", i), "parent_ref": "c",
			"grantee": fmt.Sprintf("agent:w%d", i), "scope": obj{"capabilities": []string{"buy"}, "targets": []string{fmt.Sprintf("shop/%d", i)}},
			"limits": obj{"usd": limit}, "ttl_seconds": 600}, opts{})
		if d.Verdict != authority.Accepted {
			t.Fatalf("delegation %d: %s %s", i, d.Code, d.Reason)
		}
	}
	h.advance(time.Second)

	// Each agent signs at once; the sequencer takes them as they come, and
	// a seeded shuffle of the arrivals stands in for the scheduler.
	hashes := make([]string, n)
	for i := range n {
		hashes[i] = h.e.Grant(fmt.Sprintf("d%d", i)).ScopeHash
	}
	envs := make(chan sign.Envelope, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := keyFor(fmt.Sprintf("agent:w%d", i))
			o := obj{"receipt_id": fmt.Sprintf("r%d", i), "authorization_ref": fmt.Sprintf("d%d", i), "action": "buy",
				"target": fmt.Sprintf("shop/%d", i), "step_id": "pay", "workflow_id": "wf", "reserve": obj{"usd": each},
				"type": "RECEIPT", "timestamp": statement.FormatTimestamp(h.now), "log": testOrigin, "actor": k.Handle, "seq": 1,
				"result": "pending", "scope_hash": hashes[i]}
			envs <- signRaw(t, h, k, o)
		})
	}
	wg.Wait()
	close(envs)
	var arrived []sign.Envelope
	for env := range envs {
		arrived = append(arrived, env)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	r.Shuffle(len(arrived), func(i, j int) { arrived[i], arrived[j] = arrived[j], arrived[i] })

	accepted, reserved := int64(0), int64(0)
	for _, env := range arrived {
		h.advance(time.Millisecond)
		d := h.submitEnv(env, false)
		switch {
		case d.Verdict == authority.Accepted:
			accepted++
			reserved += each
		case d.Code != authority.LimitExceeded:
			t.Fatalf("%s %s: %s", d.Verdict, d.Code, d.Reason)
		}
		if spent := h.e.Grant("c").Spent["usd"]; spent != reserved || spent > limit {
			t.Fatalf("c charged %d, reserved %d, limit %d", spent, reserved, limit)
		}
	}
	want := limit / each
	if want > n {
		want = n
	}
	if accepted != want {
		t.Fatalf("%d accepted, want floor(%d/%d) = %d", accepted, limit, each, want)
	}
	if _, err := replayAllErr(h.leaves); err != nil {
		t.Fatal(err)
	}
}

// signRaw signs a receipt whose fields are all given; it does not touch the
// engine, so goroutines may call it.
func signRaw(t *testing.T, h *harness, k *testKey, o obj) sign.Envelope {
	b, err := json.Marshal(o)
	if err == nil {
		b, err = canon.Canonicalize(b)
	}
	if err != nil {
		panic(err)
	}
	env, err := sign.Sign(k.Priv, "receipt", b)
	if err != nil {
		panic(err)
	}
	return env
}

func replayAllErr(leaves [][]byte) (*authority.Engine, error) {
	e := authority.New(authority.MemStore{})
	for i, l := range leaves {
		if _, err := e.Replay(uint64(i), l); err != nil {
			return nil, err
		}
	}
	return e, nil
}
