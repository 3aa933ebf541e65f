package verify_test

// Every bundle the ledger makes is also checked with code that shares
// nothing with package merkle: golang.org/x/mod/sumdb/tlog for inclusion
// and consistency, golang.org/x/mod/sumdb/note for the checkpoint, and a
// direct transcription of RFC 9162's verification algorithm.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/verify"
)

// openCheckpoint opens a checkpoint with x/mod's note package and reads its
// three body lines.
func openCheckpoint(t *testing.T, text, vkey string) (origin string, size int64, root tlog.Hash) {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(text), note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	if len(n.Sigs) != 1 || n.Sigs[0].Name != v.Name() || n.Sigs[0].Hash != v.KeyHash() {
		t.Fatalf("note.Open: signatures %+v", n.Sigs)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("checkpoint body %q is not three lines", n.Text)
	}
	size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != 32 {
		t.Fatalf("root %q", lines[2])
	}
	return lines[0], size, tlog.Hash(raw)
}

// rfc9162Root recomputes the root from an inclusion proof as RFC 9162
// §2.1.3.2 spells it out.
func rfc9162Root(index, size uint64, leafHash [32]byte, proof [][32]byte) ([32]byte, bool) {
	if index >= size {
		return [32]byte{}, false
	}
	node := func(l, r [32]byte) [32]byte {
		return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
	}
	fn, sn, r := index, size-1, leafHash
	for _, p := range proof {
		if sn == 0 {
			return r, false
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	return r, sn == 0
}

func decodeEntry(t *testing.T, e verify.BundleEntry) ([]byte, [][32]byte) {
	t.Helper()
	leaf, err := base64.StdEncoding.DecodeString(e.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	var proof [][32]byte
	for _, h := range e.Proof {
		raw, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(raw) != 32 {
			t.Fatalf("proof hash %q", h)
		}
		proof = append(proof, [32]byte(raw))
	}
	return leaf, proof
}

func TestCrossCheckBundles(t *testing.T) {
	w := newStandardWorld(t)
	size := w.L.Head().Size
	checked := 0
	for subject := range size {
		for _, whole := range []bool{false, true} {
			b := w.Prove(subject, whole)
			mustVerify(t, b, w.vkey)
			origin, n, root := openCheckpoint(t, b.Checkpoint, w.vkey)
			if origin != b.Origin || uint64(n) != size {
				t.Fatalf("checkpoint names %q size %d, bundle %q size %d", origin, n, b.Origin, size)
			}
			for _, e := range b.Entries {
				leaf, proof := decodeEntry(t, e)
				rp := make(tlog.RecordProof, len(proof))
				for i, h := range proof {
					rp[i] = tlog.Hash(h)
				}
				// The tlog record hash is the RFC 6962 leaf hash.
				lh := tlog.RecordHash(leaf)
				if want := sha256.Sum256(append([]byte{0}, leaf...)); lh != tlog.Hash(want) {
					t.Fatal("tlog.RecordHash is not SHA-256(0x00 || leaf)")
				}
				if err := tlog.CheckRecord(rp, n, root, int64(e.Index), lh); err != nil {
					t.Errorf("bundle of %d, entry %d: tlog.CheckRecord: %v", subject, e.Index, err)
				}
				if r, ok := rfc9162Root(e.Index, uint64(n), lh, proof); !ok || r != root {
					t.Errorf("bundle of %d, entry %d: RFC 9162 recomputation does not reach the root", subject, e.Index)
				}
				// And a wrong record must not check.
				if tlog.CheckRecord(rp, n, root, int64(e.Index), tlog.RecordHash(append(leaf, ' '))) == nil {
					t.Errorf("entry %d: tlog accepts a changed leaf", e.Index)
				}
				checked++
			}
		}
	}
	t.Logf("%d entry proofs in %d bundles agree with x/mod/sumdb/tlog and RFC 9162", checked, 2*size)
}

func TestCrossCheckTLogProofAndConsistency(t *testing.T) {
	w := newStandardWorld(t)
	old := w.L.Head()
	w.Enroll(testlog.NewActor("user:carol"), "p_carol")
	w.Enroll(testlog.NewActor("user:dave"), "p_dave")
	cur := w.L.Head()

	// Consistency: tlog.CheckTree agrees with the ledger's proof, and so
	// does VerifyConsistency.
	proof, err := w.L.ConsistencyProof(old.Size, cur.Size)
	if err != nil {
		t.Fatal(err)
	}
	_, on, oroot := openCheckpoint(t, string(old.Checkpoint), w.vkey)
	_, nn, nroot := openCheckpoint(t, string(cur.Checkpoint), w.vkey)
	tp := make(tlog.TreeProof, len(proof))
	for i, h := range proof {
		tp[i] = tlog.Hash(h)
	}
	if err := tlog.CheckTree(tp, nn, nroot, on, oroot); err != nil {
		t.Errorf("tlog.CheckTree: %v", err)
	}
	v, err := verify.VerifyConsistency(old.Checkpoint, cur.Checkpoint, proof, w.vkey)
	if err != nil || !v.Valid {
		t.Fatalf("VerifyConsistency: %v\n%s", err, text(v))
	}

	// tlog-proof: its checkpoint opens with note, its proof checks with tlog.
	for i := range cur.Size {
		raw, err := w.L.TLogProof(i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, []byte("c2sp.org/tlog-proof@v1\n")) {
			t.Fatalf("tlog-proof %d starts %q", i, raw[:min(len(raw), 30)])
		}
		v, err := verify.VerifyTLogProof(raw, w.vkey)
		if err != nil || !v.Valid {
			t.Fatalf("VerifyTLogProof(%d): %v\n%s", i, err, text(v))
		}
		leaf, err := w.L.LeafBytes(i)
		if err != nil {
			t.Fatal(err)
		}
		hashes, err := w.L.InclusionProof(i, cur.Size)
		if err != nil {
			t.Fatal(err)
		}
		rp := make(tlog.RecordProof, len(hashes))
		for j, h := range hashes {
			rp[j] = tlog.Hash(h)
		}
		if err := tlog.CheckRecord(rp, nn, nroot, int64(i), tlog.RecordHash(leaf)); err != nil {
			t.Errorf("entry %d: %v", i, err)
		}
	}
}
