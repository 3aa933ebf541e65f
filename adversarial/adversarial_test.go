package adversarial_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

const (
	origin   = "adv.example/custody"
	zeroHash = testlog.ZeroHash
	corpus   = "../testdata/adversarial"
)

// t0 is the clock's start; GENESIS is written at t0.
var t0 = time.Date(2026, 3, 19, 8, 12, 0, 0, time.UTC)

type obj = testlog.Obj

// caseFile is one file of the corpus. See the package comment.
type caseFile struct {
	Note    string       `json:"note"` // for setup files
	Class   string       `json:"class"`
	Attack  string       `json:"attack"`
	Defence string       `json:"defence"`
	Options *caseOptions `json:"options"`
	Setup   []string     `json:"setup"`
	Steps   []*step      `json:"steps"`
}

// caseOptions are GENESIS parameters and ledger options (0: defaults).
type caseOptions struct {
	MaxDepth         int64 `json:"max_depth"`
	ClockSkewSeconds int64 `json:"clock_skew_seconds"`
	MaxTTLSeconds    int64 `json:"max_ttl_seconds"`
	DenialsPerMinute int   `json:"denials_per_minute"`
	DenialBurst      int   `json:"denial_burst"`
}

// edit replaces the first (or every) occurrence of From with To. From must
// occur, so that an edit can never silently do nothing.
type edit struct {
	From string `json:"from"`
	To   string `json:"to"`
	All  bool   `json:"all"`
}

// step is one submission (or a resubmission, a repeated submission, or a
// race of several). Fields that make a submission deviate from what an
// honest client sends are marked "fault".
type step struct {
	Label string `json:"label"` // names the step for resubmit and races
	Note  string `json:"note"`  // free commentary
	By    string `json:"by"`    // signer handle
	Kind  string `json:"kind"`  // statement type, e.g. "RECEIPT"
	Set   obj    `json:"set"`   // statement fields; the runner fills the rest

	Advance  *float64 `json:"advance"`   // seconds to move the clock first (default 1)
	AtExpiry string   `json:"at_expiry"` // set the clock to this grant's expires_at...
	OffsetNS int64    `json:"offset_ns"` // ...plus this many nanoseconds

	Drop         []string `json:"drop"`          // fault: top-level fields to leave out
	TSOffset     int64    `json:"ts_offset"`     // fault: seconds added to the timestamp
	SeqDelta     int64    `json:"seq_delta"`     // fault: added to the right seq
	RawPayload   *string  `json:"raw_payload"`   // fault: the payload text itself
	PayloadEdit  []edit   `json:"payload_edit"`  // fault: edits of the canonical payload text
	SignAs       string   `json:"sign_as"`       // fault: sign under this kind's payload type
	PresentAs    string   `json:"present_as"`    // fault: put this payload type in the envelope after signing
	KeyID        string   `json:"keyid"`         // fault: this handle's key id (or raw:NAME) in the envelope
	SigOp        string   `json:"sig_op"`        // fault: s_plus_l, flip_r, identity_zero, stray_bits, truncate
	EnvelopeEdit []edit   `json:"envelope_edit"` // fault: edits of the envelope text

	Resubmit string `json:"resubmit"` // send the exact bytes of an earlier step again
	Repeat   int    `json:"repeat"`   // submit this many variants ({{n}} = 1..repeat)

	Race       []*step   `json:"race"`        // submit these concurrently
	Outcomes   []outcome `json:"outcomes"`    // for a race: what each order must yield
	ByPosition []string  `json:"by_position"` // for a race: expectation by sequenced position

	Expect         string   `json:"expect"`          // accepted | denied/<code> | refused/<code>
	ExpectEach     []string `json:"expect_each"`     // for repeat: one per variant
	Duplicate      bool     `json:"duplicate"`       // the answer is a prior decision; nothing is appended
	Notes          bool     `json:"notes"`           // the acceptance carries a note (e.g. an overrun)
	DenialWorkflow *string  `json:"denial_workflow"` // the DENIAL's workflow_id ("" = none)
	DenialEnvelope *bool    `json:"denial_envelope"` // whether the DENIAL holds the envelope
	ReasonHas      []string `json:"reason_has"`      // words the reason sentence must contain
}

type outcome struct {
	Order  []string          `json:"order"`
	Expect map[string]string `json:"expect"`
}

// clock is the ledger's settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// run is one case being played against a fresh ledger.
type run struct {
	t      *testing.T
	l      *ledger.Ledger
	clock  *clock
	rotate int               // racers start rotated by this many places
	logged map[uint64]string // leaf index -> the decision it records
	sent   map[string]sent   // label -> what was sent
}

type sent struct {
	wire   []byte
	expect string
	index  uint64
}

// built is a signed submission ready to send.
type built struct {
	wire []byte
	kid  string // key id in the envelope
	kind statement.Kind
}

func readCase(path string) (*caseFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var c caseFile
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &c, nil
}

// TestAdversarialCorpus plays every case of testdata/adversarial.
func TestAdversarialCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(corpus, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 60 {
		t.Fatalf("the corpus has %d cases, want at least 60", len(files))
	}
	classes := map[string]int{}
	for _, f := range files {
		c, err := readCase(f)
		if err != nil {
			t.Fatal(err)
		}
		if c.Class == "" || c.Attack == "" || c.Defence == "" || len(c.Steps) == 0 {
			t.Fatalf("%s: class, attack, defence and steps are required", f)
		}
		classes[c.Class]++
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		// A case with a race is played once per rotation of the order in
		// which its racers start, so that the ledger sees different
		// interleavings; every round must be consistent with the order
		// the ledger chose.
		rounds := 1
		for _, s := range c.Steps {
			rounds = max(rounds, len(s.Race))
		}
		for round := range rounds {
			sub := name
			if rounds > 1 {
				sub = fmt.Sprintf("%s/round-%d", name, round)
			}
			t.Run(sub, func(t *testing.T) { playCase(t, c, round) })
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(classes)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, classes[k]))
	}
	t.Logf("%d cases: %s", len(files), strings.Join(parts, " "))
}

func playCase(t *testing.T, c *caseFile, rotate int) {
	clk := &clock{t: t0}
	o := c.Options
	if o == nil {
		o = &caseOptions{}
	}
	l, err := ledger.Init(t.TempDir(), origin, ledger.InitOptions{
		AdminName: "admin", AdminKey: keyFor("admin").Priv, LogKey: keyFor("log").Priv,
		MaxDepth: o.MaxDepth, ClockSkewSeconds: o.ClockSkewSeconds, MaxTTLSeconds: o.MaxTTLSeconds,
		Options: ledger.Options{Clock: clk.Now, DenialsPerMinute: o.DenialsPerMinute, DenialBurst: o.DenialBurst},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := &run{t: t, l: l, clock: clk, rotate: rotate, logged: map[uint64]string{0: "accepted"}, sent: map[string]sent{}}
	for _, name := range c.Setup {
		s, err := readCase(filepath.Join(corpus, "setup", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range s.Steps {
			if !r.play(fmt.Sprintf("setup %s step %d", name, i), st) {
				t.Fatalf("setup %s failed", name)
			}
		}
	}
	for i, st := range c.Steps {
		r.play(fmt.Sprintf("step %d %s", i, st.Label), st)
	}
	r.replay()
}

// play runs one step and reports whether it went as expected.
func (r *run) play(where string, s *step) bool {
	r.t.Helper()
	r.advance(where, s)
	switch {
	case s.Race != nil:
		return r.race(where, s)
	case s.Resubmit != "":
		prev, ok := r.sent[s.Resubmit]
		if !ok {
			r.t.Fatalf("%s: no earlier step %q", where, s.Resubmit)
		}
		want := s.Expect
		if want == "" {
			want = prev.expect
		}
		wire := r.edit(where, slices.Clone(prev.wire), s.EnvelopeEdit, vars{})
		return r.submitAndCheck(where, s, built{wire: wire}, want)
	case s.Repeat > 0:
		ok := true
		for n := 1; n <= s.Repeat; n++ {
			want := s.Expect
			if s.ExpectEach != nil {
				if len(s.ExpectEach) != s.Repeat {
					r.t.Fatalf("%s: expect_each has %d entries for repeat %d", where, len(s.ExpectEach), s.Repeat)
				}
				want = s.ExpectEach[n-1]
			}
			b := r.build(where, s, n)
			ok = r.submitAndCheck(fmt.Sprintf("%s #%d", where, n), s, b, want) && ok
		}
		return ok
	default:
		b := r.build(where, s, 0)
		ok := r.submitAndCheck(where, s, b, s.Expect)
		return ok
	}
}

func (r *run) advance(where string, s *step) {
	now := r.clock.Now()
	switch {
	case s.AtExpiry != "":
		g := r.grant(s.AtExpiry)
		if g == nil {
			r.t.Fatalf("%s: at_expiry: no accepted grant %q", where, s.AtExpiry)
		}
		exp, err := time.Parse(time.RFC3339, g.desc.ExpiresAt)
		if err != nil {
			r.t.Fatal(err)
		}
		at := exp.Add(time.Duration(s.OffsetNS))
		if at.Before(now) {
			r.t.Fatalf("%s: at_expiry would move the clock back from %s to %s", where, now, at)
		}
		r.clock.Set(at)
	case s.Advance != nil:
		r.clock.Set(now.Add(time.Duration(*s.Advance * float64(time.Second))))
	default:
		r.clock.Set(now.Add(time.Second))
	}
}

// result is what became of one submission.
type result struct {
	got    string // accepted | denied/<code> | refused/<code>
	reason string // for a refusal
	res    *ledger.Result
}

func (r *run) send(where string, wire []byte) result {
	res, err := r.l.Append(context.Background(), wire)
	if err != nil {
		var de *authority.DecisionError
		if !errors.As(err, &de) {
			r.t.Fatalf("%s: Append: %v", where, err)
		}
		if de.Verdict != authority.Refused {
			r.t.Fatalf("%s: an error that is not a refusal: %v", where, de)
		}
		return result{got: "refused/" + string(de.Code), reason: de.Reason}
	}
	if res.Verdict == authority.Accepted {
		return result{got: "accepted", res: res}
	}
	return result{got: res.Verdict.String() + "/" + string(res.Code), res: res}
}

// submitAndCheck sends one submission on its own and checks the verdict,
// the log's growth and the entry written.
func (r *run) submitAndCheck(where string, s *step, b built, want string) bool {
	r.t.Helper()
	if want == "" {
		r.t.Fatalf("%s: no expectation", where)
	}
	before := r.l.Head().Size
	got := r.send(where, b.wire)
	after := r.l.Head().Size
	ok := true
	fail := func(format string, args ...any) {
		r.t.Errorf("%s: "+format, append([]any{where}, args...)...)
		ok = false
	}
	reason := got.reason
	if got.res != nil {
		reason = got.res.Reason
	}
	if got.got != want {
		fail("got %s (%s), want %s", got.got, reason, want)
	} else {
		r.t.Logf("%s: %s %s", where, got.got, reason)
	}
	for _, w := range s.ReasonHas {
		if !strings.Contains(reason, w) {
			fail("reason %q does not say %q", reason, w)
		}
	}
	if s.Label != "" {
		idx := uint64(0)
		if got.res != nil {
			idx = got.res.Index
		}
		r.sent[s.Label] = sent{wire: b.wire, expect: got.got, index: idx}
	}
	switch {
	case got.res == nil: // refused
		if after != before {
			fail("a refusal appended %d leaves", after-before)
		}
		return ok
	case got.res.Duplicate:
		if !s.Duplicate {
			fail("answered as a duplicate of leaf %d", got.res.Index)
		}
		if after != before {
			fail("a duplicate appended %d leaves", after-before)
		}
		if prev, seen := r.logged[got.res.Index]; !seen || prev != got.got {
			fail("duplicate answer %s names leaf %d, which records %q", got.got, got.res.Index, prev)
		}
		return ok
	}
	if s.Duplicate {
		fail("expected a duplicate, but leaf %d was appended", got.res.Index)
	}
	if got.res.Index != before || after != before+1 {
		fail("logged at %d, log grew %d -> %d; want exactly one leaf at %d", got.res.Index, before, after, before)
	}
	r.logged[got.res.Index] = got.got
	r.checkEntry(where, s, b, got, fail)
	return ok
}

// checkEntry checks the proof of a logged result and the entry it wrote.
func (r *run) checkEntry(where string, s *step, b built, got result, fail func(string, ...any)) {
	res := got.res
	cp, err := merkle.OpenCheckpoint(res.Head.Checkpoint, origin, r.l.VerifierKey())
	if err != nil {
		fail("checkpoint: %v", err)
		return
	}
	leaf, err := r.l.LeafBytes(res.Index)
	if err != nil {
		fail("%v", err)
		return
	}
	if err := merkle.VerifyInclusion(res.Index, cp.Size, merkle.LeafHash(leaf), res.Proof, cp.Root); err != nil {
		fail("inclusion proof: %v", err)
	}
	e, err := r.l.Entry(res.Index)
	if err != nil {
		fail("entry: %v", err)
		return
	}
	if s.Notes != (len(res.Notes) > 0) && res.Verdict == authority.Accepted {
		fail("notes %q, want notes=%v", res.Notes, s.Notes)
	}
	if res.Verdict == authority.Accepted {
		if s.DenialWorkflow != nil || s.DenialEnvelope != nil {
			fail("denial checks on an accepted statement")
		}
		return
	}
	d, isDenial := e.Statement.(*statement.DenialDoc)
	if !isDenial {
		fail("a denial logged as %s", e.Kind())
		return
	}
	if e.Envelope.KeyID != keyFor("log").KID {
		fail("DENIAL signed by %s, not the log key", e.Envelope.KeyID)
	}
	if d.ReasonCode != string(res.Code) {
		fail("DENIAL reason_code %s, answer %s", d.ReasonCode, res.Code)
	}
	if b.kid != "" && d.SignerKeyID != b.kid {
		fail("DENIAL signer_keyid %s, want %s", d.SignerKeyID, b.kid)
	}
	if s.DenialWorkflow != nil && d.Workflow != *s.DenialWorkflow {
		fail("DENIAL workflow_id %q, want %q", d.Workflow, *s.DenialWorkflow)
	}
	if s.DenialEnvelope != nil && (d.Envelope != nil) != *s.DenialEnvelope {
		fail("DENIAL holds the envelope: %v, want %v", d.Envelope != nil, *s.DenialEnvelope)
	}
	if d.Envelope != nil && b.wire != nil {
		// The DENIAL names exactly what was submitted.
		p, err := sign.ParseEnvelope(b.wire)
		if err == nil && (d.Envelope.Payload != p.Envelope.Payload || d.Envelope.Signatures[0].Sig != p.Envelope.Signatures[0].Sig) {
			fail("the DENIAL's envelope is not the submitted one")
		}
	}
}

// race submits several statements at once and checks that the log is
// consistent with the order the ledger chose.
func (r *run) race(where string, s *step) bool {
	r.t.Helper()
	bs := make([]built, len(s.Race))
	for i, m := range s.Race {
		if m.Label == "" {
			r.t.Fatalf("%s: race member %d has no label", where, i)
		}
		if m.Resubmit != "" {
			bs[i] = built{wire: r.sent[m.Resubmit].wire}
			for j := 0; j < i; j++ {
				if s.Race[j].Label == m.Resubmit {
					bs[i] = bs[j]
				}
			}
			if bs[i].wire == nil {
				r.t.Fatalf("%s: race member %s resubmits unknown %q", where, m.Label, m.Resubmit)
			}
			continue
		}
		bs[i] = r.build(where+" "+m.Label, m, 0)
	}
	before := r.l.Head().Size
	results := make([]result, len(s.Race))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for k := range s.Race {
		i := (k + r.rotate) % len(s.Race)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := r.l.Append(context.Background(), bs[i].wire)
			switch {
			case err == nil && res.Verdict == authority.Accepted:
				results[i] = result{got: "accepted", res: res}
			case err == nil:
				results[i] = result{got: res.Verdict.String() + "/" + string(res.Code), res: res}
			default:
				var de *authority.DecisionError
				if errors.As(err, &de) {
					results[i] = result{got: "refused/" + string(de.Code)}
				} else {
					results[i] = result{got: "error: " + err.Error()}
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	ok := true
	fail := func(format string, args ...any) {
		r.t.Errorf("%s: "+format, append([]any{where}, args...)...)
		ok = false
	}

	// Which member holds which leaf; identical bytes share one leaf.
	type member struct {
		label string
		index uint64
	}
	var order []member
	owners := map[uint64]int{}
	for i, m := range s.Race {
		res := results[i].res
		if res == nil {
			continue
		}
		if !res.Duplicate {
			owners[res.Index]++
			order = append(order, member{m.Label, res.Index})
		}
	}
	for i, m := range s.Race {
		if res := results[i].res; res != nil && res.Duplicate && owners[res.Index] != 1 {
			fail("%s is a duplicate of leaf %d, which no other member of the race wrote", m.Label, res.Index)
		}
	}
	for idx, n := range owners {
		if n != 1 {
			fail("%d members claim leaf %d", n, idx)
		}
	}
	slices.SortFunc(order, func(a, b member) int { return int(a.index) - int(b.index) })
	after := r.l.Head().Size
	if after != before+uint64(len(order)) {
		fail("the race logged %d decisions but the log grew by %d", len(order), after-before)
	}
	for i, m := range order {
		if m.index != before+uint64(i) {
			fail("race leaves are not contiguous: %s at %d", m.label, m.index)
		}
	}
	labels := make([]string, len(order))
	for i, m := range order {
		labels[i] = m.label
	}
	want := map[string]string{}
	switch {
	case s.Outcomes != nil:
		found := false
		for _, o := range s.Outcomes {
			if slices.Equal(o.Order, labels) {
				want, found = o.Expect, true
			}
		}
		if !found {
			fail("the ledger chose order %v, which no outcome describes", labels)
		}
	case s.ByPosition != nil:
		if len(s.ByPosition) != len(order) {
			fail("%d members were logged, by_position has %d", len(order), len(s.ByPosition))
		}
		for i, m := range order {
			if i < len(s.ByPosition) {
				want[m.label] = s.ByPosition[i]
			}
		}
		for i, m := range s.Race {
			if results[i].res != nil && results[i].res.Duplicate {
				want[m.Label] = m.Expect
			}
		}
	default:
		for _, m := range s.Race {
			want[m.Label] = m.Expect
		}
	}
	var seen []string
	for i, m := range s.Race {
		got := results[i]
		seen = append(seen, m.Label+"="+got.got)
		if w, has := want[m.Label]; !has || got.got != w {
			reason := ""
			if got.res != nil {
				reason = got.res.Reason
			}
			fail("%s: got %s (%s), want %q in order %v", m.Label, got.got, reason, w, labels)
		}
		if got.res != nil && !got.res.Duplicate {
			r.logged[got.res.Index] = got.got
			r.checkEntry(where+" "+m.Label, m, bs[i], got, fail)
		}
		idx := uint64(0)
		if got.res != nil {
			idx = got.res.Index
		}
		r.sent[m.Label] = sent{wire: bs[i].wire, expect: got.got, index: idx}
	}
	r.t.Logf("%s: the ledger sequenced %v: %s", where, labels, strings.Join(seen, " "))
	return ok
}

// replay re-decides every leaf with a fresh engine: every decision must
// come out as it was logged, and the state must equal the stored state.
func (r *run) replay() {
	r.t.Helper()
	store := authority.MemStore{}
	e := authority.New(store)
	size := r.l.Head().Size
	for i := uint64(0); i < size; i++ {
		leaf, err := r.l.LeafBytes(i)
		if err != nil {
			r.t.Fatal(err)
		}
		d, err := e.Replay(i, leaf)
		if err != nil {
			r.t.Errorf("replay: %v", err)
			return
		}
		got := "accepted"
		if d.Verdict != authority.Accepted {
			got = d.Verdict.String() + "/" + string(d.Code)
		}
		want, ok := r.logged[i]
		switch {
		case !ok:
			r.t.Errorf("leaf %d (%s) was appended by no step", i, got)
		case got != want:
			r.t.Errorf("replay of leaf %d: %s, logged as %s", i, got, want)
		}
		e.Dirty(func(k string, v []byte) { store[k] = v })
		e.Committed()
	}
	if len(r.logged) != int(size) {
		r.t.Errorf("%d decisions were logged, the log holds %d leaves", len(r.logged), size)
	}
	stored, err := r.l.StateRecords()
	if err != nil {
		r.t.Fatal(err)
	}
	if len(stored) != len(store) {
		r.t.Errorf("stored state has %d records, replay %d", len(stored), len(store))
	}
	for k, v := range store {
		if !bytes.Equal(stored[k], v) {
			r.t.Errorf("state record %s: stored %s, replay %s", k, stored[k], v)
		}
	}
}

// --- building submissions ---

// grantInfo is an accepted CONFIRM or DELEGATE, read back from the log.
type grantInfo struct {
	grant    *statement.Grant
	parent   string
	desc     scope.Descriptor
	workflow string
}

func (r *run) grant(id string) *grantInfo {
	e, err := r.l.EntryByID(id)
	if err != nil {
		return nil
	}
	gi := &grantInfo{}
	var ts string
	switch s := e.Statement.(type) {
	case *statement.ConfirmDoc:
		gi.grant, ts = &s.Grant, s.Timestamp
	case *statement.DelegateDoc:
		gi.grant, ts, gi.parent = &s.Grant, s.Timestamp, s.ParentRef
	default:
		return nil
	}
	gi.workflow = gi.grant.Scope.WorkflowID
	d, err := gi.grant.Descriptor(ts)
	if err != nil {
		return nil
	}
	gi.desc = d
	return gi
}

// limitsInForce lists the limit keys on a grant's chain.
func (r *run) limitsInForce(id string) []string {
	keys := map[string]bool{}
	for i := 0; id != "" && i < 64; i++ {
		g := r.grant(id)
		if g == nil {
			break
		}
		for k := range g.grant.Limits {
			keys[k] = true
		}
		id = g.parent
	}
	return slices.Sorted(maps.Keys(keys))
}

func (r *run) boundName(k *symKey) string {
	if rec, err := r.l.KeyBinding(k.KID); err == nil && rec != nil {
		return rec.Name
	}
	return k.Handle
}

// vars are the values placeholders expand to.
type vars map[string]string

func (r *run) build(where string, s *step, n int) built {
	r.t.Helper()
	if s.By == "" || s.Kind == "" {
		r.t.Fatalf("%s: by and kind are required", where)
	}
	kind := statement.Kind(s.Kind)
	k := keyFor(s.By)
	v := vars{"n": strconv.Itoa(n)}
	o, _ := r.expandAny(where, deepCopy(s.Set), v, false).(obj)
	if o == nil {
		o = obj{}
	}
	ts := r.clock.Now().Add(time.Duration(s.TSOffset) * time.Second)
	seq, err := r.l.NextSeq(k.KID)
	if err != nil {
		r.t.Fatal(err)
	}
	setDefault(o, "type", string(kind))
	setDefault(o, "timestamp", statement.FormatTimestamp(ts))
	setDefault(o, "log", origin)
	setDefault(o, "actor", r.boundName(k))
	setDefault(o, "seq", int64(seq)+s.SeqDelta)
	r.resolve(kind, o)
	for _, f := range s.Drop {
		delete(o, f)
	}
	v["seq"] = fmt.Sprint(o["seq"])
	v["ts"] = fmt.Sprint(o["timestamp"])
	v["log"] = fmt.Sprint(o["log"])

	var payload []byte
	if s.RawPayload != nil {
		payload = []byte(r.expand(where, *s.RawPayload, v, true))
	} else {
		j, err := json.Marshal(o)
		if err != nil {
			r.t.Fatalf("%s: %v", where, err)
		}
		if payload, err = canon.Canonicalize(j); err != nil {
			r.t.Fatalf("%s: the statement is not canonical JSON (use payload_edit for byte-level faults): %v\n%s", where, err, j)
		}
	}
	payload = r.edit(where, payload, s.PayloadEdit, v)

	signKind := kind.Lower()
	if s.SignAs != "" {
		signKind = s.SignAs
	}
	env, err := sign.Sign(k.Priv, signKind, payload)
	if err != nil {
		r.t.Fatalf("%s: %v", where, err)
	}
	if s.PresentAs != "" {
		env.PayloadType = s.PresentAs
		if !strings.Contains(s.PresentAs, "/") {
			env.PayloadType = "application/vnd.custody." + s.PresentAs + ".v1+json"
		}
	}
	if s.KeyID != "" {
		env.Signatures[0].KeyID = r.keyID(where, s.KeyID)
	}
	env.Signatures[0].Sig = r.sigOp(where, s.SigOp, env.Signatures[0].Sig)
	wire, err := json.Marshal(env)
	if err != nil {
		r.t.Fatal(err)
	}
	if c, err := canon.Canonicalize(wire); err == nil {
		wire = c
	}
	v["payload"], v["sig"], v["keyid"], v["type"] = env.Payload, env.Signatures[0].Sig, env.Signatures[0].KeyID, env.PayloadType
	v["KEYID"] = strings.ToUpper(env.Signatures[0].KeyID)
	wire = r.edit(where, wire, s.EnvelopeEdit, v)
	return built{wire: wire, kid: env.Signatures[0].KeyID, kind: kind}
}

func (r *run) keyID(where, name string) string {
	if raw, ok := strings.CutPrefix(name, "raw:"); ok {
		pub, ok := specialKey(raw)
		if !ok {
			r.t.Fatalf("%s: no special key %q", where, raw)
		}
		return sign.KeyID(pub)
	}
	return keyFor(name).KID
}

// curveL is the order of the Ed25519 base point, 2^252 + 27742317777372353535851937790883648493.
var curveL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

func (r *run) sigOp(where, op, sig64 string) string {
	if op == "" {
		return sig64
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil || len(sig) != 64 {
		r.t.Fatalf("%s: bad signature to alter", where)
	}
	switch op {
	case "s_plus_l":
		// S' = S + L encodes the same scalar mod L: malleability that a
		// verifier must refuse (RFC 8032 §5.1.7 requires S < L).
		le := slices.Clone(sig[32:])
		slices.Reverse(le)
		s := new(big.Int).SetBytes(le)
		s.Add(s, curveL)
		out := s.FillBytes(make([]byte, 32))
		slices.Reverse(out)
		copy(sig[32:], out)
	case "flip_r":
		sig[0] ^= 1
	case "identity_zero":
		// R = the identity point, S = 0: valid for every message under the
		// identity key for a cofactorless verifier.
		clear(sig)
		sig[0] = 1
	case "truncate":
		return base64.StdEncoding.EncodeToString(sig[:63])
	case "stray_bits":
		// Set a padding bit in the last base64 digit: the same bytes under
		// lenient decoding, a different string.
		b := []byte(sig64)
		i := strings.IndexByte(sig64, '=') - 1
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		b[i] = alphabet[strings.IndexByte(alphabet, b[i])+1]
		return string(b)
	default:
		r.t.Fatalf("%s: unknown sig_op %q", where, op)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func (r *run) edit(where string, text []byte, edits []edit, v vars) []byte {
	for _, e := range edits {
		from, to := r.expand(where, e.From, v, true), r.expand(where, e.To, v, true)
		if !bytes.Contains(text, []byte(from)) {
			r.t.Fatalf("%s: edit: %q does not occur in\n%s", where, from, text)
		}
		n := 1
		if e.All {
			n = -1
		}
		text = bytes.Replace(text, []byte(from), []byte(to), n)
	}
	return text
}

// expand replaces the placeholders of the package comment in s.
func (r *run) expand(where, s string, v vars, raw bool) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			r.t.Fatalf("%s: unterminated placeholder in %q", where, s)
		}
		b.WriteString(s[:i])
		name, arg, _ := strings.Cut(s[i+2:i+j], ":")
		s = s[i+j+2:]
		if val, ok := v[name]; ok && arg == "" {
			b.WriteString(val)
			continue
		}
		switch name {
		case "key":
			b.WriteString(keyFor(arg).B64)
		case "keyid":
			b.WriteString(keyFor(arg).KID)
		case "rawkey":
			if _, ok := specialKey(arg); !ok {
				r.t.Fatalf("%s: no special key %q", where, arg)
			}
			b.WriteString(specialKeys[arg])
		case "rawkeyid":
			b.WriteString(r.keyID(where, "raw:"+arg))
		case "hash":
			if g := r.grant(arg); g != nil {
				b.WriteString(g.grant.ScopeHash)
			} else {
				b.WriteString(zeroHash)
			}
		case "rep":
			ns, str, _ := strings.Cut(arg, ":")
			cnt, err := strconv.Atoi(ns)
			if err != nil {
				r.t.Fatalf("%s: bad rep %q", where, arg)
			}
			b.WriteString(strings.Repeat(str, cnt))
		case "byte":
			if !raw {
				r.t.Fatalf("%s: {{byte}} only in edits and raw text", where)
			}
			x, err := strconv.ParseUint(arg, 16, 8)
			if err != nil {
				r.t.Fatalf("%s: bad byte %q", where, arg)
			}
			b.WriteByte(byte(x))
		default:
			val, ok := v[name]
			if !ok {
				r.t.Fatalf("%s: unknown placeholder {{%s}}", where, name)
			}
			b.WriteString(val)
		}
	}
}

func (r *run) expandAny(where string, x any, v vars, raw bool) any {
	switch t := x.(type) {
	case string:
		return r.expand(where, t, v, raw)
	case map[string]any:
		out := obj{}
		for k, val := range t {
			out[r.expand(where, k, v, raw)] = r.expandAny(where, val, v, raw)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = r.expandAny(where, val, v, raw)
		}
		return out
	}
	return x
}

// resolve fills what an honest client would: keys from handles, hashes and
// workflow ids from the statements referenced.
func (r *run) resolve(kind statement.Kind, o obj) {
	switch kind {
	case statement.Genesis:
		setDefault(o, "genesis_id", "genesis")
		setDefault(o, "admin_key", keyFor("admin").B64)
		vk, err := merkle.VerifierKey(origin, keyFor("log").Pub)
		if err != nil {
			r.t.Fatal(err)
		}
		setDefault(o, "log_key", vk)
	case statement.Principal:
		if k, ok := o["key"].(string); ok {
			delete(o, "key")
			setDefault(o, "public_key", keyFor(k).B64)
			setDefault(o, "name", k)
		}
		setDefault(o, "op", statement.OpEnroll)
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
		if kind == statement.Confirm {
			setDefault(o, "ttl_seconds", int64(3600))
		} else {
			setDefault(o, "ttl_seconds", int64(600))
		}
		setDefault(o, "revocable", true)
		if kind == statement.Delegate {
			parent := r.grant(str(o["parent_ref"]))
			if sc, ok := o["scope"].(map[string]any); ok && parent != nil {
				setDefault(sc, "workflow_id", parent.workflow)
			}
			if parent != nil {
				setDefault(o, "parent_scope_hash", parent.grant.ScopeHash)
			} else {
				setDefault(o, "parent_scope_hash", zeroHash)
			}
		}
		if _, ok := o["scope_hash"]; !ok {
			o["scope_hash"] = grantHash(o)
		}
	case statement.Revoke:
		if g := r.grant(str(o["target_ref"])); g != nil {
			setDefault(o, "workflow_id", g.workflow)
		}
		setDefault(o, "reason", "adversarial test")
	case statement.Receipt:
		setDefault(o, "result", statement.ResultPending)
		if o["result"] != statement.ResultPending {
			if e, err := r.l.EntryByID(str(o["pending_ref"])); err == nil {
				if p, ok := e.Statement.(*statement.ReceiptDoc); ok {
					setDefault(o, "workflow_id", p.Workflow)
					setDefault(o, "step_id", p.StepID)
					setDefault(o, "action", p.Action)
					setDefault(o, "target", p.Target)
					setDefault(o, "authorization_ref", p.AuthorizationRef)
				}
			}
		}
		setDefault(o, "step_id", "step_1")
		setDefault(o, "action", "write")
		setDefault(o, "target", "db/orders/1")
		if g := r.grant(str(o["authorization_ref"])); g != nil {
			setDefault(o, "workflow_id", g.workflow)
			setDefault(o, "scope_hash", g.grant.ScopeHash)
			if o["result"] == statement.ResultPending {
				if keys := r.limitsInForce(str(o["authorization_ref"])); len(keys) > 0 {
					res := obj{}
					for _, k := range keys {
						res[k] = int64(0)
					}
					setDefault(o, "reserve", res)
				}
			}
		}
		setDefault(o, "scope_hash", zeroHash)
	case statement.Stop:
		if _, ok := o["step_id"]; ok {
			setDefault(o, "stop_scope", statement.StopStep)
		}
		setDefault(o, "stop_scope", statement.StopChain)
		setDefault(o, "takeover_mode", statement.TakeoverHuman)
		setDefault(o, "reason", "adversarial test")
	case statement.Resume:
		if e, err := r.l.EntryByID(str(o["stop_ref"])); err == nil {
			if s, ok := e.Statement.(*statement.StopDoc); ok {
				setDefault(o, "workflow_id", s.Workflow)
			}
		}
	case statement.Denial:
		setDefault(o, "reason", "adversarial test")
	}
}

var (
	grantHash  = testlog.GrantHash
	setDefault = testlog.SetDefault
	str        = testlog.Str
	deepCopy   = testlog.DeepCopy
)
