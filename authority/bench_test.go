package authority_test

import (
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// benchChain is a log with a depth-3 chain whose budget never runs out.
func benchChain(b testing.TB) *harness { return benchChainRules(b, false) }

// benchRules are approval rules that never hold the bench's receipts
// (they reserve 3 usd): every receipt is still checked against them.
func benchRules(prefix string) []any {
	var out []any
	for i, caps := range [][]string{{"purchase"}, {"purchase", "refund"}, {"refund"}} {
		out = append(out, obj{"rule_id": prefix + itoa(i), "capabilities": caps, "targets": []string{"shop/*"},
			"above": obj{"usd": 1000}, "approvers": []string{"principal:alice", "principal:finance/*"}, "quorum": 2, "ttl_seconds": 900})
	}
	return out
}

// benchChainRules is benchChain, with three approval rules on each of its
// three grants when rules is set.
func benchChainRules(b testing.TB, rules bool) *harness {
	h := newHarness(b)
	h.genesis(nil)
	h.submit("admin", statement.Principal, obj{"principal_id": "p-alice", "key": "principal:alice"}, opts{})
	const max = 1<<53 - 1
	h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:acme/root",
		"scope":  obj{"workflow_id": "wf1", "capabilities": []string{"purchase", "refund"}, "targets": []string{"shop/*"}},
		"limits": obj{"usd": max, "items": max}, "ttl_seconds": 2592000}, opts{})
	c1 := h.e.Grant("c1")
	if c1 == nil {
		b.Fatal("no c1")
	}
	if rules {
		// The same grants with rules, in a workflow of their own.
		h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c1r", "grantee": "agent:acme/root",
			"scope":  obj{"workflow_id": "wf1r", "capabilities": []string{"purchase", "refund"}, "targets": []string{"shop/*"}},
			"limits": obj{"usd": max, "items": max}, "ttl_seconds": 2592000, "approvals": benchRules("a")}, opts{})
	}
	withRules := func(o obj, prefix string) obj {
		if rules {
			o["approvals"] = benchRules(prefix)
			o["parent_ref"] = o["parent_ref"].(string) + "r"
			o["delegation_id"] = o["delegation_id"].(string) + "r"
		}
		return o
	}
	h.submit("agent:acme/root", statement.Delegate, withRules(obj{"delegation_id": "d1", "parent_ref": "c1", "grantee": "agent:acme/coord",
		"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/*"}}, "limits": obj{"usd": max, "items": max},
		"ttl_seconds": 2592000 - 10}, "b"), opts{})
	d := h.submit("agent:acme/coord", statement.Delegate, withRules(obj{"delegation_id": "d2", "parent_ref": "d1", "grantee": "agent:acme/exec",
		"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/books/*"}}, "limits": obj{"usd": max, "items": max},
		"ttl_seconds": 2592000 - 20}, "c"), opts{})
	if rules {
		if d.Verdict != authority.Accepted {
			b.Fatalf("chain with rules: %s %s", d.Code, d.Reason)
		}
		h.advance(time.Second)
		return h
	}
	if d.Verdict != authority.Accepted || h.e.Grant("d2").Depth != 3 {
		b.Fatalf("chain: %s %s", d.Code, d.Reason)
	}
	h.advance(time.Second)
	return h
}

// receiptPairs signs n pending receipts and their outcomes, the i-th pair
// to be decided at base + 2i ms and base + (2i+1) ms.
func receiptPairs(b *testing.B, h *harness, n int) []*sign.Parsed {
	return receiptPairsUnder(b, h, n, "d2", "wf1")
}

func receiptPairsUnder(b *testing.B, h *harness, n int, grant, wf string) []*sign.Parsed {
	exec := keyFor("agent:acme/exec")
	seq := h.e.NextSeq(exec.KID)
	hash := h.e.Grant(grant).ScopeHash
	out := make([]*sign.Parsed, 0, 2*n)
	for i := range n {
		for j, result := range []string{"pending", "success"} {
			at := h.now.Add(time.Duration(2*i+j) * time.Millisecond)
			r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(at),
				Log: testOrigin, Actor: "agent:acme/exec", Seq: seq},
				ReceiptID: "r" + itoa(i), Workflow: wf, StepID: "step_1", Action: "purchase", Target: "shop/books/1",
				AuthorizationRef: grant, Result: result, ScopeHash: hash}
			if result == "pending" {
				r.Reserve = map[string]int64{"usd": 3, "items": 1}
			} else {
				r.ReceiptID += "-out"
				r.PendingRef = "r" + itoa(i)
				r.Consumed = map[string]int64{"usd": 2, "items": 1}
			}
			seq++
			payload, err := statement.Marshal(r)
			if err != nil {
				b.Fatal(err)
			}
			env, err := sign.Sign(exec.Priv, "receipt", payload)
			if err != nil {
				b.Fatal(err)
			}
			p, err := sign.ParseEnvelopeValue(env)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	n := len(buf)
	for ; i > 0; i /= 10 {
		n--
		buf[n] = digits[i%10]
	}
	return string(buf[n:])
}

// BenchmarkDecideReceipt decides pending receipts and their outcomes under
// a depth-3 chain with signatures already verified (Submission.Verified),
// so it measures the engine's own cost. One op is one decision (and its
// Link). "commit256" also writes the dirty records out and commits every
// 256 decisions, as the ledger does once per batch.
func BenchmarkDecideReceipt(b *testing.B) {
	for _, mode := range []struct {
		name  string
		batch int
	}{{"decide", 0}, {"commit256", 256}} {
		b.Run(mode.name, func(b *testing.B) {
			h := benchChain(b)
			envs := receiptPairs(b, h, (b.N+1)/2)
			e, store := h.e, h.store
			index, base := h.index, h.now
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				at := base.Add(time.Duration(i) * time.Millisecond)
				d := e.Decide(authority.Submission{Env: envs[i], Verified: true}, index, at)
				if d.Verdict != authority.Accepted {
					b.Fatalf("decision %d: %s %s", i, d.Code, d.Reason)
				}
				e.Link(index, at, d.Statement)
				index++
				if mode.batch > 0 && i%mode.batch == mode.batch-1 {
					e.Dirty(func(k string, v []byte) { store[k] = v })
					e.Committed()
				}
			}
		})
	}
}

// BenchmarkDecideReceiptVerify is the same with the signature verified in
// Decide, for comparison.
func BenchmarkDecideReceiptVerify(b *testing.B) {
	h := benchChain(b)
	envs := receiptPairs(b, h, (b.N+1)/2)
	e, index, base := h.e, h.index, h.now
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		at := base.Add(time.Duration(i) * time.Millisecond)
		d := e.Decide(authority.Submission{Env: envs[i]}, index, at)
		if d.Verdict != authority.Accepted {
			b.Fatalf("decision %d: %s %s", i, d.Code, d.Reason)
		}
		e.Link(index, at, d.Statement)
		index++
	}
}

// historyLog is benchChain plus n STOPs or n grants earlier in workflow
// wf1 (where == "same") or in another workflow wf2 ("other"). The STOPs
// are step STOPs by the owner on steps the receipts never use, all in
// force; the grants are n delegations to the receipts' signer.
func historyLog(b testing.TB, kind string, n int, where string) *harness {
	h := benchChain(b)
	h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c2", "grantee": "agent:acme/other",
		"scope": obj{"workflow_id": "wf2", "capabilities": []string{"purchase"}, "targets": []string{"shop/*"}}, "ttl_seconds": 2592000}, opts{})
	h.flushEvery = 256
	wf := "wf1"
	if where == "other" {
		wf = "wf2"
	}
	for i := range n {
		var d authority.Decision
		switch kind {
		case "stops":
			d = h.submit("principal:alice", statement.Stop, obj{"request_id": "s" + itoa(i), "workflow_id": wf, "step_id": "other_" + itoa(i)}, opts{})
		case "grants":
			if where == "same" {
				d = h.submit("agent:acme/coord", statement.Delegate, obj{"delegation_id": "dx" + itoa(i), "parent_ref": "d1", "grantee": "agent:acme/exec",
					"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/toys/*"}}, "limits": obj{"usd": 1, "items": 1},
					"ttl_seconds": 3600}, opts{})
			} else {
				d = h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "cx" + itoa(i), "grantee": "agent:acme/exec",
					"scope": obj{"workflow_id": "wf2", "capabilities": []string{"purchase"}, "targets": []string{"shop/toys/*"}}, "ttl_seconds": 3600}, opts{})
			}
		}
		if d.Verdict != authority.Accepted {
			b.Fatalf("history %s %d: %s %s", kind, i, d.Code, d.Reason)
		}
	}
	h.flush()
	h.flushEvery = 0
	return h
}

// pendings signs n pending receipts of agent:acme/exec under d2, in wf1 on
// step_1, from its next seq on.
func pendings(b testing.TB, h *harness, n int, at time.Time) []*sign.Parsed {
	exec := keyFor("agent:acme/exec")
	seq := h.e.NextSeq(exec.KID)
	hash := h.e.Grant("d2").ScopeHash
	out := make([]*sign.Parsed, n)
	for i := range n {
		r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(at),
			Log: testOrigin, Actor: "agent:acme/exec", Seq: seq + uint64(i)},
			ReceiptID: "bp" + itoa(int(seq)+i), Workflow: "wf1", StepID: "step_1", Action: "purchase", Target: "shop/books/1",
			AuthorizationRef: "d2", Result: "pending", ScopeHash: hash, Reserve: map[string]int64{"usd": 1, "items": 1}}
		payload, err := statement.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		env, err := sign.Sign(exec.Priv, "receipt", payload)
		if err != nil {
			b.Fatal(err)
		}
		if out[i], err = sign.ParseEnvelopeValue(env); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// BenchmarkPendingAfterHistory is the cost of deciding one pending receipt
// (signature already verified) and committing it on its own, as a lightly
// loaded ledger does, after 0, 1k and 32k STOPs or grants earlier in its
// workflow ("same") or in another ("other"). DESIGN §4 (Bounded cost):
// the figures must be flat across n.
func BenchmarkPendingAfterHistory(b *testing.B) {
	logs := map[string]*harness{}
	for _, kind := range []string{"stops", "grants"} {
		for _, n := range []int{0, 1000, 32000} {
			for _, where := range []string{"same", "other"} {
				name := kind + "=" + itoa(n) + "/" + where
				b.Run(name, func(b *testing.B) {
					h := logs[name]
					if h == nil {
						h = historyLog(b, kind, n, where)
						logs[name] = h
					}
					h.advance(time.Second)
					envs := pendings(b, h, b.N, h.now)
					e, store := h.e, h.store
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						d := e.Decide(authority.Submission{Env: envs[i], Verified: true}, h.index, h.now)
						if d.Verdict != authority.Accepted {
							b.Fatalf("decision %d: %s %s", i, d.Code, d.Reason)
						}
						e.Link(h.index, h.now, d.Statement)
						h.index++
						e.Dirty(func(k string, v []byte) { store[k] = v })
						e.Committed()
					}
				})
			}
		}
	}
}

// BenchmarkDecideWithRules decides the pairs of BenchmarkDecideReceipt
// ("commit256") under the same chain without approval rules ("none") and
// with three rules on each of its three grants that never hold these
// receipts ("rules"): what approval rules add to an authorised append's
// decision (each rule in force is matched against every pending receipt).
func BenchmarkDecideWithRules(b *testing.B) {
	for _, rules := range []bool{false, true} {
		name, grant, wf := "none", "d2", "wf1"
		if rules {
			name, grant, wf = "rules", "d2r", "wf1r"
		}
		b.Run(name, func(b *testing.B) {
			h := benchChainRules(b, rules)
			envs := receiptPairsUnder(b, h, (b.N+1)/2, grant, wf)
			e, store := h.e, h.store
			index, base := h.index, h.now
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				at := base.Add(time.Duration(i) * time.Millisecond)
				d := e.Decide(authority.Submission{Env: envs[i], Verified: true}, index, at)
				if d.Verdict != authority.Accepted || d.Hold != nil {
					b.Fatalf("decision %d: %s %s (held %v)", i, d.Code, d.Reason, d.Hold != nil)
				}
				e.Link(index, at, d.Statement)
				index++
				if i%256 == 255 {
					e.Dirty(func(k string, v []byte) { store[k] = v })
					e.Committed()
				}
			}
		})
	}
}
