package remotelog_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/custodylog/custody/internal/remotelog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/verify"
)

// TestSameAsTheLedger: every read through a served log answers what the
// ledger behind the server answers, an unknown entry is ledger.ErrNotFound,
// and an append of an envelope already logged is answered as the ledger's
// duplicate.
func TestSameAsTheLedger(t *testing.T) {
	ctx := context.Background()
	lg := servertest.Start(t, server.Options{})
	p := lg.Principal("user:alice")
	agent, grant := lg.Agent(p, "agent:a", "wf_remote", nil)
	rec, err := agent.Receipt(ctx, servertest.Pending(grant, "s1", nil))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := remotelog.Client(ctx, lg.URL, "", 2) // the server's key, on first use
	if err != nil {
		t.Fatal(err)
	}
	r, err := remotelog.Open(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := lg.Ledger
	if r.Origin() != l.Origin() || r.VerifierKey() != l.VerifierKey() || r.Head().Size != l.Head().Size || r.Head().Root != l.Head().Root {
		t.Fatalf("head: remote %+v %s, ledger %+v %s", r.Head(), r.Origin(), l.Head(), l.Origin())
	}
	size := l.Head().Size
	for i := uint64(0); i < size; i++ {
		re, err := r.Entry(i)
		if err != nil {
			t.Fatal(err)
		}
		le, _ := l.Entry(i)
		if !bytes.Equal(re.Leaf, le.Leaf) || re.Statement.ID() != le.Statement.ID() {
			t.Fatalf("entry %d differs", i)
		}
		if byID, err := r.EntryByID(le.Statement.ID()); err != nil || byID.Index != i {
			t.Fatalf("EntryByID(%s): %v %v", le.Statement.ID(), byID, err)
		}
		rp, err := r.InclusionProof(i, size)
		lp, _ := l.InclusionProof(i, size)
		if err != nil || len(rp) != len(lp) {
			t.Fatalf("inclusion proof of %d: %v (%d hashes, want %d)", i, err, len(rp), len(lp))
		}
		for k := range rp {
			if rp[k] != lp[k] {
				t.Fatalf("inclusion proof of %d differs at %d", i, k)
			}
		}
	}
	if cp, err := r.ConsistencyProof(2, size); err != nil || len(cp) == 0 {
		t.Fatalf("consistency 2..%d: %v", size, err)
	}
	if _, err := r.ConsistencyProof(0, size); err == nil {
		t.Fatal("a consistency proof from the empty tree")
	}
	if root, err := r.RootAt(3); err != nil {
		t.Fatal(err)
	} else if want, _ := l.RootAt(3); root != want {
		t.Fatal("RootAt(3) differs")
	}
	kid := sign.KeyID(lg.KeyOf(agent).Public().(ed25519.PublicKey))
	rs, err := r.NextSeq(kid)
	ls, _ := l.NextSeq(kid)
	if err != nil || rs != ls {
		t.Fatalf("NextSeq: %d %v, the ledger says %d", rs, err, ls)
	}
	if kb, err := r.KeyBinding(kid); err != nil || kb == nil || kb.Name != "agent:a" {
		t.Fatalf("KeyBinding: %+v %v", kb, err)
	}
	b, err := r.Prove(rec.Index, false)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := verify.VerifyBundle(b, lg.VKey); err != nil || !v.Valid {
		t.Fatalf("the bundle from the server does not verify: %v", err)
	}
	if _, err := r.Entry(size + 100); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an entry past the log: %v, want ledger.ErrNotFound", err)
	}
	le, _ := l.Entry(rec.Index)
	env, err := le.Envelope.Envelope.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Append(ctx, env)
	if err != nil || !res.Duplicate || res.Index != rec.Index {
		t.Fatalf("the logged envelope again: %+v %v, want a duplicate of %d", res, err, rec.Index)
	}
}
