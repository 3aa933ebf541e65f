package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// Ledger runs the ledger-level conformance suite on logs created at the
// locations newLocation returns (a new, empty one per call).
func Ledger(t *testing.T, newLocation func(t *testing.T) string) {
	t.Run("RepeatsInConcurrentBatches", func(t *testing.T) {
		// Repeats in concurrent batches (which a store may look up all at
		// once), beside new submissions each sent twice at once (the second
		// may come while the first one's batch is still being committed):
		// every repeat gets the first decision, and nothing is logged twice.
		w := testlog.NewWorld(t, testlog.WorldOptions{Location: newLocation(t)})
		sc := w.Standard()
		au := w.Author
		g := testlog.NewGrant(sc.Booker, "wf_rep", []string{"t/rep"}, []string{"purchase"}, []string{"s1"}, nil, 3600)
		w.Accept(sc.Alice, au.Confirm(sc.Alice, "c_rep", g))
		sign := func(id string) []byte {
			_, raw, err := sc.Booker.Sign(au.Pending(sc.Booker, id, "c_rep", "s1", "purchase", "t/rep", nil))
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		submit := func(e []byte) *ledger.Pending {
			p, err := w.L.Submit(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		envs := make([][]byte, 300)
		first := make([]uint64, len(envs))
		var pend []*ledger.Pending
		for i := range envs {
			envs[i] = sign(fmt.Sprintf("r_rep_%d", i))
			pend = append(pend, submit(envs[i]))
		}
		for i, p := range pend {
			r, err := p.Wait(context.Background())
			if err != nil || r.Verdict != authority.Accepted || r.Duplicate {
				t.Fatalf("receipt %d: %+v, %v", i, r, err)
			}
			first[i] = r.Index
		}
		before := w.L.Head().Size
		var again, twice []*ledger.Pending
		for i, e := range envs {
			again = append(again, submit(e))
			if i%6 == 0 {
				fresh := sign(fmt.Sprintf("r_twice_%d", i))
				twice = append(twice, submit(fresh), submit(fresh))
			}
		}
		for i, p := range again {
			r, err := p.Wait(context.Background())
			if err != nil || !r.Duplicate || r.Index != first[i] {
				t.Fatalf("receipt %d sent again: %+v, %v; want a duplicate of index %d", i, r, err, first[i])
			}
		}
		for i := 0; i < len(twice); i += 2 {
			a, errA := twice[i].Wait(context.Background())
			b, errB := twice[i+1].Wait(context.Background())
			if errA != nil || errB != nil || a.Verdict != authority.Accepted || a.Duplicate || !b.Duplicate || b.Index != a.Index {
				t.Fatalf("a new receipt sent twice at once: %+v, %v; then %+v, %v", a, errA, b, errB)
			}
		}
		if got := w.L.Head().Size - before; got != uint64(len(twice)/2) {
			t.Fatalf("%d entries logged for %d new receipts sent twice and %d repeats", got, len(twice)/2, len(again))
		}
	})
	t.Run("PasskeyStop", func(t *testing.T) {
		// A principal's passkey (a second key of her name) stops her
		// workflow: accepted, its (r, n−s) twin and a second assertion are
		// repeats, the bundle verifies offline, and replay equals the state.
		w := testlog.NewWorld(t, testlog.WorldOptions{Location: newLocation(t)})
		sc := w.Standard()
		au := w.Author
		pk, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example.com", "https://custody.example.com")
		if err != nil {
			t.Fatal(err)
		}
		e := pk.Enrollment()
		w.Accept(w.Admin, &statement.PrincipalDoc{Header: au.Header(w.Admin, statement.Principal), PrincipalID: "p_alice_phone",
			Op: statement.OpAddKey, Name: sc.Alice.Name, KeyType: e.KeyType, PublicKey: e.PublicKey,
			CredentialID: e.CredentialID, RPID: e.RPID, Origins: e.Origins})
		g := testlog.NewGrant(sc.Booker, "wf_pk", []string{"t/pk"}, []string{"purchase"}, nil, nil, 3600)
		w.Accept(sc.Alice, au.Confirm(sc.Alice, "c_pk", g))
		stop := &statement.StopDoc{Header: statement.Header{Type: statement.Stop, Timestamp: statement.FormatTimestamp(w.Clock.Now()),
			Log: au.Origin, Actor: sc.Alice.Name, Seq: 1}, RequestID: "stop_pk", Workflow: "wf_pk",
			StopScope: statement.StopChain, TakeoverMode: statement.TakeoverHuman, Reason: "from a phone"}
		payload, err := statement.Marshal(stop)
		if err != nil {
			t.Fatal(err)
		}
		var first uint64
		for i := 0; i < 3; i++ {
			env, err := pk.Sign("stop", payload, softauthn.Options{})
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := env.Canonical()
			res, err := w.L.Append(context.Background(), raw)
			if err != nil || res.Verdict != authority.Accepted || res.Duplicate != (i > 0) || (i > 0 && res.Index != first) {
				t.Fatalf("passkey STOP, assertion %d: %+v, %v", i, res, err)
			}
			first = res.Index
		}
		w.Deny(sc.Booker, au.Pending(sc.Booker, "r_pk", "c_pk", "s1", "purchase", "t/pk", nil), authority.WorkflowStopped)
		b := w.Prove(first, true)
		if v, err := verify.VerifyBundle(b, w.VerifierKey()); err != nil || !v.Valid {
			t.Fatalf("bundle of the passkey STOP: %+v, %v", v.Failure(), err)
		}
		ReplayEqualsState(t, w.L)
	})
	t.Run("HeldApprovedRejected", func(t *testing.T) {
		// Held receipts (DESIGN §7) on this store: a held receipt and its
		// repeat answer held, the list shows it, an APPROVAL approves it,
		// a passkey reject (and its (r, n−s) twin, a repeat) gives a
		// reservation back, the state survives a reopen
		// and replay equals it, and the bundle's approvals re-run.
		w := testlog.NewWorld(t, testlog.WorldOptions{Location: newLocation(t)})
		sc := w.Standard()
		au := w.Author
		g := testlog.NewGrant(sc.Booker, "wf_held", []string{"t/*"}, []string{"purchase"}, nil, map[string]int64{"usd": 1000}, 3600)
		g.Approvals = []scope.Rule{{RuleID: "big", Capabilities: []string{"purchase"}, Above: map[string]int64{"usd": 100},
			Approvers: []string{sc.Alice.Name}, Quorum: 1, TTLSeconds: 600}}
		w.Accept(sc.Alice, au.Confirm(sc.Alice, "c_held", g))
		held := func(id string, usd int64) (*statement.ReceiptDoc, []byte) {
			p := au.Pending(sc.Booker, id, "c_held", "s1", "purchase", "t/x", map[string]int64{"usd": usd})
			_, raw, err := sc.Booker.Sign(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				res, err := w.L.Append(context.Background(), raw)
				if err != nil || res.Verdict != authority.Accepted || res.Hold == nil || res.Duplicate != (i > 0) ||
					len(res.Hold.Rules) != 1 || res.Hold.Rules[0].RuleID != "big" {
					t.Fatalf("held receipt %s, try %d: %+v, %v", id, i, res, err)
				}
			}
			return p, raw
		}
		answer := func(id string, p *statement.ReceiptDoc, decision string) {
			b, _ := statement.Marshal(p)
			sum := sha256.Sum256(b)
			w.Accept(sc.Alice, &statement.ApprovalDoc{Header: au.Header(sc.Alice, statement.Approval), ApprovalID: id, Workflow: "wf_held",
				ReceiptRef: p.ReceiptID, ReceiptSHA256: hex.EncodeToString(sum[:]), Decision: decision})
		}
		p1, _ := held("r_held1", 600)
		list, err := w.L.HeldReceipts(w.Clock.Now(), 10, nil)
		if err != nil || len(list) != 1 || list[0].Pending.ID != "r_held1" {
			t.Fatalf("held list: %+v, %v", list, err)
		}
		p2, _ := held("r_held2", 400)
		w.Deny(sc.Booker, au.Pending(sc.Booker, "r_over", "c_held", "s1", "purchase", "t/x", map[string]int64{"usd": 1}), authority.LimitExceeded)
		answer("a_held1", p1, statement.DecisionApprove)
		// The reject comes from alice's phone: a passkey APPROVAL, and its
		// (r, n−s) twin is a repeat with the same decision.
		pk, err := softauthn.New(sign.KeyTypeWebAuthnES256, "custody.example.com", "https://custody.example.com")
		if err != nil {
			t.Fatal(err)
		}
		e := pk.Enrollment()
		w.Accept(w.Admin, &statement.PrincipalDoc{Header: au.Header(w.Admin, statement.Principal), PrincipalID: "p_alice_phone_held",
			Op: statement.OpAddKey, Name: sc.Alice.Name, KeyType: e.KeyType, PublicKey: e.PublicKey,
			CredentialID: e.CredentialID, RPID: e.RPID, Origins: e.Origins})
		b2, _ := statement.Marshal(p2)
		sum2 := sha256.Sum256(b2)
		rej := &statement.ApprovalDoc{Header: statement.Header{Type: statement.Approval, Timestamp: statement.FormatTimestamp(w.Clock.Now()),
			Log: au.Origin, Actor: sc.Alice.Name, Seq: 1}, ApprovalID: "a_held2", Workflow: "wf_held", ReceiptRef: p2.ReceiptID,
			ReceiptSHA256: hex.EncodeToString(sum2[:]), Decision: statement.DecisionReject, Reason: "not this one"}
		payload, err := statement.Marshal(rej)
		if err != nil {
			t.Fatal(err)
		}
		var twinMut func(m map[string]string)
		var first uint64
		for i := 0; i < 2; i++ {
			env, err := pk.Sign("approval", payload, softauthn.Options{Mutate: twinMut})
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := env.Canonical()
			res, err := w.L.Append(context.Background(), raw)
			if err != nil || res.Verdict != authority.Accepted || res.Duplicate != (i > 0) || (i > 0 && res.Index != first) {
				t.Fatalf("passkey reject, signature %d: %+v, %v", i, res, err)
			}
			first = res.Index
			twinMut = func(m map[string]string) {
				if tw, err := softauthn.Twin(m["signature"]); err == nil {
					m["signature"] = tw
				}
			}
		}
		// r_held2's 400 came back: 400 more fit again.
		w.Accept(sc.Booker, au.Pending(sc.Booker, "r_after", "c_held", "s1", "purchase", "t/x", map[string]int64{"usd": 100}))
		for id, want := range map[string]string{"r_held1": authority.HoldApproved, "r_held2": authority.HoldRejected} {
			h, err := w.L.HeldReceipt(id, w.Clock.Now())
			if err != nil || h.State != want {
				t.Fatalf("%s: %+v, %v; want %s", id, h, err, want)
			}
		}
		idx, err := w.L.WorkflowIndexes("wf_held")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := verify.VerifyBundle(w.Prove(idx[len(idx)-1], true), w.VerifierKey()); err != nil || !v.Valid {
			t.Fatalf("bundle: %+v, %v", v.Failure(), err)
		}
		ReplayEqualsState(t, w.L)
	})
	t.Run("ScenarioProofsReopenReplay", func(t *testing.T) {
		loc := newLocation(t)
		w := testlog.NewWorld(t, testlog.WorldOptions{Location: loc})
		sc := w.Standard()
		// Many receipts in concurrent batches, so that tiles fill and
		// batches hold more than one leaf.
		au := w.Author
		g := testlog.NewGrant(sc.Booker, "wf_bulk", []string{"t/bulk"}, []string{"purchase"}, []string{"s1"}, nil, 3600)
		w.Accept(sc.Alice, au.Confirm(sc.Alice, "c_bulk", g))
		envs := make([][]byte, 600)
		for i := range envs {
			_, raw, err := sc.Booker.Sign(au.Pending(sc.Booker, fmt.Sprintf("r_bulk_%d", i), "c_bulk", "s1", "purchase", "t/bulk", nil))
			if err != nil {
				t.Fatal(err)
			}
			envs[i] = raw
		}
		var pend []*ledger.Pending
		for _, e := range envs {
			p, err := w.L.Submit(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			pend = append(pend, p)
		}
		for i, p := range pend {
			res, err := p.Wait(context.Background())
			if err != nil || res.Verdict != authority.Accepted {
				t.Fatalf("receipt %d: %+v, %v", i, res, err)
			}
			if err := merkle.VerifyInclusion(res.Index, res.Head.Size, merkle.LeafHash(res.Leaf), res.Proof, res.Head.Root); err != nil {
				t.Fatalf("receipt %d: its proof does not verify: %v", i, err)
			}
		}
		// A duplicate is answered with the first decision.
		res, err := w.L.Append(context.Background(), envs[7])
		if err != nil || !res.Duplicate {
			t.Fatalf("a repeated submission: %+v, %v", res, err)
		}
		head := w.L.Head()
		// Bundles verify offline.
		for _, subject := range []uint64{sc.Pending, sc.Denial, sc.Stop, head.Size - 1} {
			b := w.Prove(subject, true)
			v, err := verify.VerifyBundle(b, w.VerifierKey())
			if err != nil || !v.Valid {
				t.Fatalf("bundle of %d: %+v, %v", subject, v.Failure(), err)
			}
		}
		// Tiles and entry bundles as tlog-tiles serves them.
		if _, err := w.L.Tile(0, 0, 256); err != nil {
			t.Fatal(err)
		}
		if _, err := w.L.EntryBundle(0, 256); err != nil {
			t.Fatal(err)
		}
		// The summary of tile 0 (merkle.SummaryTileLevel) was stored with
		// it: its first hash is the root of leaves 0..63.
		if sum, err := w.L.Tile(merkle.SummaryTileLevel, 0, 4); err != nil {
			t.Fatalf("the summary of tile 0: %v", err)
		} else if r64, err := w.L.RootAt(64); err != nil || merkle.Hash(sum[:merkle.HashSize]) != r64 {
			t.Fatalf("the summary of tile 0 starts with %x, the root at 64 is %x (%v)", sum[:merkle.HashSize], r64, err)
		}
		if _, err := w.L.EntryBundle(head.Size/256, int(head.Size%256)+1); err == nil {
			t.Fatal("an entry bundle past the head was served")
		}
		if e, err := w.L.EntryByID("r_bulk_599"); err != nil || e.Index != head.Size-1 {
			t.Fatalf("EntryByID: %v, %v", e, err)
		}
		if p, err := w.L.ConsistencyProof(10, head.Size); err != nil {
			t.Fatal(err)
		} else {
			r10, _ := w.L.RootAt(10)
			if err := merkle.VerifyConsistency(10, head.Size, p, r10, head.Root); err != nil {
				t.Fatal(err)
			}
		}
		// Reopen: the same head, and the log goes on.
		l := reopen(t, w, loc)
		if h := l.Head(); h.Size != head.Size || h.Root != head.Root || !bytes.Equal(h.Checkpoint, head.Checkpoint) {
			t.Fatalf("reopened head %d, want %d", h.Size, head.Size)
		}
		w.Accept(sc.Booker, au.Pending(sc.Booker, "r_after", "c_bulk", "s1", "purchase", "t/bulk", nil))
		w.Deny(sc.Booker, au.Pending(sc.Booker, "r_bad", "c_bulk", "s1", "purchase", "t/elsewhere", nil), authority.OutOfScope)
		ReplayEqualsState(t, l)
	})
	t.Run("WorkflowList", func(t *testing.T) {
		// The list of workflows (ledger/wflist.go) is kept in this store's
		// records: 40 workflows begun in concurrent batches (over a page
		// of the list) are listed newest first, with their owner, agents,
		// DENIALs and STOP; after a reopen the list reads the same and
		// goes on.
		loc := newLocation(t)
		w := testlog.NewWorld(t, testlog.WorldOptions{Location: loc})
		sc := w.Standard()
		au := w.Author
		var pend []*ledger.Pending
		for i := 0; i < 40; i++ {
			wf := fmt.Sprintf("wf_list_%02d", i)
			_, raw, err := sc.Alice.Sign(au.Confirm(sc.Alice, "c_"+wf, testlog.NewGrant(sc.Booker, wf, []string{"t/l"}, []string{"purchase"}, nil, nil, 3600)))
			if err != nil {
				t.Fatal(err)
			}
			p, err := w.L.Submit(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			pend = append(pend, p)
		}
		for _, p := range pend {
			if r, err := p.Wait(context.Background()); err != nil || r.Verdict != authority.Accepted {
				t.Fatalf("%+v, %v", r, err)
			}
		}
		w.Deny(sc.Booker, au.Pending(sc.Booker, "r_list_bad", "c_wf_list_07", "s1", "purchase", "t/elsewhere", nil), authority.OutOfScope)
		w.StopChain(sc.Alice, "stop_list", "wf_list_09", "enough")
		check := func(l *ledger.Ledger, total int) map[string]ledger.WorkflowListing {
			t.Helper()
			list, n, err := l.WorkflowList(context.Background(), 0, ledger.MaxListAnswer, w.Clock.Now())
			if err != nil || int(n) != total || len(list) != total {
				t.Fatalf("the list: %d of %d (%v), want %d", len(list), n, err, total)
			}
			by := map[string]ledger.WorkflowListing{}
			for i, wl := range list {
				if wl.Position != uint64(total-1-i) {
					t.Fatalf("list[%d] at position %d", i, wl.Position)
				}
				by[wl.Workflow] = wl
			}
			return by
		}
		// The standard scenario's workflow comes first on the list.
		by := check(w.L, 41)
		if wl := by["wf_list_07"]; wl.Denials != 1 || wl.Owner != sc.Alice.Name || len(wl.Agents) != 1 || wl.Agents[0] != sc.Booker.Name {
			t.Fatalf("wf_list_07: %+v", wl)
		}
		if wl := by["wf_list_09"]; wl.Stop == nil || wl.Stop.ID != "stop_list" || wl.Denials != 0 {
			t.Fatalf("wf_list_09: %+v", wl)
		}
		l := reopen(t, w, loc)
		check(l, 41)
		w.Accept(sc.Alice, au.Confirm(sc.Alice, "c_late", testlog.NewGrant(sc.Booker, "wf_list_late", []string{"t/l"}, []string{"purchase"}, nil, nil, 3600)))
		if by := check(l, 42); by["wf_list_late"].Position != 41 {
			t.Fatalf("the workflow begun after the reopen: %+v", by["wf_list_late"])
		}
	})
}

// ReplayEqualsState replays the whole log from scratch with the
// authority engine and requires the stored state to equal the replay's,
// record for record.
func ReplayEqualsState(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	replayed := authority.MemStore{}
	eng := authority.New(replayed)
	for i := range l.Head().Size {
		leaf, err := l.LeafBytes(i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Replay(i, leaf); err != nil {
			t.Fatalf("replay: %v", err)
		}
		eng.Dirty(func(k string, v []byte) { replayed[k] = v })
		eng.Committed()
	}
	stored, err := l.StateRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(replayed) {
		t.Errorf("stored state has %d records, the replay %d", len(stored), len(replayed))
	}
	for k, v := range replayed {
		if !bytes.Equal(stored[k], v) {
			t.Fatalf("state record %q: stored %s, replay %s", k, stored[k], v)
		}
	}
}

// reopen closes the world's ledger and opens it again at loc, as a
// restarted server would, for the rest of the test.
func reopen(t *testing.T, w *testlog.World, loc string) *ledger.Ledger {
	t.Helper()
	if err := w.L.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(loc, ledger.Options{Clock: w.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.L = l
	t.Cleanup(func() { l.Close() })
	return l
}
