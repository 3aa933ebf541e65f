package verify_test

// The mutation test starts from valid bundles written by a real ledger and
// changes them in every way we could think of, one change at a time. Each
// change must make the verdict invalid (or the input unusable), and the
// first failed check must be the one that is responsible for noticing it.
//
// Changes to the leaves come twice: as they are (the inclusion proof must
// catch them), and with the tree and checkpoint recomputed over the changed
// log by a testlog.Rogue holding the log key, so that the later checks
// (structure, the decisions re-run) must catch them on their own.

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// Expected first failed checks.
const (
	cCheckpoint = "checkpoint signature"
	cInclusion  = "inclusion proofs"
	cStructure  = "structure"
	cDecisions  = "decisions re-run"
	cUnusable   = "unusable"
	cValid      = "" // documented exceptions: the result is still a true statement
)

type mutant struct {
	part string // what was changed, for the counts
	name string
	b    *verify.Bundle
	raw  []byte   // wire bytes, instead of b
	want []string // acceptable first failed checks
	// retarget: a valid result must name this subject.
	retarget *uint64
}

type mutationBase struct {
	name    string
	b       *verify.Bundle
	subject uint64
}

func TestMutations(t *testing.T) {
	w := newStandardWorld(t)
	// One more leaf after the scenario, so that an older checkpoint exists.
	stale := w.L.Head().Checkpoint
	carol := testlog.NewActor("user:carol")
	w.Enroll(carol, "p_carol")
	leaves := w.Leaves()

	bases := []mutationBase{
		{"receipt (depth 3)", w.Prove(w.s.Pending, false), w.s.Pending},
		{"outcome", w.Prove(w.s.Outcome, false), w.s.Outcome},
		{"workflow", w.Prove(w.s.Pending, true), w.s.Pending},
	}
	counts := map[string]int{}
	outcomes := map[string]map[string]int{}
	total := 0
	for _, base := range bases {
		mustVerify(t, base.b, w.vkey)
		var ms []mutant
		ms = append(ms, checkpointMutants(base)...)
		ms = append(ms, mutant{part: "checkpoint/stale", name: "an older checkpoint", b: withCheckpoint(base.b, string(stale)), want: []string{cInclusion}})
		ms = append(ms, proofMutants(base)...)
		// The workflow bundle holds every entry of the other two: changes
		// that need the tree recomputed are made to it alone.
		reproved := base.name == "workflow"
		ms = append(ms, leafMutants(t, base, w, leaves, reproved)...)
		if reproved {
			ms = append(ms, payloadMutants(t, base, w, leaves)...)
		}
		ms = append(ms, shapeMutants(base)...)
		for _, m := range ms {
			var v *verify.Verdict
			var err error
			if m.raw != nil {
				v, err = checkBytes(m.raw, w.vkey)
			} else {
				v, err = check(t, m.b, w.vkey)
			}
			got := failedCheck(v, err)
			total++
			counts[m.part]++
			if outcomes[m.part] == nil {
				outcomes[m.part] = map[string]int{}
			}
			outcomes[m.part][orValid(got)]++
			if !slices.Contains(m.want, got) {
				detail := ""
				if v != nil {
					detail = text(v)
				} else if err != nil {
					detail = err.Error()
				}
				t.Errorf("%s / %s / %s: first failed check %q, want one of %q\n%s", base.name, m.part, m.name, orValid(got), m.want, detail)
				continue
			}
			if got == cValid && m.retarget != nil && (v.Subject != *m.retarget || v.Kind == "") {
				t.Errorf("%s / %s: a valid retargeted bundle names subject %d %s, want %d", base.name, m.name, v.Subject, v.Kind, *m.retarget)
			}
		}
	}
	parts := slices.Sorted(maps.Keys(counts))
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d mutations of %d bundles:\n", total, len(bases))
	for _, p := range parts {
		var res []string
		for _, k := range slices.Sorted(maps.Keys(outcomes[p])) {
			res = append(res, fmt.Sprintf("%s %d", k, outcomes[p][k]))
		}
		fmt.Fprintf(&sb, "  %-34s %5d  (%s)\n", p, counts[p], strings.Join(res, ", "))
	}
	t.Log(sb.String())
}

func orValid(s string) string {
	if s == "" {
		return "valid"
	}
	return s
}

func withCheckpoint(b *verify.Bundle, cp string) *verify.Bundle {
	c := cloneBundle(b)
	c.Checkpoint = cp
	return c
}

// checkpointMutants flips every bit of every byte of the checkpoint text,
// named by the line it falls in.
func checkpointMutants(base mutationBase) []mutant {
	cp := []byte(base.b.Checkpoint)
	lineOf := func(p int) string {
		line := strings.Count(string(cp[:p]), "\n")
		switch line {
		case 0:
			return "origin line"
		case 1:
			return "size line"
		case 2:
			return "root line"
		case 3:
			return "blank line"
		}
		return "signature line"
	}
	var out []mutant
	for p := range cp {
		for bit := range 8 {
			m := slices.Clone(cp)
			m[p] ^= 1 << bit
			out = append(out, mutant{part: "checkpoint/" + lineOf(p), name: fmt.Sprintf("byte %d bit %d", p, bit),
				b: withCheckpoint(base.b, string(m)), want: []string{cCheckpoint}})
		}
	}
	// Whole-text changes.
	body, sigs, _ := strings.Cut(base.b.Checkpoint, "\n\n")
	body += "\n" // the signed text
	witness := testlog.NewActor("witness")
	cosig, err := note.Sign(&note.Note{Text: body}, witness.NoteSigner("witness.example"))
	if err != nil {
		panic(err)
	}
	_, cosigLine, _ := strings.Cut(string(cosig), "\n\n")
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", cCheckpoint},
		{"no signature", body + "\n", cCheckpoint},
		{"body only, no blank line", body, cCheckpoint},
		{"CRLF", strings.ReplaceAll(base.b.Checkpoint, "\n", "\r\n"), cCheckpoint},
		{"extension line", body + "ext\n\n" + sigs, cCheckpoint},
		{"signed by a witness only", body + "\n" + cosigLine, cCheckpoint},
		// Extra signature lines are cosignatures (C2SP signed-note): they
		// neither help nor hurt, and the same signature twice adds nothing.
		{"witness cosignature added", base.b.Checkpoint + cosigLine, cValid},
		{"signature line repeated", base.b.Checkpoint + sigs, cValid},
	} {
		out = append(out, mutant{part: "checkpoint/whole", name: c.name, b: withCheckpoint(base.b, c.text), want: []string{c.want}})
	}
	return out
}

// proofMutants flips a bit of every proof hash, and drops, adds or
// misspells hashes.
func proofMutants(base mutationBase) []mutant {
	var out []mutant
	for i, e := range base.b.Entries {
		for j, h := range e.Proof {
			raw, _ := base64.StdEncoding.DecodeString(h)
			raw[(i*7+j*13)%len(raw)] ^= 1 << ((i + j) % 8)
			c := cloneBundle(base.b)
			c.Entries[i].Proof[j] = base64.StdEncoding.EncodeToString(raw)
			out = append(out, mutant{part: "proof/hash bit flip", name: fmt.Sprintf("entry %d hash %d", e.Index, j), b: c, want: []string{cInclusion}})

			c = cloneBundle(base.b)
			c.Entries[i].Proof[j] = nonCanonicalB64(h)
			out = append(out, mutant{part: "proof/hash misspelt", name: fmt.Sprintf("entry %d hash %d", e.Index, j), b: c, want: []string{cInclusion}})
		}
		c := cloneBundle(base.b)
		c.Entries[i].Proof = c.Entries[i].Proof[:len(c.Entries[i].Proof)-1]
		out = append(out, mutant{part: "proof/hash dropped", name: fmt.Sprintf("entry %d", e.Index), b: c, want: []string{cInclusion}})
		c = cloneBundle(base.b)
		c.Entries[i].Proof = append(c.Entries[i].Proof, c.Entries[i].Proof[0])
		out = append(out, mutant{part: "proof/hash added", name: fmt.Sprintf("entry %d", e.Index), b: c, want: []string{cInclusion}})
		if i > 0 {
			c = cloneBundle(base.b)
			c.Entries[i].Proof = base.b.Entries[i-1].Proof
			out = append(out, mutant{part: "proof/another entry's", name: fmt.Sprintf("entry %d", e.Index), b: c, want: []string{cInclusion}})
		}
	}
	return out
}

// nonCanonicalB64 spells the same bytes with non-zero padding bits (a
// 32-byte hash leaves two), or breaks the encoding.
func nonCanonicalB64(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(alphabet, s[len(s)-2])
	return s[:len(s)-2] + string(alphabet[i|1]) + "="
}

// leafRegion is a byte range of a leaf's canonical JSON.
type leafRegion struct {
	name       string
	start, end int
	envelope   bool // inside the signed envelope
}

func leafRegions(leaf []byte) []leafRegion {
	var out []leafRegion
	str := func(name, key string, env bool) {
		i := strings.Index(string(leaf), `"`+key+`":"`)
		if i < 0 {
			return
		}
		s := i + len(key) + 4
		e := s + strings.IndexByte(string(leaf[s:]), '"')
		out = append(out, leafRegion{name, s, e, env})
	}
	num := func(name, key string) {
		i := strings.Index(string(leaf), `"`+key+`":`)
		if i < 0 {
			return
		}
		s := i + len(key) + 3
		e := s
		for e < len(leaf) && leaf[e] >= '0' && leaf[e] <= '9' {
			e++
		}
		out = append(out, leafRegion{name, s, e, false})
	}
	str("payload base64", "payload", true)
	str("signature", "sig", true)
	str("keyid", "keyid", true)
	str("payloadType", "payloadType", true)
	str("logged_at", "logged_at", false)
	num("prev_in_workflow", "prev_in_workflow")
	num("trust_head", "trust_head")
	out = append(out, leafRegion{"JSON syntax", 0, 13, false}) // {"envelope":{
	return out
}

// spread picks up to n positions spread over [start, end).
func spread(start, end, n int) []int {
	var out []int
	for k := range n {
		p := start + (end-start-1)*k/max(n-1, 1)
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

// leafMutants flips bits at positions in every region of every leaf:
// first as they are (inclusion), then with the tree recomputed by a Rogue.
func leafMutants(t *testing.T, base mutationBase, w *world, leaves [][]byte, reproved bool) []mutant {
	var out []mutant
	for i, e := range base.b.Entries {
		leaf := leaves[e.Index]
		for _, r := range leafRegions(leaf) {
			for _, p := range spread(r.start, r.end, 6) {
				for _, bit := range []byte{0x01, 0x08} {
					m := slices.Clone(leaf)
					m[p] ^= bit
					name := fmt.Sprintf("entry %d byte %d ^%#x", e.Index, p, bit)
					c := cloneBundle(base.b)
					c.Entries[i].Leaf = base64.StdEncoding.EncodeToString(m)
					out = append(out, mutant{part: "leaf/" + r.name, name: name, b: c, want: []string{cInclusion}})

					// Re-proved. logged_at is the log's own word: a rogue log
					// may write any time consistent with its neighbours (below,
					// times that are not are tried).
					if r.name == "logged_at" || !reproved {
						continue
					}
					var want []string
					switch {
					case r.envelope:
						want = []string{envelopeOracle(t, leaf, m, e.Index, w)}
					case r.name == "JSON syntax":
						want = []string{cStructure}
					default: // a back-link: broken chain, or not the engine's link
						want = []string{cStructure, cDecisions}
					}
					out = append(out, mutant{part: "re-proved leaf/" + r.name, name: name, b: reprove(t, w, leaves, e.Index, m, base), want: want})
				}
			}
		}
		if !reproved {
			continue
		}
		// Acceptance times a rogue log could not have written.
		l, at, err := statement.ParseLeaf(leaf)
		if err != nil {
			t.Fatal(err)
		}
		for name, d := range map[string]time.Duration{"an hour ahead": time.Hour, "a day back": -24 * time.Hour} {
			nl := *l
			nl.LoggedAt = statement.FormatLoggedAt(at.Add(d))
			m, err := statement.MarshalLeaf(&nl)
			if err != nil {
				t.Fatal(err)
			}
			want := cDecisions // clock_skew, or logged_at going backwards
			out = append(out, mutant{part: "re-proved leaf/logged_at", name: fmt.Sprintf("entry %d %s", e.Index, name),
				b: reprove(t, w, leaves, e.Index, m, base), want: []string{want}})
		}
	}
	return out
}

// reprove replaces leaf index in the log, recomputes the tree and the
// checkpoint with the log key, and rebuilds base's bundle over it.
func reprove(t *testing.T, w *world, leaves [][]byte, index uint64, leaf []byte, base mutationBase) *verify.Bundle {
	ls := slices.Clone(leaves)
	ls[index] = leaf
	r := testlog.RogueFromLeaves(t, w.Origin, w.LogKey, ls)
	return r.BundleOf(base.subject, entryIndexes(base.b))
}

// envelopeOracle says which check must catch a changed envelope once the
// tree has been recomputed: the structure check, if the leaf or envelope no
// longer reads, or the entry now claims another kind or workflow, or
// GENESIS no longer names this log and key; otherwise the decisions re-run
// (the signature no longer verifies).
func envelopeOracle(t *testing.T, orig, mutated []byte, index uint64, w *world) string {
	l, _, err := statement.ParseLeaf(mutated)
	if err != nil {
		return cStructure
	}
	env, err := sign.ParseEnvelope(l.Envelope)
	if err != nil {
		return cStructure
	}
	ol, _, _ := statement.ParseLeaf(orig)
	oenv, _ := sign.ParseEnvelope(ol.Envelope)
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	okind, _ := statement.KindOfPayloadType(oenv.PayloadType)
	return payloadOracle(t, okind, oenv.Payload, kind, env.Payload, index, w)
}

func payloadOracle(t *testing.T, okind statement.Kind, opayload []byte, kind statement.Kind, payload []byte, index uint64, w *world) string {
	trust := func(k statement.Kind) bool { return k == statement.Genesis || k == statement.Principal }
	if kind != okind {
		return cStructure
	}
	if index == 0 {
		st, err := statement.Parse(statement.Genesis, payload)
		if err != nil {
			return cStructure
		}
		g := st.(*statement.GenesisDoc)
		pub, err := g.LogPublicKey()
		if err != nil || g.Log != w.Origin || !pub.Equal(w.LogKey.Pub) {
			return cStructure
		}
		return cDecisions
	}
	if !trust(kind) && statement.PeekWorkflow(payload) != statement.PeekWorkflow(opayload) {
		return cStructure
	}
	return cDecisions
}

// payloadMutants changes each top-level field of each payload (or drops
// it) and signs the result with the wrong key: keeping the signer's keyid,
// under a stranger's own keyid, and under another key the log has bound.
func payloadMutants(t *testing.T, base mutationBase, w *world, leaves [][]byte) []mutant {
	stranger := testlog.NewActor("mallory")
	var out []mutant
	for _, e := range base.b.Entries {
		leaf := leaves[e.Index]
		l, _, err := statement.ParseLeaf(leaf)
		if err != nil {
			t.Fatal(err)
		}
		env, err := sign.ParseEnvelope(l.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := statement.KindOfPayloadType(env.PayloadType)
		// Another bound key: the admin, or for the admin's own entries alice.
		bound := w.Admin
		if env.KeyID == w.Admin.KeyID() {
			bound = w.s.Alice
		}
		tree, err := canon.Parse(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		type change struct {
			name    string
			payload []byte
		}
		changes := []change{{"unchanged", env.Payload}}
		for mi, m := range tree.Members {
			var nv *canon.Value
			switch m.Value.Kind {
			case canon.String:
				nv = &canon.Value{Kind: canon.String, Str: m.Value.Str + "x"}
			case canon.Int:
				nv = &canon.Value{Kind: canon.Int, Int: m.Value.Int + 1}
			case canon.Bool:
				nv = &canon.Value{Kind: canon.Bool, Bool: !m.Value.Bool}
			}
			if nv != nil {
				c := *tree
				c.Members = slices.Clone(tree.Members)
				c.Members[mi].Value = nv
				changes = append(changes, change{"changed " + m.Key, canon.Encode(&c)})
			}
			c := *tree
			c.Members = slices.Delete(slices.Clone(tree.Members), mi, mi+1)
			changes = append(changes, change{"dropped " + m.Key, canon.Encode(&c)})
		}
		for _, ch := range changes {
			want := payloadOracle(t, kind, env.Payload, kind, ch.payload, e.Index, w)
			signers := []struct {
				name  string
				key   *testlog.Actor
				keyid string
			}{
				{"wrong key, signer's keyid", stranger, env.KeyID},
				{"stranger's key and keyid", stranger, stranger.KeyID()},
				{"another bound key", bound, bound.KeyID()},
			}
			for si, s := range signers {
				if strings.HasPrefix(ch.name, "dropped") && si > 0 {
					continue // one signer is enough for a dropped field
				}
				ne, err := sign.Sign(s.key.Priv, kind.Lower(), ch.payload)
				if err != nil {
					t.Fatal(err)
				}
				ne.Signatures[0].KeyID = s.keyid
				raw, err := ne.Canonical()
				if err != nil {
					t.Fatal(err)
				}
				nl := *l
				nl.Envelope = raw
				m, err := statement.MarshalLeaf(&nl)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, mutant{part: "re-signed payload/" + s.name, name: fmt.Sprintf("entry %d %s %s", e.Index, kind, ch.name),
					b: reprove(t, w, leaves, e.Index, m, base), want: []string{want}})
			}
		}
	}
	return out
}

// shapeMutants removes, reorders, duplicates and renumbers entries, and
// changes the subject, the origin and the wire form.
func shapeMutants(base mutationBase) []mutant {
	var out []mutant
	b := base.b
	in := func(i uint64) bool { return slices.Contains(entryIndexes(b), i) }
	last := b.Entries[len(b.Entries)-1].Index
	for i, e := range b.Entries {
		c := cloneBundle(b)
		c.Entries = slices.Delete(c.Entries, i, i+1)
		want := cStructure
		if e.Index > base.subject && e.Index == last {
			// What is left is the bundle of the subject with a shorter tail:
			// still true (the verdict says how many entries it covers).
			want = cValid
		}
		out = append(out, mutant{part: "entries/removed", name: fmt.Sprintf("entry %d", e.Index), b: c, want: []string{want}})

		c = cloneBundle(b)
		c.Entries = slices.Insert(c.Entries, i, c.Entries[i])
		out = append(out, mutant{part: "entries/duplicated", name: fmt.Sprintf("entry %d", e.Index), b: c, want: []string{cInclusion}})

		if i > 0 {
			c = cloneBundle(b)
			c.Entries[i-1], c.Entries[i] = c.Entries[i], c.Entries[i-1]
			out = append(out, mutant{part: "entries/reordered", name: fmt.Sprintf("swap %d and %d", b.Entries[i-1].Index, e.Index), b: c, want: []string{cInclusion}})

			c = cloneBundle(b)
			c.Entries[i-1].Leaf, c.Entries[i].Leaf = c.Entries[i].Leaf, c.Entries[i-1].Leaf
			out = append(out, mutant{part: "entries/leaves swapped", name: fmt.Sprintf("leaves of %d and %d", b.Entries[i-1].Index, e.Index), b: c, want: []string{cInclusion}})
		}
		for _, d := range []int64{-1, 1, 1 << 40} {
			c = cloneBundle(b)
			c.Entries[i].Index = uint64(int64(e.Index) + d)
			out = append(out, mutant{part: "entries/index changed", name: fmt.Sprintf("entry %d%+d", e.Index, d), b: c, want: []string{cInclusion}})
		}
		c = cloneBundle(b)
		c.Entries[i].Leaf = c.Entries[i].Leaf[:len(c.Entries[i].Leaf)-1]
		out = append(out, mutant{part: "entries/leaf not base64", name: fmt.Sprintf("entry %d", e.Index), b: c, want: []string{cInclusion}})
	}
	c := cloneBundle(b)
	c.Entries = slices.Insert(c.Entries, 0, c.Entries[len(c.Entries)-1])
	c.Entries = c.Entries[:len(c.Entries)-1]
	out = append(out, mutant{part: "entries/reordered", name: "last first", b: c, want: []string{cInclusion}})
	c = cloneBundle(b)
	c.Entries = nil
	out = append(out, mutant{part: "entries/removed", name: "all", b: c, want: []string{cStructure}})
	c = cloneBundle(b)
	c.Entries = c.Entries[:1]
	out = append(out, mutant{part: "entries/removed", name: "all but GENESIS", b: c, want: []string{cStructure}})

	for s := uint64(0); s <= last+2; s++ {
		if s == base.subject {
			continue
		}
		c := cloneBundle(b)
		c.Subject = s
		m := mutant{part: "subject changed", name: fmt.Sprintf("to %d", s), b: c, want: []string{cStructure}}
		if in(s) && s >= 3 {
			// A workflow entry of the bundle: the bundle proves it too, and
			// the verdict names it as the subject. Not a forgery.
			m.want, m.retarget = []string{cValid}, &s
		}
		out = append(out, m)
	}
	for _, o := range []string{"", "custody.test/log2", "other.example/log", testlog.Origin + " "} {
		c := cloneBundle(b)
		c.Origin = o
		out = append(out, mutant{part: "origin changed", name: fmt.Sprintf("%q", o), b: c, want: []string{cCheckpoint}})
	}
	raw, _ := b.Marshal()
	for name, r := range map[string]string{
		"format":        strings.Replace(string(raw), verify.BundleFormat, "custody-bundle/v2", 1),
		"unknown field": strings.Replace(string(raw), `"format":`, `"extra":1,"format":`, 1),
		"truncated":     string(raw[:len(raw)/2]),
		"duplicate key": strings.Replace(string(raw), `"format":`, `"subject":0,"format":`, 1),
		"not JSON":      "custody",
	} {
		out = append(out, mutant{part: "wire form", name: name, raw: []byte(r), want: []string{cUnusable}})
	}
	return out
}
