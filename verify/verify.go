package verify

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/witness"
)

// Check is one named check of a verdict and its result.
type Check struct {
	Name   string  `json:"name"`
	OK     bool    `json:"ok"`
	Detail string  `json:"detail,omitempty"`
	Index  *uint64 `json:"index,omitempty"` // the entry it concerns, if one
	Checks []Check `json:"checks,omitempty"`
}

// Verdict is the outcome of verifying a bundle or proof.
type Verdict struct {
	Valid       bool     `json:"valid"`
	Origin      string   `json:"origin"`
	Size        uint64   `json:"checkpoint_size"`
	Subject     uint64   `json:"subject"`
	Kind        string   `json:"subject_kind,omitempty"`
	ID          string   `json:"subject_id,omitempty"`
	Workflow    string   `json:"workflow,omitempty"`
	Checks      []Check  `json:"checks"`
	Notes       []string `json:"notes,omitempty"`
	LeftToAudit []string `json:"left_to_audit,omitempty"`
	// Witnessed are the witnesses whose cosignatures on the checkpoint
	// verified, when a witness policy was given (CheckWitnesses).
	Witnessed []witness.Cosignature `json:"witnessed,omitempty"`
}

func (v *Verdict) add(c Check) bool {
	v.Checks = append(v.Checks, c)
	if !c.OK {
		v.Valid = false
	}
	return c.OK
}

// Failure returns the first failed check, or nil.
func (v *Verdict) Failure() *Check {
	var walk func([]Check) *Check
	walk = func(cs []Check) *Check {
		for i := range cs {
			if !cs[i].OK {
				if f := walk(cs[i].Checks); f != nil {
					return f
				}
				return &cs[i]
			}
		}
		return nil
	}
	return walk(v.Checks)
}

// wholeLog lists what a bundle cannot show and custody audit checks.
var wholeLog = []string{
	"each key's seq across workflows (here: strictly increasing within the bundle)",
	"identity bindings made in other workflows",
	"uniqueness of ids across workflows",
	"that no leaf of the workflow or of the trust chain lies outside the back-links shown (the log writes them; the checkpoint commits to them)",
}

// ErrUnusable wraps failures to read the input at all (exit 1, not 4).
var ErrUnusable = errors.New("unusable input")

// entry is a bundle entry decoded for the chain checks.
type entry struct {
	index    uint64
	raw      []byte
	leaf     *statement.Leaf
	kind     statement.Kind
	workflow string
	id       string
}

func (e *entry) trust() bool { return e.kind == statement.Genesis || e.kind == statement.Principal }

func idx(i uint64) *uint64 { return &i }

// VerifyBundle checks a bundle against the log's checkpoint verifier key
// (a signed-note verifier key string), or its key set after a checkpoint
// key rotation (merkle.KeySet text, one key a line). It returns an error wrapping
// ErrUnusable only when the inputs cannot be read at all; every other
// problem is a failed check in an invalid Verdict.
func VerifyBundle(b *Bundle, verifierKey string) (*Verdict, error) {
	v, _, err := VerifyBundleState(b, verifierKey)
	return v, err
}

// VerifyBundleState is VerifyBundle that also returns the authority state
// the re-run decisions built (nil unless the verdict is valid): a runtime
// reads from it, itself, whether a held receipt was approved (DESIGN §7),
// never taking the server's word for it.
func VerifyBundleState(b *Bundle, verifierKey string) (*Verdict, *authority.Engine, error) {
	v, e, err := verifyBundle(b, verifierKey)
	if err != nil || !v.Valid {
		return v, nil, err
	}
	return v, e, nil
}

func verifyBundle(b *Bundle, verifierKey string) (*Verdict, *authority.Engine, error) {
	ks, err := keySet(verifierKey)
	if err != nil {
		return nil, nil, err
	}
	v := &Verdict{Valid: true, Origin: b.Origin, Subject: b.Subject}

	// 1. The checkpoint.
	cp, err := merkle.OpenCheckpoint([]byte(b.Checkpoint), b.Origin, ks.String())
	if !v.add(Check{Name: "checkpoint signature", OK: err == nil, Detail: detail(err,
		fmt.Sprintf("signed by the log key %s", describe(ks)))}) {
		return v, nil, nil
	}
	v.Size = cp.Size

	// 2. Inclusion of every entry.
	var entries []*entry
	incl := Check{Name: "inclusion proofs", OK: true}
	var last *uint64
	for i := range b.Entries {
		be := &b.Entries[i]
		fail := func(format string, args ...any) {
			incl.OK = false
			incl.Checks = append(incl.Checks, Check{Name: fmt.Sprintf("entry %d", be.Index), Index: idx(be.Index), Detail: fmt.Sprintf(format, args...)})
		}
		if last != nil && be.Index <= *last {
			fail("entries are not in strictly increasing index order (%d after %d)", be.Index, *last)
			continue
		}
		last = idx(be.Index)
		if be.Index >= cp.Size {
			fail("index %d is beyond the checkpoint's size %d", be.Index, cp.Size)
			continue
		}
		leaf, proof, err := be.decode()
		if err != nil {
			fail("%v", err)
			continue
		}
		if err := merkle.VerifyInclusion(be.Index, cp.Size, merkle.LeafHash(leaf), proof, cp.Root); err != nil {
			fail("inclusion proof against checkpoint size %d does not verify: %v", cp.Size, err)
			continue
		}
		entries = append(entries, decodeEntry(be.Index, leaf))
	}
	if incl.OK {
		incl.Detail = fmt.Sprintf("%d entries against checkpoint size %d", len(entries), cp.Size)
	}
	if !v.add(incl) {
		return v, nil, nil
	}

	// 3. The subject, GENESIS, and the back-link chains.
	if !v.add(structure(v, entries, b, ks)) {
		return v, nil, nil
	}

	// 4. Re-run every decision in log order.
	decisions := Check{Name: "decisions re-run", OK: true}
	e := authority.NewView(authority.MemStore{})
	for _, pub := range ks.PublicKeys() { // what checkpoint keys sign is never a submission
		e.RefuseKeys(sign.KeyID(pub))
	}
	for _, en := range entries {
		d, err := e.Replay(en.index, en.raw)
		if err != nil {
			var re *authority.ReplayError
			msg := err.Error()
			if errors.As(err, &re) {
				msg = re.Check + ": " + re.Msg
			}
			decisions.OK = false
			decisions.Checks = append(decisions.Checks, Check{Name: fmt.Sprintf("#%d %s %s", en.index, en.kind, en.id), Index: idx(en.index), Detail: msg})
			break
		}
		line := "accepted"
		if d.Verdict == authority.Denied {
			id := "-"
			if d.Statement != nil {
				id = d.Statement.ID()
			}
			line = fmt.Sprintf("denial of %s %s re-derived: %s", d.Kind, id, d.Code)
		}
		decisions.Checks = append(decisions.Checks, Check{Name: fmt.Sprintf("#%d %s %s", en.index, en.kind, en.id), OK: true, Index: idx(en.index), Detail: line})
		for _, n := range d.Notes {
			v.Notes = append(v.Notes, fmt.Sprintf("entry %d: %s", en.index, n))
		}
	}
	if decisions.OK {
		decisions.Detail = fmt.Sprintf("%d decisions re-run with the ledger's decision function; all agree", len(entries))
	}
	v.add(decisions)
	if decisions.OK {
		if c, ok := approvalsCheck(e, entries); ok {
			v.add(c)
		}
	}
	if v.Valid {
		v.LeftToAudit = wholeLog
	}
	return v, e, nil
}

func decodeEntry(index uint64, raw []byte) *entry {
	en := &entry{index: index, raw: raw}
	leaf, _, err := statement.ParseLeaf(raw)
	if err != nil {
		return en
	}
	en.leaf = leaf
	env, err := sign.ParseEnvelope(leaf.Envelope)
	if err != nil {
		return en
	}
	en.kind, _ = statement.KindOfPayloadType(env.PayloadType)
	en.workflow = statement.PeekWorkflow(env.Payload)
	en.id = statement.PeekID(en.kind, env.Payload)
	return en
}

// structure checks the subject, GENESIS and both back-link chains.
func structure(v *Verdict, entries []*entry, b *Bundle, ks *merkle.KeySet) Check {
	c := Check{Name: "structure", OK: true}
	fail := func(i *uint64, format string, args ...any) Check {
		c.OK = false
		c.Index = i
		c.Detail = fmt.Sprintf(format, args...)
		return c
	}
	byIndex := map[uint64]*entry{}
	for _, en := range entries {
		if en.leaf == nil {
			return fail(idx(en.index), "entry %d is not a readable leaf", en.index)
		}
		byIndex[en.index] = en
	}
	subject := byIndex[b.Subject]
	if subject == nil {
		return fail(idx(b.Subject), "the subject, entry %d, is not in the bundle", b.Subject)
	}
	v.Kind, v.ID, v.Workflow = string(subject.kind), subject.id, subject.workflow
	if subject.trust() {
		v.Workflow = ""
	}
	// GENESIS: leaf 0, and its log_key is a key we were given.
	g := byIndex[0]
	if g == nil || g.kind != statement.Genesis {
		return fail(idx(0), "the bundle does not start with GENESIS at index 0")
	}
	if err := checkGenesis(g, b.Origin, ks); err != nil {
		return fail(idx(0), "%v", err)
	}
	// The trust chain: from the highest trust head back to 0, complete.
	var top uint64
	for _, en := range entries {
		if en.trust() && en.index > top {
			top = en.index
		}
		if !en.trust() && en.leaf.TrustHead > top {
			top = en.leaf.TrustHead
		}
	}
	walked := map[uint64]bool{}
	for at := &top; ; {
		en := byIndex[*at]
		if en == nil || !en.trust() {
			return fail(at, "the trust chain is incomplete: entry %d (GENESIS or PRINCIPAL) is missing", *at)
		}
		walked[*at] = true
		if *at == 0 {
			break
		}
		if en.leaf.PrevInWorkflow == nil || *en.leaf.PrevInWorkflow >= *at {
			return fail(at, "PRINCIPAL entry %d has no valid back-link to the trust chain", *at)
		}
		at = en.leaf.PrevInWorkflow
	}
	// The workflow: every non-trust entry belongs to it, and its chain is
	// complete from its latest entry back to its first.
	var wfEntries []*entry
	for _, en := range entries {
		switch {
		case en.trust():
			if !walked[en.index] {
				return fail(idx(en.index), "entry %d is a trust entry off the trust chain", en.index)
			}
		case v.Workflow == "" && en == subject:
			// A DENIAL outside every workflow stands alone.
			if en.leaf.PrevInWorkflow != nil {
				return fail(idx(en.index), "entry %d has a back-link but names no workflow", en.index)
			}
		case v.Workflow == "" || en.workflow != v.Workflow:
			return fail(idx(en.index), "entry %d (%s, workflow %q) is not part of the subject's workflow %q", en.index, en.kind, en.workflow, v.Workflow)
		default:
			wfEntries = append(wfEntries, en)
		}
	}
	if len(wfEntries) > 0 {
		sort.Slice(wfEntries, func(i, j int) bool { return wfEntries[i].index < wfEntries[j].index })
		seen := 0
		for at := &wfEntries[len(wfEntries)-1].index; at != nil; {
			en := byIndex[*at]
			if en == nil || en.trust() {
				return fail(at, "workflow %q is incomplete: entry %d is missing", v.Workflow, *at)
			}
			seen++
			if p := en.leaf.PrevInWorkflow; p != nil && *p >= *at {
				return fail(at, "entry %d links back to %d, which is not earlier", *at, *p)
			}
			at = en.leaf.PrevInWorkflow
		}
		if seen != len(wfEntries) {
			return fail(nil, "workflow %q: %d entries in the bundle, but the back-links reach %d", v.Workflow, len(wfEntries), seen)
		}
	}
	c.Detail = fmt.Sprintf("subject #%d %s %s; GENESIS matches the log key; trust chain of %d entries complete", b.Subject, subject.kind, subject.id, len(walked))
	if len(wfEntries) > 0 {
		c.Detail += fmt.Sprintf("; workflow %s complete from its first entry (%d entries)", v.Workflow, len(wfEntries))
	}
	return c
}

func checkGenesis(g *entry, origin string, ks *merkle.KeySet) error {
	env, err := sign.ParseEnvelope(g.leaf.Envelope)
	if err != nil {
		return fmt.Errorf("GENESIS envelope: %v", err)
	}
	st, err := statement.Parse(statement.Genesis, env.Payload)
	if err != nil {
		return fmt.Errorf("GENESIS: %v", err)
	}
	gd := st.(*statement.GenesisDoc)
	if gd.Log != origin {
		return fmt.Errorf("GENESIS names log %q, the bundle %q", gd.Log, origin)
	}
	pub, err := gd.LogPublicKey()
	if err != nil {
		return fmt.Errorf("GENESIS log_key: %v", err)
	}
	if !ks.Has(pub) {
		return fmt.Errorf("GENESIS log_key %s is not the verifier key given (%s)", short(gd.LogKey), describe(ks))
	}
	return nil
}

// keySet reads the verifier key, or key set, a caller gave; an unreadable
// one makes the input unusable, not the evidence invalid.
func keySet(vkey string) (*merkle.KeySet, error) {
	ks, err := merkle.ParseKeySet(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key: %v", ErrUnusable, err)
	}
	return ks, nil
}

// describe names a key set in a verdict: the key, or the keys after a
// rotation.
func describe(ks *merkle.KeySet) string {
	if ks.Len() == 1 {
		return short(ks.String())
	}
	cur := ks.Current()
	parts := make([]string, len(cur))
	for i, k := range cur {
		parts[i] = short(k)
	}
	return fmt.Sprintf("%s (a set of %d keys, %d retired)", strings.Join(parts, ", "), ks.Len(), ks.Len()-len(cur))
}

func detail(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

func short(s string) string {
	if i := strings.LastIndexByte(s, '+'); i > 0 && len(s) > i+12 {
		return s[:i+12] + "…"
	}
	return s
}
