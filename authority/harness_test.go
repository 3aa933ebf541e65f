package authority_test

// The harness drives the engine the way the ledger does: it owns keys, a
// clock and the log's next index; it builds, signs and submits statements;
// it logs a DENIAL (signed by the log key) for every denial; and it keeps
// the leaf bytes so that a fresh engine can replay them. It also keeps its
// own model of the back-link chains of DESIGN §5 and checks every Link the
// engine returns against it.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

const testOrigin = "custody.test/log"

// t0 is the harness clock's start.
var t0 = time.Date(2026, 3, 19, 8, 0, 0, 0, time.UTC)

const zeroHash = testlog.ZeroHash

// testKey is a deterministic key named by a handle; the handle is also the
// name a key is bound under unless a test says otherwise.
type testKey = testlog.Key

func keyFor(handle string) *testKey { return testlog.KeyFor("custody/authority-test", handle) }

// obj is a statement under construction, as a JSON object.
type obj = testlog.Obj

// opts alter how a statement is built, signed or submitted.
type opts struct {
	tsOffset  time.Duration // added to the default timestamp
	seqDelta  int64         // added to the default seq
	signKind  string        // sign under this kind's payload type instead
	form      string        // "indent": a non-canonical payload
	tamperSig bool          // flip a bit of the signature
	drop      []string      // header fields to leave out
	verified  bool          // Submission.Verified
}

// harness is one log being written.
type harness struct {
	tb     testing.TB
	e      *authority.Engine
	store  authority.MemStore
	now    time.Time
	index  uint64
	leaves [][]byte
	logKey *testKey

	// flushEvery > 0 writes Dirty to the store and calls Committed every
	// that many leaves; restartEvery > 0 then also reopens the engine over
	// the store, as a ledger restart does.
	flushEvery, restartEvery int
	sinceFlush, sinceStart   int
	allDirty                 map[string]string // every Dirty record ever flushed

	// The harness's own model of DESIGN §5 back-links.
	wfLast    map[string]uint64
	trustHead uint64
	noCheck   bool // skip the back-link model (tamper tests build odd logs)
}

func newHarness(tb testing.TB) *harness {
	store := authority.MemStore{}
	return &harness{tb: tb, e: authority.New(store), store: store, now: t0,
		logKey: keyFor(testOrigin), wfLast: map[string]uint64{}, allDirty: map[string]string{}}
}

// genesis submits a GENESIS signed by "admin" with the given parameters.
func (h *harness) genesis(extra obj) authority.Decision {
	o := obj{"genesis_id": "genesis"}
	maps.Copy(o, extra)
	d := h.submit("admin", statement.Genesis, o, opts{})
	if d.Verdict != authority.Accepted {
		h.tb.Fatalf("GENESIS: %s %s: %s", d.Verdict, d.Code, d.Reason)
	}
	return d
}

// verifierKey is the signed-note verifier key of the log key.
func verifierKey(name string, pub ed25519.PublicKey) string {
	vk, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		panic(err)
	}
	return vk
}

// advance moves the clock forward.
func (h *harness) advance(d time.Duration) {
	if d < 0 {
		h.tb.Fatalf("clock would go backwards by %s", -d)
	}
	h.now = h.now.Add(d)
}

// boundName is the name a key is bound to, or its handle.
func (h *harness) boundName(k *testKey) string {
	if r := h.e.Key(k.KID); r != nil {
		return r.Name
	}
	return k.Handle
}

// build fills in o's defaults and returns the payload bytes.
func (h *harness) build(signer *testKey, kind statement.Kind, in obj, op opts) []byte {
	o := deepCopy(in)
	ts := h.now.Add(op.tsOffset)
	setDefault(o, "type", string(kind))
	setDefault(o, "timestamp", statement.FormatTimestamp(ts))
	setDefault(o, "log", testOrigin)
	setDefault(o, "actor", h.boundName(signer))
	setDefault(o, "seq", int64(h.e.NextSeq(signer.KID))+op.seqDelta)
	for _, f := range op.drop {
		delete(o, f)
	}
	h.resolve(signer, kind, o)
	var b []byte
	var err error
	if op.form == "indent" {
		b, err = json.MarshalIndent(o, "", "  ")
	} else {
		b, err = json.Marshal(o)
		if err == nil {
			b, err = canon.Canonicalize(b)
		}
	}
	if err != nil {
		h.tb.Fatalf("building %s: %v", kind, err)
	}
	return b
}

// resolve fills the fields a test need not spell out: keys from handles,
// hashes from the state, workflow ids from references.
func (h *harness) resolve(signer *testKey, kind statement.Kind, o obj) {
	for k, v := range o {
		// "@hash:<grant id>" is that grant's scope_hash.
		if s, ok := v.(string); ok && strings.HasPrefix(s, "@hash:") {
			if g := h.e.Grant(strings.TrimPrefix(s, "@hash:")); g != nil {
				o[k] = g.ScopeHash
			} else {
				o[k] = zeroHash
			}
		}
	}
	switch kind {
	case statement.Genesis:
		setDefault(o, "genesis_id", "genesis")
		setDefault(o, "admin_key", signer.B64)
		setDefault(o, "log_key", verifierKey(testOrigin, h.logKey.Pub))
	case statement.Principal:
		if k, ok := o["key"].(string); ok {
			delete(o, "key")
			setDefault(o, "public_key", keyFor(k).B64)
			setDefault(o, "name", k)
		}
		setDefault(o, "op", "enroll")
	case statement.Confirm, statement.Delegate:
		switch g := o["grantee"].(type) {
		case string:
			o["grantee"] = obj{"name": g, "public_key": keyFor(g).B64}
		case map[string]any:
			if k, ok := g["key"].(string); ok {
				delete(g, "key")
				setDefault(g, "public_key", keyFor(k).B64)
				setDefault(g, "name", k)
			}
		}
		setDefault(o, "ttl_seconds", int64(3600))
		setDefault(o, "revocable", true)
		if kind == statement.Delegate {
			parent := h.e.Grant(str(o["parent_ref"]))
			if sc, ok := o["scope"].(map[string]any); ok && parent != nil {
				setDefault(sc, "workflow_id", parent.Workflow)
			}
			if parent != nil {
				setDefault(o, "parent_scope_hash", parent.ScopeHash)
			} else {
				setDefault(o, "parent_scope_hash", zeroHash)
			}
		}
		if _, ok := o["scope_hash"]; !ok {
			o["scope_hash"] = grantHash(o)
		}
	case statement.Revoke:
		if g := h.e.Grant(str(o["target_ref"])); g != nil {
			setDefault(o, "workflow_id", g.Workflow)
		}
		setDefault(o, "reason", "test")
	case statement.Receipt:
		setDefault(o, "result", statement.ResultPending)
		if o["result"] != statement.ResultPending {
			if p := h.e.Pending(str(o["pending_ref"])); p != nil {
				setDefault(o, "workflow_id", p.Workflow)
				setDefault(o, "step_id", p.Step)
				setDefault(o, "action", p.Action)
				setDefault(o, "target", p.Target)
				setDefault(o, "authorization_ref", p.Grant)
			}
		}
		setDefault(o, "step_id", "step_1")
		if g := h.e.Grant(str(o["authorization_ref"])); g != nil {
			setDefault(o, "workflow_id", g.Workflow)
			setDefault(o, "scope_hash", g.ScopeHash)
		}
		setDefault(o, "scope_hash", zeroHash)
	case statement.Stop:
		if _, ok := o["step_id"]; ok {
			setDefault(o, "stop_scope", statement.StopStep)
		}
		setDefault(o, "stop_scope", statement.StopChain)
		setDefault(o, "takeover_mode", statement.TakeoverHuman)
		setDefault(o, "reason", "test")
	case statement.Resume:
		if s := h.e.StopRecord(str(o["stop_ref"])); s != nil {
			setDefault(o, "workflow_id", s.Workflow)
		}
	case statement.Approval:
		setDefault(o, "decision", statement.DecisionApprove)
		if p := h.e.Pending(str(o["receipt_ref"])); p != nil {
			setDefault(o, "workflow_id", p.Workflow)
			if p.Hold != nil {
				setDefault(o, "receipt_sha256", p.Hold.SHA256)
			}
		}
		setDefault(o, "receipt_sha256", zeroHash)
	}
}

// envelope signs payload as the signer would.
func (h *harness) envelope(signer *testKey, kind statement.Kind, payload []byte, op opts) sign.Envelope {
	k := kind.Lower()
	if op.signKind != "" {
		k = op.signKind
	}
	env, err := sign.Sign(signer.Priv, k, payload)
	if err != nil {
		h.tb.Fatal(err)
	}
	if op.tamperSig {
		sig := []byte(env.Signatures[0].Sig)
		// Change one base64 digit in the middle: still canonical base64.
		if sig[10] == 'A' {
			sig[10] = 'B'
		} else {
			sig[10] = 'A'
		}
		env.Signatures[0].Sig = string(sig)
	}
	return env
}

// submit builds, signs and submits one statement.
func (h *harness) submit(signer string, kind statement.Kind, o obj, op opts) authority.Decision {
	k := keyFor(signer)
	payload := h.build(k, kind, o, op)
	return h.submitEnv(h.envelope(k, kind, payload, op), op.verified)
}

// submitEnv submits a signed envelope as the ledger does and logs what the
// ledger would log.
func (h *harness) submitEnv(env sign.Envelope, verified bool) authority.Decision {
	h.tb.Helper()
	wire, err := json.Marshal(env)
	if err != nil {
		h.tb.Fatal(err)
	}
	p, err := sign.ParseEnvelope(wire)
	if err != nil {
		h.tb.Fatalf("envelope: %v", err)
	}
	d := h.e.Decide(authority.Submission{Env: p, Verified: verified}, h.index, h.now)
	switch d.Verdict {
	case authority.Accepted:
		l := h.e.Link(h.index, h.now, d.Statement)
		h.checkLink(d.Statement, l)
		h.appendLeaf(env, l)
	case authority.Denied:
		if h.e.Meta() == nil {
			return d // nothing can be logged before GENESIS
		}
		denv, doc := h.denial(&d, p)
		h.e.AcceptDenial(doc, h.index)
		l := h.e.Link(h.index, h.now, doc)
		h.checkLink(doc, l)
		h.appendLeaf(denv, l)
	}
	return d
}

// denial builds and signs the DENIAL the ledger logs for d.
func (h *harness) denial(d *authority.Decision, p *sign.Parsed) (sign.Envelope, *statement.DenialDoc) {
	for _, with := range []bool{true, false} {
		doc := h.e.Denial(d, p, h.index, h.now, with)
		payload, err := statement.Marshal(doc)
		if err != nil {
			h.tb.Fatalf("the DENIAL for %s %s is not a valid statement: %v", d.Code, d.Reason, err)
		}
		env, err := sign.Sign(h.logKey.Priv, "denial", payload)
		if err != nil {
			h.tb.Fatal(err)
		}
		ce, _ := env.Canonical()
		if _, err := statement.MarshalLeaf(&statement.Leaf{Envelope: ce, LoggedAt: statement.FormatLoggedAt(h.now), TrustHead: 1 << 40, PrevInWorkflow: ptr(uint64(1 << 40))}); err == nil || !with {
			return env, doc
		}
	}
	panic("unreachable")
}

func ptr[T any](v T) *T { return &v }

func (h *harness) appendLeaf(env sign.Envelope, l authority.Link) {
	ce, err := env.Canonical()
	if err != nil {
		h.tb.Fatal(err)
	}
	leaf, err := statement.MarshalLeaf(&statement.Leaf{Envelope: ce, LoggedAt: statement.FormatLoggedAt(h.now),
		PrevInWorkflow: l.PrevInWorkflow, TrustHead: l.TrustHead})
	if err != nil {
		h.tb.Fatalf("leaf %d: %v", h.index, err)
	}
	h.leaves = append(h.leaves, leaf)
	h.index++
	h.afterLeaf()
}

// afterLeaf flushes and restarts the engine as configured.
func (h *harness) afterLeaf() {
	if h.flushEvery <= 0 {
		return
	}
	h.sinceFlush++
	if h.sinceFlush < h.flushEvery {
		return
	}
	h.flush()
	h.sinceStart++
	if h.restartEvery > 0 && h.sinceStart >= h.restartEvery {
		h.e = authority.New(h.store)
		h.sinceStart = 0
	}
}

// flush writes the engine's dirty records to its store and commits.
func (h *harness) flush() {
	// Hints go to the store, as the ledger keeps them, but not into
	// allDirty: a replay does not derive them.
	h.e.DirtyHints(func(k string, v []byte) { h.store[k] = slices.Clone(v) })
	h.e.Dirty(func(k string, v []byte) {
		h.store[k] = slices.Clone(v)
		h.allDirty[k] = string(v)
	})
	h.e.Committed()
	h.sinceFlush = 0
}

// checkLink compares the engine's back-links with the harness's model of
// DESIGN §5: GENESIS/PRINCIPAL chain through each other; every other leaf
// links to the previous leaf of its workflow, and the first has none.
func (h *harness) checkLink(st statement.Statement, got authority.Link) {
	h.tb.Helper()
	if h.noCheck {
		return
	}
	var want authority.Link
	switch st.Head().Type {
	case statement.Genesis:
		h.trustHead = h.index
	case statement.Principal:
		want = authority.Link{PrevInWorkflow: ptr(h.trustHead), TrustHead: h.trustHead}
		h.trustHead = h.index
	default:
		want.TrustHead = h.trustHead
		if wf := st.WorkflowID(); wf != "" {
			if last, ok := h.wfLast[wf]; ok {
				want.PrevInWorkflow = ptr(last)
			}
			h.wfLast[wf] = h.index
		}
	}
	if want.TrustHead != got.TrustHead || fmtp(want.PrevInWorkflow) != fmtp(got.PrevInWorkflow) {
		h.tb.Errorf("leaf %d (%s %s): link is prev=%s head=%d, want prev=%s head=%d", h.index, st.Head().Type, st.ID(),
			fmtp(got.PrevInWorkflow), got.TrustHead, fmtp(want.PrevInWorkflow), want.TrustHead)
	}
}

func fmtp(p *uint64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// replayAll replays leaves into a fresh engine and returns it; every leaf
// must replay.
func replayAll(tb testing.TB, leaves [][]byte) (*authority.Engine, []*authority.Decision) {
	tb.Helper()
	e := authority.New(authority.MemStore{})
	var ds []*authority.Decision
	for i, l := range leaves {
		d, err := e.Replay(uint64(i), l)
		if err != nil {
			tb.Fatalf("replay: %v", err)
		}
		ds = append(ds, d)
	}
	return e, ds
}

// replayUntilError replays leaves and returns the first error.
func replayUntilError(leaves [][]byte) error {
	e := authority.New(authority.MemStore{})
	for i, l := range leaves {
		if _, err := e.Replay(uint64(i), l); err != nil {
			return err
		}
	}
	return nil
}

// dirtyMap collects an engine's dirty records.
func dirtyMap(e *authority.Engine) map[string]string {
	m := map[string]string{}
	e.Dirty(func(k string, v []byte) { m[k] = string(v) })
	return m
}

// sameState reports the differences between two state maps.
func sameState(tb testing.TB, a, b map[string]string, what string) {
	tb.Helper()
	keys := slices.Sorted(maps.Keys(a))
	n := 0
	for _, k := range keys {
		if bv, ok := b[k]; !ok {
			tb.Errorf("%s: record %q only in the first", what, k)
			n++
		} else if bv != a[k] {
			tb.Errorf("%s: record %q differs:\n  %s\n  %s", what, k, a[k], bv)
			n++
		}
		if n > 10 {
			tb.Fatalf("%s: too many differences", what)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			tb.Errorf("%s: record %q only in the second", what, k)
		}
	}
}

// leafEnvelope extracts and parses the envelope of a leaf.
func leafEnvelope(tb testing.TB, leaf []byte) (*statement.Leaf, *sign.Parsed) {
	l, _, err := statement.ParseLeaf(leaf)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := sign.ParseEnvelope(l.Envelope)
	if err != nil {
		tb.Fatal(err)
	}
	return l, p
}

// rebuildLeaf replaces fields of a leaf.
func rebuildLeaf(tb testing.TB, leaf []byte, f func(*statement.Leaf)) []byte {
	l, _, err := statement.ParseLeaf(leaf)
	if err != nil {
		tb.Fatal(err)
	}
	f(l)
	b, err := statement.MarshalLeaf(l)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func canonEnv(tb testing.TB, env sign.Envelope) []byte {
	b, err := env.Canonical()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

var _ = bytes.Equal

func sha256sum(b []byte) [32]byte { return sha256.Sum256(b) }

var (
	grantHash  = testlog.GrantHash
	setDefault = testlog.SetDefault
	str        = testlog.Str
)

// deepCopy copies a JSON-like object.
func deepCopy(o obj) obj { return testlog.DeepCopy(o).(obj) }
