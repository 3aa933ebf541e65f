package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

const testOrigin = "test.example/custody"

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// actor is a key with a name and a seq counter.
type actor struct {
	name string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
	seq  uint64
}

func newActor(t testing.TB, name string) *actor {
	pub, priv, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return &actor{name: name, pub: pub, priv: priv}
}

func (a *actor) b64() string { return sign.EncodePublicKey(a.pub) }

// world is a ledger in a temp dir with an admin, a clock and helpers.
type world struct {
	t     testing.TB
	l     *Ledger
	dir   string
	clock *clock
	admin *actor
	n     int
}

func newWorld(t testing.TB, opts Options) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir(), clock: &clock{t: time.Date(2026, 3, 19, 8, 12, 0, 0, time.UTC)}}
	w.admin = newActor(t, "admin")
	w.admin.seq = 1
	opts.Clock = w.clock.Now
	l, err := Init(w.dir, testOrigin, InitOptions{AdminKey: w.admin.priv, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l
	t.Cleanup(func() { w.l.Close() })
	return w
}

func (w *world) header(a *actor, kind statement.Kind) statement.Header {
	a.seq++
	return statement.Header{Type: kind, Timestamp: statement.FormatTimestamp(w.clock.Now()), Log: testOrigin, Actor: a.name, Seq: a.seq}
}

func (w *world) id(prefix string) string { w.n++; return fmt.Sprintf("%s_%d", prefix, w.n) }

func (w *world) submit(a *actor, st statement.Statement) (*Result, error) {
	w.t.Helper()
	if err := statement.Seal(st); err != nil {
		w.t.Fatal(err)
	}
	_, raw, err := statement.Sign(a.priv, st)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.l.Append(context.Background(), raw)
}

// must submits and requires the given verdict and code.
func (w *world) must(a *actor, st statement.Statement, want authority.Verdict, code authority.Code) *Result {
	w.t.Helper()
	res, err := w.submit(a, st)
	if err != nil {
		w.t.Fatalf("%s %s: %v", st.Head().Type, st.ID(), err)
	}
	if res.Verdict != want || res.Code != code {
		w.t.Fatalf("%s %s: got %s %s (%s), want %s %s", st.Head().Type, st.ID(), res.Verdict, res.Code, res.Reason, want, code)
	}
	if res.Verdict == authority.Denied {
		a.seq-- // denied statements consume no seq
	}
	return res
}

func (w *world) enroll(p *actor) {
	w.must(w.admin, &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpEnroll, Name: p.name, PublicKey: p.b64()}, authority.Accepted, "")
}

func grant(to *actor, wf string, targets, caps, steps []string, limits map[string]int64, ttl int64) statement.Grant {
	return statement.Grant{Grantee: statement.Grantee{Name: to.name, PublicKey: to.b64()},
		Scope:  scope.Scope{WorkflowID: wf, Targets: targets, Capabilities: caps, StepIDs: steps},
		Limits: limits, TTLSeconds: ttl, Revocable: true}
}

func (w *world) confirm(p *actor, id string, g statement.Grant) *statement.ConfirmDoc {
	return &statement.ConfirmDoc{Header: w.header(p, statement.Confirm), ConfirmID: id, Grant: g, RiskLevel: "high"}
}

func (w *world) delegate(a *actor, id string, parentID, parentHash string, g statement.Grant) *statement.DelegateDoc {
	return &statement.DelegateDoc{Header: w.header(a, statement.Delegate), DelegationID: id, ParentRef: parentID,
		ParentScopeHash: parentHash, Grant: g}
}

func (w *world) pending(a *actor, id, wf, auth, hash, step, action, target string, reserve map[string]int64) *statement.ReceiptDoc {
	return &statement.ReceiptDoc{Header: w.header(a, statement.Receipt), ReceiptID: id, Workflow: wf, StepID: step,
		Action: action, Target: target, AuthorizationRef: auth, Result: statement.ResultPending, ScopeHash: hash, Reserve: reserve}
}

// checkProof verifies a result's checkpoint and inclusion proof.
func (w *world) checkProof(res *Result) {
	w.t.Helper()
	cp, err := merkle.OpenCheckpoint(res.Head.Checkpoint, testOrigin, w.l.VerifierKey())
	if err != nil {
		w.t.Fatal(err)
	}
	leaf, err := w.l.LeafBytes(res.Index)
	if err != nil {
		w.t.Fatal(err)
	}
	if (res.Leaf == nil && !res.Duplicate) || (res.Leaf != nil && !bytes.Equal(res.Leaf, leaf)) {
		w.t.Fatalf("result of %d carries leaf %q, stored %q", res.Index, res.Leaf, leaf)
	}
	if err := merkle.VerifyInclusion(res.Index, cp.Size, merkle.LeafHash(leaf), res.Proof, cp.Root); err != nil {
		w.t.Fatalf("inclusion of %d in %d: %v", res.Index, cp.Size, err)
	}
}

// replay re-decides every leaf with a fresh engine and returns its state.
func (w *world) replay() authority.MemStore {
	w.t.Helper()
	store := authority.MemStore{}
	e := authority.New(store)
	size := w.l.Head().Size
	for i := uint64(0); i < size; i++ {
		leaf, err := w.l.LeafBytes(i)
		if err != nil {
			w.t.Fatal(err)
		}
		if _, err := e.Replay(i, leaf); err != nil {
			w.t.Fatalf("replay: %v", err)
		}
		e.Dirty(func(k string, v []byte) { store[k] = v })
		e.Committed()
	}
	return store
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
