package verify

import (
	"encoding/base64"
	"fmt"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/merkle"
)

// BundleFormat names version 1 of the bundle format.
const BundleFormat = "custody-bundle/v1"

// Bundle is a self-contained proof file (DESIGN §6).
type Bundle struct {
	Format     string        `json:"format"`
	Origin     string        `json:"origin"`
	Checkpoint string        `json:"checkpoint"` // signed note text
	Subject    uint64        `json:"subject"`
	Entries    []BundleEntry `json:"entries"` // in index order
}

// BundleEntry is one leaf with its inclusion proof against the checkpoint.
type BundleEntry struct {
	Index uint64   `json:"index"`
	Leaf  string   `json:"leaf"`            // standard base64 of the leaf bytes
	Proof []string `json:"proof,omitempty"` // standard base64 hashes, nearest sibling first
}

// ParseBundle reads a bundle file: strict JSON (no duplicate or unknown
// fields), the right format, decodable leaves and hashes.
func ParseBundle(data []byte) (*Bundle, error) {
	var b Bundle
	if err := canon.UnmarshalRelaxed(data, &b); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if b.Format != BundleFormat {
		return nil, fmt.Errorf("bundle: format %q is not %q", b.Format, BundleFormat)
	}
	return &b, nil
}

// Marshal returns the bundle's canonical JSON.
func (b *Bundle) Marshal() ([]byte, error) { return canon.Marshal(b) }

// NewBundleEntry encodes a leaf and its proof.
func NewBundleEntry(index uint64, leaf []byte, proof []merkle.Hash) BundleEntry {
	e := BundleEntry{Index: index, Leaf: base64.StdEncoding.EncodeToString(leaf)}
	for _, h := range proof {
		e.Proof = append(e.Proof, base64.StdEncoding.EncodeToString(h[:]))
	}
	return e
}

func (e *BundleEntry) decode() ([]byte, []merkle.Hash, error) {
	leaf, err := base64.StdEncoding.Strict().DecodeString(e.Leaf)
	if err != nil || base64.StdEncoding.EncodeToString(leaf) != e.Leaf {
		return nil, nil, fmt.Errorf("leaf is not canonical standard base64")
	}
	hashes, err := decodeHashes(e.Proof)
	return leaf, hashes, err
}

func decodeHashes(in []string) ([]merkle.Hash, error) {
	out := make([]merkle.Hash, 0, len(in))
	for i, s := range in {
		raw, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(raw) != merkle.HashSize || base64.StdEncoding.EncodeToString(raw) != s {
			return nil, fmt.Errorf("proof hash %d is not a base64 SHA-256 hash", i)
		}
		out = append(out, merkle.Hash(raw))
	}
	return out, nil
}
