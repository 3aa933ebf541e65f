package testlog

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// RogueOptions configure a Rogue. The zero value matches a World's: origin
// Origin, keys derived from "admin" and the origin, clock at T0, GENESIS
// with the default parameters written out as ledger.Init writes them.
type RogueOptions struct {
	Origin        string
	Admin, LogKey *Actor
	Clock         *Clock
	// GENESIS parameters (0: the DESIGN §2 defaults).
	MaxDepth, ClockSkewSeconds, MaxTTLSeconds int64
}

// Rogue is an in-memory log that skips admission, as a compromised or
// buggy ledger would: it appends whatever it is given as an accepted leaf,
// and writes DENIALs, signed with the log key, with whatever reason code it
// is told. Back-links, trust heads, acceptance times, tiles, checkpoints
// and inclusion proofs are all computed correctly, so a bundle from a Rogue
// passes every check that trusts the log's decisions.
//
// A Rogue is not safe for concurrent use.
type Rogue struct {
	TB     testing.TB
	Origin string
	Clock  *Clock
	Admin  *Actor // nil for a Rogue made from leaves
	LogKey *Actor
	Author *Author

	leaves  [][]byte
	meta    []leafMeta
	tiles   map[[2]uint64][]byte // (tile level, index) -> hashes
	builder *merkle.Builder

	trustHead uint64
	wfLeaves  map[string][]uint64        // workflow -> its chain, in order
	members   map[string]map[string]bool // workflow -> key ids that hold or issued a grant in it
	logSeq    uint64                     // the DENIAL key's last DENIAL seq
	denialKey *Actor                     // the DENIAL key after a rotation (nil: LogKey)
	lastAt    time.Time
}

// leafMeta is what a Rogue knows of each of its leaves.
type leafMeta struct {
	kind      statement.Kind
	workflow  string // the workflow chain the leaf is on, "" for none
	trustHead uint64
	prev      *uint64
}

// NewRogue returns a Rogue whose leaf 0 is a GENESIS signed by the admin.
func NewRogue(tb testing.TB, o RogueOptions) *Rogue {
	tb.Helper()
	if o.Origin == "" {
		o.Origin = Origin
	}
	if o.Admin == nil {
		o.Admin = NewActor("admin")
	}
	if o.LogKey == nil {
		o.LogKey = NewActor(o.Origin)
	}
	if o.Clock == nil {
		o.Clock = NewClock(T0)
	}
	r := newRogue(tb, o.Origin, o.LogKey, o.Clock)
	r.Admin = o.Admin
	g := &statement.GenesisDoc{Header: r.Author.Header(o.Admin, statement.Genesis), GenesisID: "genesis",
		AdminKey: o.Admin.PublicKey(), LogKey: r.VerifierKey(),
		MaxDepth: o.MaxDepth, ClockSkewSeconds: o.ClockSkewSeconds, MaxTTLSeconds: o.MaxTTLSeconds}
	d, s, t := g.Params()
	g.MaxDepth, g.ClockSkewSeconds, g.MaxTTLSeconds = d, s, t
	r.Accept(o.Admin, g)
	return r
}

// RogueFromLeaves returns a Rogue holding exactly the given leaves, whatever
// they are, under the given log key: a log whose leaves were tampered with
// and whose tree and checkpoint were then recomputed to match.
func RogueFromLeaves(tb testing.TB, origin string, logKey *Actor, leaves [][]byte) *Rogue {
	r := newRogue(tb, origin, logKey, NewClock(T0))
	for _, l := range leaves {
		r.AppendLeaf(l)
	}
	return r
}

func newRogue(tb testing.TB, origin string, logKey *Actor, clock *Clock) *Rogue {
	b, err := merkle.NewBuilder(merkle.NewEdge(), merkle.TileReaderFunc(func(level, index uint64) ([]byte, error) {
		return nil, fmt.Errorf("no tile %d/%d", level, index) // unreachable: the tree is empty
	}))
	if err != nil {
		tb.Fatal(err)
	}
	return &Rogue{TB: tb, Origin: origin, Clock: clock, LogKey: logKey, Author: NewAuthor(origin, clock),
		tiles: map[[2]uint64][]byte{}, builder: b, wfLeaves: map[string][]uint64{}, members: map[string]map[string]bool{}}
}

// Statements implements Log.
func (r *Rogue) Statements() *Author { return r.Author }

// AdminActor implements Log.
func (r *Rogue) AdminActor() *Actor { return r.Admin }

// VerifierKey is the log's checkpoint verifier key.
func (r *Rogue) VerifierKey() string { return r.LogKey.VerifierKey(r.Origin) }

// Size is the number of leaves.
func (r *Rogue) Size() uint64 { return uint64(len(r.leaves)) }

// Leaf returns the leaf at index.
func (r *Rogue) Leaf(index uint64) []byte { return r.leaves[index] }

// Leaves returns every leaf.
func (r *Rogue) Leaves() [][]byte { return slices.Clone(r.leaves) }

// Accept implements Log: it seals st, signs it with a's key and appends it
// as accepted, whatever it says.
func (r *Rogue) Accept(a *Actor, st statement.Statement) uint64 {
	r.TB.Helper()
	if err := statement.Seal(st); err != nil {
		r.TB.Fatalf("sealing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	return r.AcceptUnsealed(a, st)
}

// AcceptUnsealed is Accept without sealing: st's scope_hash stays as given.
func (r *Rogue) AcceptUnsealed(a *Actor, st statement.Statement) uint64 {
	r.TB.Helper()
	env, _, err := statement.Sign(a.Priv, st)
	if err != nil {
		r.TB.Fatalf("signing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	if g := grantOf(st); g != nil {
		wf := st.WorkflowID()
		if r.members[wf] == nil {
			r.members[wf] = map[string]bool{}
		}
		r.members[wf][a.KeyID()] = true
		if pub, err := sign.ParsePublicKey(g.Grantee.PublicKey); err == nil {
			r.members[wf][sign.KeyID(pub)] = true
		}
	}
	return r.AcceptEnvelope(env)
}

// AcceptEnvelope appends any envelope as an accepted statement.
func (r *Rogue) AcceptEnvelope(env sign.Envelope) uint64 {
	r.TB.Helper()
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	wf := ""
	if p, err := sign.ParseEnvelopeValue(env); err == nil && kind != statement.Genesis && kind != statement.Principal {
		wf = statement.PeekWorkflow(p.Payload)
	}
	return r.appendEnvelope(env, kind, wf, r.now())
}

// Deny implements Log: it signs st with a's key (giving the seq back) and
// appends a DENIAL of it with the given code.
func (r *Rogue) Deny(a *Actor, st statement.Statement, code authority.Code) uint64 {
	r.TB.Helper()
	if err := statement.Seal(st); err != nil {
		r.TB.Fatalf("sealing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	env, _, err := statement.Sign(a.Priv, st)
	if err != nil {
		r.TB.Fatalf("signing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	a.Seq--
	return r.DenyEnvelope(env, code, fmt.Sprintf("%s %s: denied by the rogue log (%s)", st.Head().Type, st.ID(), code))
}

// DenyEnvelope appends a DENIAL of env, signed by the log key, with the
// given reason. Every field but the reason is what the ledger would write
// (DESIGN §2, authority.Engine.Denial): the DENIAL joins the workflow env
// names if its signer holds or issued a grant there.
func (r *Rogue) DenyEnvelope(env sign.Envelope, code authority.Code, reason string) uint64 {
	r.TB.Helper()
	return r.DenyForged(env, code, reason, Forgery{})
}

// now is the next acceptance time: the clock, but never before the last.
func (r *Rogue) now() time.Time {
	at := r.Clock.Now().UTC()
	if at.Before(r.lastAt) {
		at = r.lastAt
	}
	r.lastAt = at
	return at
}

// appendEnvelope appends env as a leaf with the back-links of DESIGN §5.
func (r *Rogue) appendEnvelope(env sign.Envelope, kind statement.Kind, wf string, at time.Time) uint64 {
	r.TB.Helper()
	raw, err := env.Canonical()
	if err != nil {
		r.TB.Fatal(err)
	}
	index := r.Size()
	leaf := &statement.Leaf{Envelope: raw, LoggedAt: statement.FormatLoggedAt(at)}
	switch kind {
	case statement.Genesis:
	case statement.Principal:
		prev := r.trustHead
		leaf.PrevInWorkflow, leaf.TrustHead = &prev, prev
	default:
		leaf.TrustHead = r.trustHead
		if chain := r.wfLeaves[wf]; wf != "" && len(chain) > 0 {
			prev := chain[len(chain)-1]
			leaf.PrevInWorkflow = &prev
		}
	}
	b, err := statement.MarshalLeaf(leaf)
	if err != nil {
		r.TB.Fatalf("leaf %d: %v", index, err)
	}
	return r.AppendLeaf(b)
}

// AppendLeaf appends raw leaf bytes as they are.
func (r *Rogue) AppendLeaf(raw []byte) uint64 {
	r.TB.Helper()
	index := r.Size()
	m := leafMeta{}
	if l, _, err := statement.ParseLeaf(raw); err == nil {
		m.trustHead, m.prev = l.TrustHead, l.PrevInWorkflow
		if p, err := sign.ParseEnvelope(l.Envelope); err == nil {
			m.kind, _ = statement.KindOfPayloadType(p.PayloadType)
			if m.kind != statement.Genesis && m.kind != statement.Principal {
				m.workflow = statement.PeekWorkflow(p.Payload)
			}
		}
	}
	switch m.kind {
	case statement.Genesis, statement.Principal:
		r.trustHead = index
	default:
		if m.workflow != "" {
			r.wfLeaves[m.workflow] = append(r.wfLeaves[m.workflow], index)
		}
	}
	r.leaves = append(r.leaves, slices.Clone(raw))
	r.meta = append(r.meta, m)
	if err := r.builder.Append(merkle.LeafHash(raw)); err != nil {
		r.TB.Fatal(err)
	}
	for _, t := range r.builder.Flush() {
		r.tiles[[2]uint64{t.Level, t.Index}] = t.Data
	}
	return index
}

// TileReader reads the Rogue's hash tiles.
func (r *Rogue) TileReader() merkle.TileReader {
	return merkle.TileReaderFunc(func(level, index uint64) ([]byte, error) {
		t, ok := r.tiles[[2]uint64{level, index}]
		if !ok {
			return nil, fmt.Errorf("tile %d/%d is not stored", level, index)
		}
		return t, nil
	})
}

// Root is the root of the whole tree.
func (r *Rogue) Root() merkle.Hash { return r.builder.Root() }

// Proof is the inclusion proof of index in the tree of the given size.
func (r *Rogue) Proof(index, size uint64) []merkle.Hash {
	r.TB.Helper()
	p, err := merkle.InclusionProof(r.TileReader(), index, size)
	if err != nil {
		r.TB.Fatalf("inclusion proof of %d in %d: %v", index, size, err)
	}
	return p
}

// Checkpoint is the whole tree's checkpoint, signed with the log key.
func (r *Rogue) Checkpoint() []byte {
	r.TB.Helper()
	return r.CheckpointSignedBy(r.LogKey.NoteSigner(r.Origin))
}

// CheckpointSignedBy is the whole tree's checkpoint signed by any signer
// (whose key name must be the origin).
func (r *Rogue) CheckpointSignedBy(s note.Signer) []byte {
	r.TB.Helper()
	cp, err := merkle.SignCheckpoint(r.Origin, r.Size(), r.Root(), s)
	if err != nil {
		r.TB.Fatal(err)
	}
	return cp
}

// Indexes returns what ledger.Prove would put in the bundle of subject: the
// trust chain it rests on and its workflow from the first leaf up to the
// subject (with wholeWorkflow, to the workflow's latest leaf).
func (r *Rogue) Indexes(subject uint64, wholeWorkflow bool) []uint64 {
	r.TB.Helper()
	m := r.meta[subject]
	var out []uint64
	var top uint64
	switch {
	case m.kind == statement.Genesis || m.kind == statement.Principal:
		top = subject
	case m.workflow == "":
		out, top = []uint64{subject}, m.trustHead
	default:
		for _, i := range r.wfLeaves[m.workflow] {
			if i > subject && !wholeWorkflow {
				break
			}
			out = append(out, i)
			top = max(top, r.meta[i].trustHead)
		}
	}
	for at := top; ; {
		out = append(out, at)
		p := r.meta[at].prev
		if at == 0 || p == nil || *p >= at {
			break
		}
		at = *p
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Bundle builds the bundle of subject against the whole tree's checkpoint,
// as ledger.Prove would.
func (r *Rogue) Bundle(subject uint64, wholeWorkflow bool) *verify.Bundle {
	r.TB.Helper()
	return r.BundleOf(subject, r.Indexes(subject, wholeWorkflow))
}

// BundleOf builds a bundle of the given entries against the whole tree's
// checkpoint.
func (r *Rogue) BundleOf(subject uint64, indexes []uint64) *verify.Bundle {
	r.TB.Helper()
	return r.BundleWith(subject, indexes, r.Size(), r.Checkpoint())
}

// BundleWith builds a bundle of the given entries with proofs against the
// tree of the given size, carrying any checkpoint text.
func (r *Rogue) BundleWith(subject uint64, indexes []uint64, size uint64, checkpoint []byte) *verify.Bundle {
	r.TB.Helper()
	b := &verify.Bundle{Format: verify.BundleFormat, Origin: r.Origin, Checkpoint: string(checkpoint), Subject: subject}
	for _, i := range indexes {
		b.Entries = append(b.Entries, verify.NewBundleEntry(i, r.leaves[i], r.Proof(i, size)))
	}
	return b
}

func grantOf(st statement.Statement) *statement.Grant {
	switch s := st.(type) {
	case *statement.ConfirmDoc:
		return &s.Grant
	case *statement.DelegateDoc:
		return &s.Grant
	}
	return nil
}

// SignAccept seals st, signs it with a's key and returns the envelope
// without appending it.
func (r *Rogue) SignAccept(a *Actor, st statement.Statement) sign.Envelope {
	r.TB.Helper()
	if err := statement.Seal(st); err != nil {
		r.TB.Fatalf("sealing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	env, _, err := statement.Sign(a.Priv, st)
	if err != nil {
		r.TB.Fatalf("signing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	return env
}

// AppendForged appends env as an accepted leaf with the given back-links,
// whatever they should be: what a log hiding part of a workflow's history
// would write.
func (r *Rogue) AppendForged(env sign.Envelope, prev *uint64, trustHead uint64) uint64 {
	r.TB.Helper()
	raw, err := env.Canonical()
	if err != nil {
		r.TB.Fatal(err)
	}
	b, err := statement.MarshalLeaf(&statement.Leaf{Envelope: raw, LoggedAt: statement.FormatLoggedAt(r.now()),
		PrevInWorkflow: prev, TrustHead: trustHead})
	if err != nil {
		r.TB.Fatal(err)
	}
	return r.AppendLeaf(b)
}
