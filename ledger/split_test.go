package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// TestSplitOversizedBatch: a batch whose transaction would pass the budget
// is decided again in halves, with every submission logged once and in
// order; one submission too big on its own is refused, nothing of it
// logged, and the ledger goes on.
func TestSplitOversizedBatch(t *testing.T) {
	// The sequencer waits for more submissions once a batch has started,
	// so the n submissions below arrive as one or two batches.
	w := newWorld(t, Options{MaxDelay: 100 * time.Millisecond})
	// About two enrollments fit (each ~1 KB: leaf, index, three records;
	// and per batch about 1 KB of small tiles, edge and checkpoint).
	w.l.seq.txnBudget = 4 << 10
	before := w.l.Stats()
	first := w.l.Head().Size
	const n = 40
	var raws [][]byte
	for i := range n {
		p := newActor(t, "user:p"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		st := &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
			Op: statement.OpEnroll, Name: p.name, PublicKey: p.b64()}
		if err := statement.Seal(st); err != nil {
			t.Fatal(err)
		}
		_, raw, err := statement.Sign(w.admin.priv, st)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	var pend []*Pending
	for _, raw := range raws {
		pd, err := w.l.Submit(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, pd)
	}
	seen := map[uint64]bool{}
	for i, p := range pend {
		res, err := p.Wait(context.Background())
		if err != nil || res.Verdict != authority.Accepted {
			t.Fatalf("enrollment %d: %+v %v", i, res, err)
		}
		if res.Index < first || res.Index >= first+n || seen[res.Index] {
			t.Fatalf("enrollment %d at index %d (the first was to get %d)", i, res.Index, first)
		}
		seen[res.Index] = true
		w.checkProof(res)
	}
	after := w.l.Stats()
	if after.Entries-before.Entries != n {
		t.Fatalf("%d entries committed, want %d", after.Entries-before.Entries, n)
	}
	if after.Splits == before.Splits {
		t.Fatal("no batch was split: the test did not exercise the budget")
	}
	for i, c := range after.BatchBuckets {
		if i > 2 && c > 0 { // more than 4 entries
			t.Fatalf("%d batches of more than %v entries committed under a 4 KiB budget", c, BatchBucketBounds[i-1])
		}
	}

	// One enrollment that cannot fit on its own.
	w.l.seq.txnBudget = 1000
	size := w.l.Head().Size
	p := newActor(t, "user:toobig")
	st := &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpEnroll, Name: p.name, PublicKey: p.b64()}
	_, err := w.submit(w.admin, st)
	var de *authority.DecisionError
	if !errors.As(err, &de) || de.Code != authority.TooLarge {
		t.Fatalf("a statement over the budget on its own: %v, want a too_large refusal", err)
	}
	if got := w.l.Head().Size; got != size {
		t.Fatalf("the refused statement changed the tree: %d entries, want %d", got, size)
	}

	// The ledger goes on, and its state is what a replay gives.
	w.l.seq.txnBudget = w.l.store.Budget()
	w.admin.seq-- // the refused statement took no seq
	w.enroll(newActor(t, "user:after"))
	compareState(t, w.l, w.replay())
}
