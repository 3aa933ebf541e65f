package bench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// origin is the origin of every benchmark log.
const origin = "bench.example/custody"

// actor is a key with a bound name and its seq counter.
type actor struct {
	name string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
	seq  uint64
}

func newActor(name string) (*actor, error) {
	pub, priv, err := sign.GenerateKey()
	if err != nil {
		return nil, err
	}
	return &actor{name: name, pub: pub, priv: priv}, nil
}

// world is a ledger with an admin and helpers to author statements.
type world struct {
	l     *ledger.Ledger
	now   func() time.Time
	admin *actor
	n     int
}

// newWorld creates a ledger in dir. opts.Clock, if set, is also the time
// statements are signed at.
func newWorld(dir string, opts ledger.Options) (*world, error) {
	admin, err := newActor("admin")
	if err != nil {
		return nil, err
	}
	admin.seq = 1 // GENESIS
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	l, err := ledger.Init(dir, origin, ledger.InitOptions{AdminKey: admin.priv, Options: opts})
	if err != nil {
		return nil, err
	}
	return &world{l: l, now: opts.Clock, admin: admin}, nil
}

func (w *world) header(a *actor, kind statement.Kind) statement.Header {
	a.seq++
	return statement.Header{Type: kind, Timestamp: statement.FormatTimestamp(w.now()), Log: origin, Actor: a.name, Seq: a.seq}
}

// must seals, signs and appends st, and requires it to be accepted.
func (w *world) must(ctx context.Context, a *actor, st statement.Statement) error {
	if err := statement.Seal(st); err != nil {
		return err
	}
	_, raw, err := statement.Sign(a.priv, st)
	if err != nil {
		return err
	}
	res, err := w.l.Append(ctx, raw)
	if err != nil {
		return fmt.Errorf("%s %s: %w", st.Head().Type, st.ID(), err)
	}
	if res.Verdict != authority.Accepted {
		return fmt.Errorf("%s %s: %s %s: %s", st.Head().Type, st.ID(), res.Verdict, res.Code, res.Reason)
	}
	return nil
}

func (w *world) enroll(ctx context.Context, p *actor) error {
	w.n++
	return w.must(ctx, w.admin, &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal),
		PrincipalID: fmt.Sprintf("p_%d", w.n), Op: statement.OpEnroll, Name: p.name, PublicKey: sign.EncodePublicKey(p.pub)})
}

func grant(to *actor, wf string, targets, caps []string, limits map[string]int64, ttl int64) statement.Grant {
	return statement.Grant{Grantee: statement.Grantee{Name: to.name, PublicKey: sign.EncodePublicKey(to.pub)},
		Scope:  scope.Scope{WorkflowID: wf, Targets: targets, Capabilities: caps},
		Limits: limits, TTLSeconds: ttl, Revocable: true}
}

// chain is a depth-3 chain in one workflow, and a rogue agent with a
// grant in the same workflow that does not cover what it will try.
type chain struct {
	wf    string
	leaf  *actor  // depth 3
	auth  string  // the leaf's grant
	hash  string  // its scope_hash
	rogue *actor  // depth 1, scope shop/b, capability look
	rAuth string  // the rogue's grant
	n     *uint64 // receipt counter
}

// newChain grants a planner (depth 1), which delegates to a coordinator
// (2), which delegates to a leaf executor (3), all in workflow wf; and
// grants a rogue agent a narrow scope in the same workflow.
func (w *world) newChain(ctx context.Context, principal *actor, k int) (*chain, error) {
	wf := fmt.Sprintf("wf_bench_%d", k)
	var acts [4]*actor
	for i, name := range []string{"agent:p%d", "agent:p%d/c", "agent:p%d/c/l", "agent:rogue%d"} {
		a, err := newActor(fmt.Sprintf(name, k))
		if err != nil {
			return nil, err
		}
		acts[i] = a
	}
	pl, co, lf, rg := acts[0], acts[1], acts[2], acts[3]
	c := &statement.ConfirmDoc{Header: w.header(principal, statement.Confirm), ConfirmID: "bc_" + wf, RiskLevel: "high",
		Grant: grant(pl, wf, []string{"shop/*"}, []string{"buy", "sell"}, map[string]int64{"usd": 1 << 50}, 86400)}
	if err := w.must(ctx, principal, c); err != nil {
		return nil, err
	}
	d1 := &statement.DelegateDoc{Header: w.header(pl, statement.Delegate), DelegationID: "bd1_" + wf, ParentRef: c.ConfirmID,
		ParentScopeHash: c.ScopeHash, Grant: grant(co, wf, []string{"shop/*"}, []string{"buy"}, map[string]int64{"usd": 1 << 49}, 80000)}
	if err := w.must(ctx, pl, d1); err != nil {
		return nil, err
	}
	d2 := &statement.DelegateDoc{Header: w.header(co, statement.Delegate), DelegationID: "bd2_" + wf, ParentRef: d1.DelegationID,
		ParentScopeHash: d1.ScopeHash, Grant: grant(lf, wf, []string{"shop/a"}, []string{"buy"}, map[string]int64{"usd": 1 << 48}, 70000)}
	if err := w.must(ctx, co, d2); err != nil {
		return nil, err
	}
	rc := &statement.ConfirmDoc{Header: w.header(principal, statement.Confirm), ConfirmID: "brc_" + wf, RiskLevel: "low",
		Grant: grant(rg, wf, []string{"shop/b"}, []string{"look"}, nil, 86400)}
	if err := w.must(ctx, principal, rc); err != nil {
		return nil, err
	}
	return &chain{wf: wf, leaf: lf, auth: d2.DelegationID, hash: d2.ScopeHash, rogue: rg, rAuth: rc.ConfirmID, n: new(uint64)}, nil
}

// receipts signs a pending receipt (reserving 3 usd) and its outcome.
func (w *world) receipts(c *chain) (pending, outcome []byte, err error) {
	*c.n++
	id := fmt.Sprintf("br_%s_%d", c.wf, *c.n)
	p := &statement.ReceiptDoc{Header: w.header(c.leaf, statement.Receipt), ReceiptID: id, Workflow: c.wf, StepID: "s",
		Action: "buy", Target: "shop/a", AuthorizationRef: c.auth, Result: statement.ResultPending, ScopeHash: c.hash,
		Reserve: map[string]int64{"usd": 3}}
	if _, pending, err = statement.Sign(c.leaf.priv, p); err != nil {
		return nil, nil, err
	}
	o := &statement.ReceiptDoc{Header: w.header(c.leaf, statement.Receipt), ReceiptID: id + "_done", Workflow: c.wf, StepID: "s",
		Action: "buy", Target: "shop/a", AuthorizationRef: c.auth, Result: statement.ResultSuccess, ScopeHash: c.hash,
		PendingRef: id, Consumed: map[string]int64{"usd": 3}}
	if _, outcome, err = statement.Sign(c.leaf.priv, o); err != nil {
		return nil, nil, err
	}
	return pending, outcome, nil
}

// rogueReceipt signs a pending receipt by the rogue agent for a target and
// action its grant does not cover: it is denied (out_of_scope) and a DENIAL
// is logged. Denied statements consume no seq, so every one uses the next.
func (w *world) rogueReceipt(c *chain, i int) ([]byte, error) {
	r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(w.now()),
		Log: origin, Actor: c.rogue.name, Seq: c.rogue.seq + 1}, ReceiptID: fmt.Sprintf("rogue_%s_%d", c.wf, i), Workflow: c.wf,
		StepID: "s", Action: "buy", Target: "shop/a", AuthorizationRef: c.rAuth, Result: statement.ResultPending, ScopeHash: c.hash,
		Reserve: map[string]int64{"usd": 3}}
	_, raw, err := statement.Sign(c.rogue.priv, r)
	return raw, err
}
