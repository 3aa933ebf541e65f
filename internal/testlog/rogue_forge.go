package testlog

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Forgery says how a Rogue's DENIAL departs from the one the ledger would
// write. The zero value departs in nothing but the reason.
type Forgery struct {
	// Workflow, when not nil, is the workflow_id the DENIAL claims, and so
	// the chain it joins ("" for none), whoever signed the envelope.
	Workflow *string
	// Omit leaves the envelope out; EnvelopeSize is then the envelope_size
	// the DENIAL claims (0: none).
	Omit         bool
	EnvelopeSize int64
	// SignWith, when not nil, signs the DENIAL instead of the log's DENIAL
	// key (a retired one, say).
	SignWith *Actor
}

// DenialKey is the key that signs the Rogue's DENIALs now.
func (r *Rogue) DenialKey() *Actor {
	if r.denialKey != nil {
		return r.denialKey
	}
	return r.LogKey
}

// RotateDenialKey appends the admin's PRINCIPAL statement of op log_key
// naming k (DESIGN §1); the Rogue's DENIALs are signed by k from then on.
func (r *Rogue) RotateDenialKey(id string, k *Actor) uint64 {
	r.TB.Helper()
	st := &statement.PrincipalDoc{Header: r.Author.Header(r.Admin, statement.Principal), PrincipalID: id,
		Op: statement.OpLogKey, Name: r.Origin, PublicKey: k.PublicKey()}
	i := r.Accept(r.Admin, st)
	r.denialKey, r.logSeq = k, 0
	return i
}

// DenyForged appends a DENIAL of env, signed by the log key, with the
// given reason and the departures f names; everything else (ids, seq,
// hashes, back-links, the tree and its checkpoint) is what the ledger
// would write, so only the checks of a DENIAL's content can catch it.
func (r *Rogue) DenyForged(env sign.Envelope, code authority.Code, reason string, f Forgery) uint64 {
	r.TB.Helper()
	p, err := sign.ParseEnvelopeValue(env)
	if err != nil {
		r.TB.Fatalf("denying a malformed envelope: %v", err)
	}
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	canonEnv, err := env.Canonical()
	if err != nil {
		r.TB.Fatal(err)
	}
	sum := sha256.Sum256(canonEnv)
	index, at := r.Size(), r.now()
	wf := statement.PeekWorkflow(p.Payload)
	if scope.CheckIdentifier(wf) != nil || !r.members[wf][p.KeyID] {
		wf = ""
	}
	if f.Workflow != nil {
		wf = *f.Workflow
	}
	doc := &statement.DenialDoc{
		Header: statement.Header{Type: statement.Denial, Timestamp: statement.FormatTimestamp(at), Log: r.Origin,
			Actor: r.Origin, Seq: r.logSeq + 1},
		DenialID: authority.DenialID(index), Envelope: &env, EnvelopeSHA256: hex.EncodeToString(sum[:]),
		SignerKeyID: p.KeyID, StatementType: kind, Workflow: wf, ReasonCode: string(code), Reason: reason,
	}
	if f.Omit {
		doc.Envelope, doc.EnvelopeSize = nil, f.EnvelopeSize
	}
	if id := statement.PeekID(kind, p.Payload); scope.CheckIdentifier(id) == nil {
		doc.StatementID = id
	}
	payload, err := statement.Marshal(doc)
	if err != nil {
		r.TB.Fatalf("DENIAL %d: %v", index, err)
	}
	signer := r.DenialKey()
	if f.SignWith != nil {
		signer = f.SignWith
	}
	denv, err := sign.Sign(signer.Priv, statement.Denial.Lower(), payload)
	if err != nil {
		r.TB.Fatal(err)
	}
	r.logSeq++
	return r.appendEnvelope(denv, statement.Denial, wf, at)
}

// Export writes the Rogue's log as `custody export` would, a static C2SP
// tlog-tiles tree in dir: every hash tile and entry bundle of its current
// size, then the checkpoint (signed by the log key unless checkpoint is
// given).
func (r *Rogue) Export(dir string, checkpoint []byte) {
	r.TB.Helper()
	size := r.Size()
	tiles := r.TileReader()
	for _, ref := range merkle.NewTiles(0, size) {
		data, err := tiles.ReadTile(ref.Level, ref.Index)
		if err != nil {
			r.TB.Fatal(err)
		}
		r.write(filepath.Join(dir, ref.Path()), data[:ref.Width*merkle.HashSize])
	}
	for _, ref := range merkle.NewEntryBundles(0, size) {
		var leaves [][]byte
		for i := 0; i < ref.Width; i++ {
			leaves = append(leaves, r.Leaf(ref.Index*merkle.TileWidth+uint64(i)))
		}
		data, err := merkle.EncodeEntryBundle(leaves)
		if err != nil {
			r.TB.Fatal(err)
		}
		r.write(filepath.Join(dir, ref.Path()), data)
	}
	if checkpoint == nil {
		checkpoint = r.Checkpoint()
	}
	r.write(filepath.Join(dir, "checkpoint"), checkpoint)
}

func (r *Rogue) write(path string, data []byte) {
	r.TB.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.TB.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		r.TB.Fatal(err)
	}
}
