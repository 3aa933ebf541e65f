package authority_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// gen writes a random but plausible log: several workflows, chains up to
// and past max_depth, budgets spent and overrun, revocations, STOPs and
// RESUMEs, retirements, and deliberate faults, so that a good share of
// submissions is denied for many different reasons.
type gen struct {
	h       *harness
	r       *rand.Rand
	handles map[string]string // key id -> handle
	princ   []string          // enrolled principals, in order
	retired map[string]bool
	grants  []string // accepted grants, in order
	pending []string // open pending receipts
	closed  []string // pending receipts with an outcome
	stops   []string // STOPs in force
	n       int
	kinds   map[string]int // kind/verdict -> count
	epoch   [8]int         // workflow k is named wf<k>.<epoch[k]>
}

func newGen(tb testing.TB, seed uint64) *gen {
	g := &gen{h: newHarness(tb), r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		handles: map[string]string{}, retired: map[string]bool{}, kinds: map[string]int{}}
	g.key("admin")
	g.h.genesis(obj{"max_depth": 3, "max_ttl_seconds": 20000})
	for i := range 4 {
		g.enroll(fmt.Sprintf("principal:p%d", i))
	}
	return g
}

func (g *gen) id(prefix string) string {
	g.n++
	return fmt.Sprintf("%s-%d", prefix, g.n)
}

func (g *gen) key(handle string) string {
	k := keyFor(handle)
	g.handles[k.KID] = handle
	return handle
}

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

// recent picks from the last n elements, where the live ones tend to be.
func (g *gen) recent(list []string, n int) string {
	if len(list) > n {
		list = list[len(list)-n:]
	}
	return g.pick(list)
}

// grant picks a recent grant, most often a live one.
func (g *gen) grant() string {
	if g.r.IntN(100) < 85 {
		var live []string
		for _, id := range g.grants[max(0, len(g.grants)-60):] {
			if g.live(g.h.e.Grant(id)) {
				live = append(live, id)
			}
		}
		if len(live) > 0 {
			return g.pick(live)
		}
	}
	return g.recent(g.grants, 30)
}

// live is the generator's guess whether a grant's chain is live now.
func (g *gen) live(gr *authority.GrantRec) bool {
	for gr != nil {
		exp, _ := time.Parse(time.RFC3339, gr.Descriptor.ExpiresAt)
		if gr.Revoked || !g.h.now.Before(exp) {
			return false
		}
		if gr.Parent == "" {
			return !g.retired[g.handles[gr.RootKey]]
		}
		gr = g.h.e.Grant(gr.Parent)
	}
	return false
}

func (g *gen) enroll(name string) {
	g.key(name)
	g.submit("admin", statement.Principal, obj{"principal_id": g.id("p"), "key": name}, opts{})
	g.princ = append(g.princ, name)
}

// submit submits with a chance of one deliberate fault.
func (g *gen) submit(signer string, kind statement.Kind, o obj, op opts) authority.Decision {
	if g.r.IntN(100) < 12 {
		switch g.r.IntN(9) {
		case 0:
			op.seqDelta = int64(g.r.IntN(3)) - 1
		case 1:
			op.tsOffset = time.Duration(301+g.r.IntN(100)) * time.Second
			if g.r.IntN(2) == 0 {
				op.tsOffset = -op.tsOffset
			}
		case 2:
			o["log"] = "other.test/log"
		case 3:
			o["actor"] = "agent:nobody"
		case 4:
			if kind == statement.Confirm || kind == statement.Delegate || kind == statement.Receipt {
				o["scope_hash"] = strings.Repeat("ab", 32)
			}
		case 5:
			op.tamperSig = true
		case 6:
			signer = g.key(fmt.Sprintf("agent:stranger/%d", g.r.IntN(3)))
		case 7:
			if len(g.grants) > 0 { // reuse an id
				for _, f := range []string{"confirm_id", "delegation_id", "receipt_id", "request_id", "resume_id", "revoke_id", "principal_id"} {
					if _, ok := o[f]; ok {
						o[f] = g.pick(g.grants)
					}
				}
			}
		case 8:
			op.form = "indent"
		}
	}
	d := g.h.submit(signer, kind, o, op)
	g.kinds[string(kind)+"/"+verdictString(d)]++
	return d
}

var capsAll = []string{"buy", "read", "sell", "write"}

func (g *gen) step() {
	g.h.advance(time.Duration(g.r.IntN(3000)) * time.Millisecond)
	switch x := g.r.IntN(100); {
	case x < 6 || len(g.grants) == 0:
		g.confirm()
	case x < 20:
		g.delegate()
	case x < 55:
		g.pend()
	case x < 78:
		g.outcome()
	case x < 81:
		g.revoke()
	case x < 88:
		g.stop()
	case x < 97:
		g.resume()
	default:
		g.principal()
	}
}

func (g *gen) confirm() {
	p := g.pick(g.princ)
	k := g.r.IntN(len(g.epoch))
	wf := fmt.Sprintf("wf%d.%d", k, g.epoch[k])
	if w := g.h.e.Workflow(wf); w != nil && g.r.IntN(10) != 0 {
		p = g.handles[w.Owner]
		if g.retired[p] { // its owner can no longer grant: start a new one
			g.epoch[k]++
			wf = fmt.Sprintf("wf%d.%d", k, g.epoch[k])
			p = g.pick(g.princ)
		}
	}
	var grantee any = g.key(fmt.Sprintf("agent:%s/a%d", wf, g.r.IntN(6)))
	if g.r.IntN(20) == 0 { // an agent key under another name
		grantee = obj{"name": g.id("agent:renamed"), "key": grantee}
	}
	var caps []string
	for _, c := range capsAll {
		if g.r.IntN(2) == 0 {
			caps = append(caps, c)
		}
	}
	if caps == nil {
		caps = []string{"buy"}
	}
	sc := obj{"workflow_id": wf, "capabilities": caps, "targets": []string{"t/*"}}
	if g.r.IntN(3) == 0 {
		sc["principals"] = []string{"agent:" + wf + "/*"}
	}
	o := obj{"confirm_id": g.id("c"), "grantee": grantee, "scope": sc, "ttl_seconds": 600 + g.r.IntN(19000),
		"revocable": g.r.IntN(6) != 0}
	if g.r.IntN(4) != 0 {
		o["limits"] = obj{"usd": 100 + g.r.IntN(2000), "n": 5 + g.r.IntN(50)}
	}
	if d := g.submit(p, statement.Confirm, o, opts{}); d.Verdict == authority.Accepted {
		g.grants = append(g.grants, d.Statement.ID())
	}
}

func (g *gen) delegate() {
	pid := g.grant()
	parent := g.h.e.Grant(pid)
	holder := g.handles[parent.GranteeKey]
	pd := parent.Descriptor
	caps := slices.Clone(pd.Capabilities)
	targets := slices.Clone(pd.Targets)
	narrowed := false
	if len(caps) > 1 && g.r.IntN(2) == 0 {
		i := g.r.IntN(len(caps))
		caps = slices.Delete(caps, i, i+1)
		narrowed = true
	}
	if !narrowed || g.r.IntN(2) == 0 {
		t := targets[g.r.IntN(len(targets))]
		if strings.HasSuffix(t, "/*") {
			t = strings.TrimSuffix(t, "*") + fmt.Sprint(g.r.IntN(4)) + "/*"
		}
		targets = []string{t}
	}
	if g.r.IntN(15) == 0 {
		targets = []string{"u/*"} // widening
	}
	wf := parent.Workflow
	sc := obj{"capabilities": caps, "targets": targets}
	if pd.Principals != nil && g.r.IntN(10) != 0 {
		sc["principals"] = pd.Principals
	}
	limits := obj{}
	for k, v := range pd.Limits {
		if g.r.IntN(12) == 0 {
			continue // limit_missing
		}
		nv := v * int64(30+g.r.IntN(71)) / 100
		if g.r.IntN(15) == 0 {
			nv = v + 1
		}
		limits[k] = nv
	}
	exp, _ := time.Parse(time.RFC3339, pd.ExpiresAt)
	ttl := int64(exp.Sub(g.h.now)/time.Second) - int64(g.r.IntN(300))
	if g.r.IntN(10) == 0 {
		ttl += 1000
	}
	if ttl < 1 {
		ttl = 1
	}
	if ttl > 20000 {
		ttl = 20000
	}
	o := obj{"delegation_id": g.id("d"), "parent_ref": pid, "grantee": g.key(fmt.Sprintf("agent:%s/a%d", wf, g.r.IntN(12))),
		"scope": sc, "ttl_seconds": ttl, "revocable": parent.Revocable || g.r.IntN(2) == 0}
	if len(limits) > 0 {
		o["limits"] = limits
	}
	if g.r.IntN(20) == 0 {
		o["parent_scope_hash"] = "@hash:" + g.pick(g.grants) // splicing
	}
	if d := g.submit(holder, statement.Delegate, o, opts{}); d.Verdict == authority.Accepted {
		g.grants = append(g.grants, d.Statement.ID())
	}
}

// limitsInForce are the limits of a grant and its ancestors.
func (g *gen) limitsInForce(gr *authority.GrantRec) map[string]int64 {
	out := map[string]int64{}
	for gr != nil {
		for k, v := range gr.Descriptor.Limits {
			if cur, ok := out[k]; !ok || v < cur {
				out[k] = v
			}
		}
		if gr.Parent == "" {
			break
		}
		gr = g.h.e.Grant(gr.Parent)
	}
	return out
}

func (g *gen) pend() {
	gid := g.grant()
	gr := g.h.e.Grant(gid)
	holder := g.handles[gr.GranteeKey]
	if g.r.IntN(25) == 0 {
		holder = g.handles[gr.IssuerKey] // not the grantee
	}
	d := gr.Descriptor
	action := d.Capabilities[g.r.IntN(len(d.Capabilities))]
	if g.r.IntN(25) == 0 {
		action = "launch"
	}
	target := d.Targets[g.r.IntN(len(d.Targets))]
	if strings.HasSuffix(target, "*") {
		target = strings.TrimSuffix(target, "*") + fmt.Sprint(g.r.IntN(5))
	}
	step := fmt.Sprintf("step_%d", g.r.IntN(4))
	if g.r.IntN(3) == 0 {
		step += "/sub"
	}
	reserve := obj{}
	for k, v := range g.limitsInForce(gr) {
		if g.r.IntN(40) == 0 {
			continue // reserve_missing
		}
		reserve[k] = g.r.Int64N(v/4 + 2)
	}
	if g.r.IntN(40) == 0 {
		reserve["eur"] = 1
	}
	o := obj{"receipt_id": g.id("r"), "authorization_ref": gid, "action": action, "target": target, "step_id": step}
	if len(reserve) > 0 {
		o["reserve"] = reserve
	}
	if d := g.submit(holder, statement.Receipt, o, opts{}); d.Verdict == authority.Accepted {
		g.pending = append(g.pending, d.Statement.ID())
	}
}

func (g *gen) outcome() {
	if len(g.pending) == 0 {
		g.pend()
		return
	}
	i := g.r.IntN(len(g.pending))
	pid := g.pending[i]
	if len(g.closed) > 0 && g.r.IntN(30) == 0 {
		pid = g.pick(g.closed) // outcome_exists
	}
	p := g.h.e.Pending(pid)
	consumed := obj{}
	for k, v := range p.Reserve {
		consumed[k] = g.r.Int64N(v*13/10 + 2)
	}
	o := obj{"receipt_id": g.id("o"), "pending_ref": pid, "result": g.pick([]string{"success", "failure", "partial"})}
	if len(consumed) > 0 {
		o["consumed"] = consumed
	}
	if g.r.IntN(30) == 0 {
		o["target"] = "t/elsewhere"
	}
	g.submit(g.handles[p.SignerKey], statement.Receipt, o, opts{})
	if g.h.e.Pending(pid).Outcome != "" && pid == g.pending[i] {
		g.pending = slices.Delete(g.pending, i, i+1)
		g.closed = append(g.closed, pid)
	}
}

func (g *gen) revoke() {
	gid := g.grant()
	gr := g.h.e.Grant(gid)
	signer := g.pick([]string{g.handles[gr.IssuerKey], g.handles[gr.GranteeKey], "admin", g.pick(g.princ)})
	g.submit(signer, statement.Revoke, obj{"revoke_id": g.id("rv"), "target_ref": gid}, opts{})
}

func (g *gen) stop() {
	gr := g.h.e.Grant(g.grant())
	wf := g.h.e.Workflow(gr.Workflow)
	signer := g.pick([]string{g.handles[wf.Owner], g.handles[gr.GranteeKey], g.handles[gr.GranteeKey], "admin", g.pick(g.princ)})
	o := obj{"request_id": g.id("s"), "workflow_id": gr.Workflow}
	if g.r.IntN(3) != 0 {
		o["step_id"] = fmt.Sprintf("step_%d", g.r.IntN(4))
	}
	op := opts{}
	if g.r.IntN(5) == 0 {
		op.seqDelta = int64(g.r.IntN(4)) // gaps are allowed
	}
	if d := g.submit(signer, statement.Stop, o, op); d.Verdict == authority.Accepted {
		g.stops = append(g.stops, d.Statement.ID())
	}
}

func (g *gen) resume() {
	if len(g.stops) == 0 {
		g.stop()
		return
	}
	i := g.r.IntN(len(g.stops))
	s := g.h.e.StopRecord(g.stops[i])
	wf := g.h.e.Workflow(s.Workflow)
	signer := g.pick([]string{g.handles[s.SignerKey], g.handles[wf.Owner], "admin"})
	if d := g.submit(signer, statement.Resume, obj{"resume_id": g.id("res"), "stop_ref": s.ID}, opts{}); d.Verdict == authority.Accepted {
		g.stops = slices.Delete(g.stops, i, i+1)
	}
}

func (g *gen) principal() {
	if g.r.IntN(3) == 0 && len(g.retired) < 3 {
		p := g.pick(g.princ)
		if d := g.submit("admin", statement.Principal, obj{"principal_id": g.id("pr"), "op": "retire", "key": p}, opts{}); d.Verdict == authority.Accepted {
			g.retired[p] = true
		}
		return
	}
	g.enroll(fmt.Sprintf("principal:p%d", len(g.princ)))
}

// TestReplayRandomLog writes a seeded random log of 10,000 submissions,
// reopening the ledger's engine over its store every so often, then replays
// every leaf in a fresh engine: each must be decided as it was, and the two
// engines must hold the same records, byte for byte.
func TestReplayRandomLog(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	g := newGen(t, 20260319)
	g.h.flushEvery, g.h.restartEvery = 37, 5
	verdicts := make([]string, len(g.h.leaves)) // per leaf
	for i := range verdicts {
		verdicts[i] = "accepted"
	}
	refused := 0
	for range n {
		before := g.h.index
		g.step()
		switch {
		case g.h.index == before:
			refused++
		default:
			// The decision of the last leaf: DENIAL leaves are denied.
			_, p := leafEnvelope(t, g.h.leaves[before])
			if p.KeyID == g.h.logKey.KID {
				doc, _ := statement.Parse(statement.Denial, p.Payload)
				verdicts = append(verdicts, "denied/"+doc.(*statement.DenialDoc).ReasonCode)
			} else {
				verdicts = append(verdicts, "accepted")
			}
		}
	}
	g.h.flush()

	// The mix is what the test claims it is.
	codes := map[string]int{}
	for _, v := range verdicts {
		codes[v]++
	}
	accepted := codes["accepted"]
	t.Logf("%d submissions: %d leaves, %d accepted, %d denied, %d refused; %d distinct outcomes", n, len(verdicts), accepted, len(verdicts)-accepted, refused, len(codes))
	t.Logf("by kind: %v", g.kinds)
	t.Logf("by code: %v", codes)
	if accepted < n/3 || len(verdicts)-accepted < n/10 || refused == 0 || len(codes) < 20 {
		t.Errorf("the mix is too narrow: %v", codes)
	}
	for _, k := range statement.Kinds[1:8] {
		if g.kinds[string(k)+"/accepted"] == 0 {
			t.Errorf("no %s was accepted", k)
		}
	}

	e, ds := replayAll(t, g.h.leaves)
	for i, d := range ds {
		if got := verdictString(*d); got != verdicts[i] {
			t.Fatalf("leaf %d: replayed as %s, logged as %s", i, got, verdicts[i])
		}
	}
	sameState(t, g.h.allDirty, dirtyMap(e), "ledger vs replay")
	if len(g.h.allDirty) < 1000 {
		t.Errorf("only %d records", len(g.h.allDirty))
	}

	// A replay engine that flushes and reopens on other boundaries agrees too.
	store := authority.MemStore{}
	e2 := authority.New(store)
	all := map[string]string{}
	for i, l := range g.h.leaves {
		if _, err := e2.Replay(uint64(i), l); err != nil {
			t.Fatal(err)
		}
		if i%101 == 100 {
			e2.Dirty(func(k string, v []byte) { store[k] = slices.Clone(v); all[k] = string(v) })
			e2.Committed()
			e2 = authority.New(store)
		}
	}
	e2.Dirty(func(k string, v []byte) { all[k] = string(v) })
	sameState(t, g.h.allDirty, all, "ledger vs batched replay")
}

// tamperLog is a small log that the tamper tests alter.
//
//	0 GENESIS  1 PRINCIPAL alice  2 CONFIRM c1 (usd 100)
//	3 RECEIPT p1 (60)  4 DENIAL of p2 (60: limit_exceeded)
//	5 STOP s1 (step_9) 6 RECEIPT p3 (10)  7 PRINCIPAL bob
//	8 RECEIPT p4 (10)
func tamperLog(t *testing.T) (*harness, sign.Envelope) {
	h := newHarness(t)
	h.genesis(nil)
	h.advance(time.Second)
	h.submit("admin", statement.Principal, obj{"principal_id": "p-alice", "key": "principal:alice"}, opts{})
	h.advance(time.Second)
	h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:a",
		"scope": obj{"workflow_id": "wf", "capabilities": []string{"buy"}, "targets": []string{"t/*"}}, "limits": obj{"usd": 100}}, opts{})
	rc := func(id string, usd int) obj {
		return obj{"receipt_id": id, "authorization_ref": "c1", "action": "buy", "target": "t/1", "reserve": obj{"usd": usd}}
	}
	h.advance(time.Second)
	h.submit("agent:a", statement.Receipt, rc("p1", 60), opts{})
	h.advance(time.Second)
	// p2 is denied; keep its envelope to forge an acceptance later.
	k := keyFor("agent:a")
	p2env := h.envelope(k, statement.Receipt, h.build(k, statement.Receipt, rc("p2", 60), opts{}), opts{})
	if d := h.submitEnv(p2env, false); d.Code != authority.LimitExceeded {
		t.Fatalf("p2: %s", d.Code)
	}
	h.advance(time.Second)
	h.submit("agent:a", statement.Stop, obj{"request_id": "s1", "workflow_id": "wf", "step_id": "step_9"}, opts{})
	h.advance(time.Second)
	h.submit("agent:a", statement.Receipt, rc("p3", 10), opts{})
	h.advance(time.Second)
	h.submit("admin", statement.Principal, obj{"principal_id": "p-bob", "key": "principal:bob"}, opts{})
	h.advance(time.Second)
	h.submit("agent:a", statement.Receipt, rc("p4", 10), opts{})
	if len(h.leaves) != 9 {
		t.Fatalf("%d leaves", len(h.leaves))
	}
	if err := replayUntilError(h.leaves); err != nil {
		t.Fatalf("the untampered log does not replay: %v", err)
	}
	return h, p2env
}

// signDenial re-signs a DENIAL leaf after f changes its statement.
func signDenial(t *testing.T, h *harness, leaf []byte, signer *testKey, f func(*statement.DenialDoc)) []byte {
	_, p := leafEnvelope(t, leaf)
	st, err := statement.Parse(statement.Denial, p.Payload)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.(*statement.DenialDoc)
	f(doc)
	payload, err := statement.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	env, err := sign.Sign(signer.Priv, "denial", payload)
	if err != nil {
		t.Fatal(err)
	}
	return rebuildLeaf(t, leaf, func(l *statement.Leaf) { l.Envelope = canonEnv(t, env) })
}

// TestReplayCatchesTampering alters one leaf of a good log at a time and
// requires Replay to stop at that leaf, naming the right check.
func TestReplayCatchesTampering(t *testing.T) {
	h, p2env := tamperLog(t)
	leaves := h.leaves
	logKey := h.logKey

	// A DENIAL of p1, which was accepted, signed by the log key.
	denyP1 := func() []byte {
		e := authority.New(authority.MemStore{})
		for i := range 3 {
			if _, err := e.Replay(uint64(i), leaves[i]); err != nil {
				t.Fatal(err)
			}
		}
		l, p := leafEnvelope(t, leaves[3])
		at, _ := statement.ParseLoggedAt(l.LoggedAt)
		d := authority.Decision{Verdict: authority.Denied, Code: authority.LimitExceeded, Reason: "forged", Kind: statement.Receipt, SignerKey: p.KeyID}
		st, _ := statement.Parse(statement.Receipt, p.Payload)
		d.Statement = st
		doc := e.Denial(&d, p, 3, at, true)
		payload, err := statement.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		env, _ := sign.Sign(logKey.Priv, "denial", payload)
		return rebuildLeaf(t, leaves[3], func(l *statement.Leaf) { l.Envelope = canonEnv(t, env) })
	}

	cases := []struct {
		name   string
		index  int
		leaf   func() []byte
		check  string
		inMsg  []string
		mutate func([][]byte) [][]byte // for changes to more than one leaf
	}{
		{name: "an over-budget receipt logged as accepted", index: 4, check: "decision", inMsg: []string{"limit_exceeded"},
			leaf: func() []byte {
				return rebuildLeaf(t, leaves[4], func(l *statement.Leaf) { l.Envelope = canonEnv(t, p2env) })
			}},
		{name: "a DENIAL with the wrong reason_code", index: 4, check: "denial", inMsg: []string{"reason_code", "limit_exceeded"},
			leaf: func() []byte {
				return signDenial(t, h, leaves[4], logKey, func(d *statement.DenialDoc) { d.ReasonCode = "expired" })
			}},
		{name: "a DENIAL of an acceptable statement", index: 3, check: "denial", inMsg: []string{"would be accepted"}, leaf: denyP1},
		{name: "a DENIAL signed by another key", index: 4, check: "denial", inMsg: []string{"not the log key"},
			leaf: func() []byte { return signDenial(t, h, leaves[4], keyFor("agent:a"), func(*statement.DenialDoc) {}) }},
		{name: "a DENIAL naming another statement id", index: 4, check: "denial", inMsg: []string{"statement_id"},
			leaf: func() []byte {
				return signDenial(t, h, leaves[4], logKey, func(d *statement.DenialDoc) { d.StatementID = "p9" })
			}},
		{name: "a DENIAL with the wrong seq", index: 4, check: "denial", inMsg: []string{"seq"},
			leaf: func() []byte { return signDenial(t, h, leaves[4], logKey, func(d *statement.DenialDoc) { d.Seq++ }) }},
		{name: "a DENIAL kept out of its workflow", index: 4, check: "denial", inMsg: []string{"workflow_id"},
			leaf: func() []byte {
				return signDenial(t, h, leaves[4], logKey, func(d *statement.DenialDoc) { d.Workflow = "" })
			}},
		{name: "a DENIAL of an envelope with a bad signature", index: 4, check: "denial", inMsg: []string{"refused", "bad_signature"},
			leaf: func() []byte {
				return signDenial(t, h, leaves[4], logKey, func(d *statement.DenialDoc) {
					env := *d.Envelope
					env.Signatures = []sign.Signature{{KeyID: env.Signatures[0].KeyID, Sig: p2env.Signatures[0].Sig}}
					// p2's signature over p1's payload.
					_, p1 := leafEnvelope(t, leaves[3])
					env.Payload = p1.Envelope.Payload
					d.Envelope = &env
					ce, _ := env.Canonical()
					d.EnvelopeSHA256 = fmt.Sprintf("%x", sha256sum(ce))
				})
			}},
		{name: "an accepted leaf with a forged signature", index: 6, check: "decision", inMsg: []string{"refused", "bad_signature"},
			leaf: func() []byte {
				_, p := leafEnvelope(t, leaves[6])
				env := p.Envelope
				env.Signatures = []sign.Signature{{KeyID: env.Signatures[0].KeyID, Sig: p2env.Signatures[0].Sig}}
				return rebuildLeaf(t, leaves[6], func(l *statement.Leaf) { l.Envelope = canonEnv(t, env) })
			}},
		{name: "a wrong prev_in_workflow", index: 6, check: "prev_in_workflow",
			leaf: func() []byte {
				return rebuildLeaf(t, leaves[6], func(l *statement.Leaf) { l.PrevInWorkflow = ptr(uint64(3)) })
			}},
		{name: "a missing prev_in_workflow", index: 6, check: "prev_in_workflow",
			leaf: func() []byte { return rebuildLeaf(t, leaves[6], func(l *statement.Leaf) { l.PrevInWorkflow = nil }) }},
		{name: "a prev_in_workflow on a workflow's first leaf", index: 2, check: "prev_in_workflow",
			leaf: func() []byte {
				return rebuildLeaf(t, leaves[2], func(l *statement.Leaf) { l.PrevInWorkflow = ptr(uint64(1)) })
			}},
		{name: "a PRINCIPAL off the trust chain", index: 7, check: "prev_in_workflow",
			leaf: func() []byte {
				return rebuildLeaf(t, leaves[7], func(l *statement.Leaf) { l.PrevInWorkflow = ptr(uint64(0)) })
			}},
		{name: "a wrong trust_head", index: 8, check: "trust_head",
			leaf: func() []byte { return rebuildLeaf(t, leaves[8], func(l *statement.Leaf) { l.TrustHead = 1 }) }},
		{name: "logged_at going backwards", index: 6, check: "logged_at",
			leaf: func() []byte {
				return rebuildLeaf(t, leaves[6], func(l *statement.Leaf) {
					l.LoggedAt = statement.FormatLoggedAt(t0.Add(4*time.Second + 999*time.Millisecond))
				})
			}},
		{name: "two leaves swapped", index: 5, check: "decision", mutate: func(ls [][]byte) [][]byte {
			ls[5], ls[6] = ls[6], ls[5]
			return ls
		}},
		{name: "a leaf dropped", index: 3, check: "denial", inMsg: []string{"seq_mismatch"}, mutate: func(ls [][]byte) [][]byte {
			return slices.Delete(ls, 3, 4)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ls := slices.Clone(leaves)
			if c.mutate != nil {
				ls = c.mutate(ls)
			} else {
				ls[c.index] = c.leaf()
			}
			err := replayUntilError(ls)
			re, ok := err.(*authority.ReplayError)
			if !ok {
				t.Fatalf("replay error %v, want a *ReplayError", err)
			}
			if int(re.Index) != c.index || re.Check != c.check || !containsAll(re.Msg, c.inMsg...) {
				t.Fatalf("got %v; want leaf %d, check %s, naming %q", re, c.index, c.check, c.inMsg)
			}
		})
	}
}

// TestReplayOrder: Replay takes leaves in order and GENESIS first.
func TestReplayOrder(t *testing.T) {
	h, _ := tamperLog(t)
	e := authority.New(authority.MemStore{})
	if _, err := e.Replay(0, h.leaves[1]); err == nil {
		t.Fatal("a PRINCIPAL replayed as leaf 0")
	}
	e = authority.New(authority.MemStore{})
	if _, err := e.Replay(0, h.leaves[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Replay(2, h.leaves[2]); err == nil || err.(*authority.ReplayError).Check != "order" {
		t.Fatalf("leaf 2 replayed after leaf 0: %v", err)
	}
	if _, err := e.Replay(1, h.leaves[0]); err == nil {
		t.Fatal("GENESIS replayed as leaf 1")
	}
}

var _ = maps.Keys[map[string]int]
