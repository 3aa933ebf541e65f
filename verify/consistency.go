package verify

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/transparency-dev/formats/proof"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// CheckpointOrigin returns the origin line of a checkpoint note.
func CheckpointOrigin(cp []byte) string {
	line, _, _ := bytes.Cut(cp, []byte("\n"))
	return string(line)
}

// ParseHashes reads proof hashes, one standard base64 hash per line
// (the form `custody proof` prints); blank lines are ignored.
func ParseHashes(data []byte) ([]merkle.Hash, error) {
	var in []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			in = append(in, l)
		}
	}
	return decodeHashes(in)
}

// VerifyConsistency checks that the tree of checkpoint newer extends the
// tree of checkpoint older, both signed by the log key, with proof.
func VerifyConsistency(older, newer []byte, hashes []merkle.Hash, verifierKey string) (*Verdict, error) {
	ks, err := keySet(verifierKey)
	if err != nil {
		return nil, err
	}
	verifierKey = ks.String()
	origin := CheckpointOrigin(older)
	v := &Verdict{Valid: true, Origin: origin}
	// The older checkpoint may be one a retired key signed before its
	// retirement: the proof below, to a checkpoint the set trusts on its
	// own, is what makes it trusted (DESIGN §6).
	var o merkle.Checkpoint
	var pins []merkle.Pin
	if ks.Origin() != origin {
		err = fmt.Errorf("%w: verifier key is for %q, want %q", merkle.ErrWrongOrigin, ks.Origin(), origin)
	} else {
		o, pins, err = ks.OpenRetired(older)
	}
	okOlder := "signed by the log key"
	if pins != nil {
		okOlder = fmt.Sprintf("signed by a retired key before its retirement (at size %d); trusted if the consistency below holds", pins[0].Size)
	}
	if !v.add(Check{Name: "older checkpoint signature", OK: err == nil, Detail: detail(err, okOlder)}) {
		return v, nil
	}
	n, err := merkle.OpenCheckpoint(newer, origin, verifierKey)
	if !v.add(Check{Name: "newer checkpoint signature", OK: err == nil, Detail: detail(err, "signed by the log key, same origin")}) {
		return v, nil
	}
	v.Size = n.Size
	var cerr error
	switch {
	case o.Size > n.Size:
		cerr = fmt.Errorf("the older checkpoint (size %d) is larger than the newer (size %d): a rollback", o.Size, n.Size)
	case o.Size == n.Size:
		if o.Root != n.Root {
			cerr = fmt.Errorf("two checkpoints of size %d with different roots: a split view", o.Size)
		}
	default:
		cerr = merkle.VerifyConsistency(o.Size, n.Size, hashes, o.Root, n.Root)
	}
	v.add(Check{Name: "consistency", OK: cerr == nil, Detail: detail(cerr, fmt.Sprintf("size %d is a prefix of size %d", o.Size, n.Size))})
	return v, nil
}

// NewTLogProof builds a C2SP tlog-proof for one entry; the leaf itself is
// carried in the proof's extra data so the file is self-contained.
func NewTLogProof(index uint64, leaf []byte, hashes []merkle.Hash, checkpoint []byte) []byte {
	p := proof.TLogProof{Index: index, Checkpoint: checkpoint, ExtraData: leaf}
	for _, h := range hashes {
		p.Hashes = append(p.Hashes, [32]byte(h))
	}
	return p.Marshal()
}

// VerifyTLogProof checks a tlog-proof file made by NewTLogProof: the
// checkpoint signature and the inclusion of the leaf it carries. It cannot
// re-check authority (one entry is not a history); use a bundle for that.
func VerifyTLogProof(data []byte, verifierKey string) (*Verdict, error) {
	ks, err := keySet(verifierKey)
	if err != nil {
		return nil, err
	}
	verifierKey = ks.String()
	var p proof.TLogProof
	if err := p.Unmarshal(data); err != nil {
		return nil, fmt.Errorf("%w: tlog-proof: %v", ErrUnusable, err)
	}
	origin := CheckpointOrigin(p.Checkpoint)
	v := &Verdict{Valid: true, Origin: origin, Subject: p.Index}
	cp, err := merkle.OpenCheckpoint(p.Checkpoint, origin, verifierKey)
	if !v.add(Check{Name: "checkpoint signature", OK: err == nil, Detail: detail(err, "signed by the log key")}) {
		return v, nil
	}
	v.Size = cp.Size
	if len(p.ExtraData) == 0 {
		v.add(Check{Name: "leaf", OK: false, Detail: "the proof carries no leaf in its extra data"})
		return v, nil
	}
	hashes := make([]merkle.Hash, len(p.Hashes))
	for i, h := range p.Hashes {
		hashes[i] = merkle.Hash(h)
	}
	err = nil
	if p.Index >= cp.Size {
		err = fmt.Errorf("index %d is beyond the checkpoint's size %d", p.Index, cp.Size)
	} else {
		err = merkle.VerifyInclusion(p.Index, cp.Size, merkle.LeafHash(p.ExtraData), hashes, cp.Root)
	}
	if !v.add(Check{Name: "inclusion proof", OK: err == nil, Index: idx(p.Index), Detail: detail(err, fmt.Sprintf("entry %d is in the tree of size %d", p.Index, cp.Size))}) {
		return v, nil
	}
	en := decodeEntry(p.Index, p.ExtraData)
	v.Kind, v.ID, v.Workflow = string(en.kind), en.id, en.workflow
	if en.leaf != nil {
		if env, err := sign.ParseEnvelope(en.leaf.Envelope); err == nil {
			_, perr := statement.Parse(en.kind, env.Payload)
			v.add(Check{Name: "entry form", OK: perr == nil, Detail: detail(perr, "a well-formed "+string(en.kind)+" envelope")})
		}
	}
	v.Notes = append(v.Notes, "a tlog-proof proves inclusion only; signer and authority are checked with a bundle (custody prove)")
	return v, nil
}
