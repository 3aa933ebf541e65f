package authority_test

import (
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// benchChain is a log with a depth-3 chain whose budget never runs out.
func benchChain(b *testing.B) *harness {
	h := newHarness(b)
	h.genesis(nil)
	h.submit("admin", statement.Principal, obj{"principal_id": "p-alice", "key": "principal:alice"}, opts{})
	const max = 1<<53 - 1
	h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:acme/root",
		"scope":  obj{"workflow_id": "wf1", "capabilities": []string{"purchase", "refund"}, "targets": []string{"shop/*"}},
		"limits": obj{"usd": max, "items": max}, "ttl_seconds": 2592000}, opts{})
	h.submit("agent:acme/root", statement.Delegate, obj{"delegation_id": "d1", "parent_ref": "c1", "grantee": "agent:acme/coord",
		"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/*"}}, "limits": obj{"usd": max, "items": max},
		"ttl_seconds": 2592000 - 10}, opts{})
	d := h.submit("agent:acme/coord", statement.Delegate, obj{"delegation_id": "d2", "parent_ref": "d1", "grantee": "agent:acme/exec",
		"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/books/*"}}, "limits": obj{"usd": max, "items": max},
		"ttl_seconds": 2592000 - 20}, opts{})
	if d.Verdict != authority.Accepted || h.e.Grant("d2").Depth != 3 {
		b.Fatalf("chain: %s %s", d.Code, d.Reason)
	}
	h.advance(time.Second)
	return h
}

// receiptPairs signs n pending receipts and their outcomes, the i-th pair
// to be decided at base + 2i ms and base + (2i+1) ms.
func receiptPairs(b *testing.B, h *harness, n int) []*sign.Parsed {
	exec := keyFor("agent:acme/exec")
	seq := h.e.NextSeq(exec.KID)
	hash := h.e.Grant("d2").ScopeHash
	out := make([]*sign.Parsed, 0, 2*n)
	for i := range n {
		for j, result := range []string{"pending", "success"} {
			at := h.now.Add(time.Duration(2*i+j) * time.Millisecond)
			r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(at),
				Log: testOrigin, Actor: "agent:acme/exec", Seq: seq},
				ReceiptID: "r" + itoa(i), Workflow: "wf1", StepID: "step_1", Action: "purchase", Target: "shop/books/1",
				AuthorizationRef: "d2", Result: result, ScopeHash: hash}
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
