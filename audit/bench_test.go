package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// generator writes a custody log straight into an export folder, deciding
// every submission with the ledger's decision function (authority.Engine
// Decide, Denial, Link) exactly as the ledger's sequencer does, without
// Badger: a big log for measuring the audit, built in a fraction of the
// time real appends take.
type generator struct {
	tb      testing.TB
	dir     string
	origin  string
	logKey  *testlog.Actor
	e       *authority.Engine
	store   authority.MemStore
	b       *merkle.Builder
	now     time.Time
	size    uint64
	pending [][]byte
	last    map[uint64]merkle.Tile
}

func newGenerator(tb testing.TB, dir string) *generator {
	b, _ := merkle.NewBuilder(merkle.NewEdge(), merkle.TileReaderFunc(func(uint64, uint64) ([]byte, error) { return nil, os.ErrNotExist }))
	g := &generator{tb: tb, dir: dir, origin: testlog.Origin, logKey: testlog.NewActor(testlog.Origin), store: authority.MemStore{},
		b: b, now: testlog.T0, last: map[uint64]merkle.Tile{}}
	g.e = authority.New(g.store)
	return g
}

func (g *generator) vkey() string { return g.logKey.VerifierKey(g.origin) }

// submit decides st, signed by a, as the next leaf; a denial becomes a
// DENIAL signed by the log key.
func (g *generator) submit(a *testlog.Actor, st statement.Statement) authority.Verdict {
	g.tb.Helper()
	g.now = g.now.Add(time.Millisecond)
	h := st.Head()
	h.Timestamp, h.Log, h.Actor, h.Seq = statement.FormatTimestamp(g.now), g.origin, a.Name, g.e.NextSeq(a.KeyID())
	if err := statement.Seal(st); err != nil {
		g.tb.Fatal(err)
	}
	env, _, err := statement.Sign(a.Priv, st)
	if err != nil {
		g.tb.Fatal(err)
	}
	raw, _ := env.Canonical()
	p, err := sign.ParseEnvelope(raw)
	if err != nil {
		g.tb.Fatal(err)
	}
	d := g.e.Decide(authority.Submission{Env: p, Verified: true}, g.size, g.now)
	switch d.Verdict {
	case authority.Refused:
		g.tb.Fatalf("%s %s refused: %s", h.Type, st.ID(), d.Reason)
	case authority.Denied:
		doc := g.e.Denial(&d, p, g.size, g.now, true)
		payload, err := statement.Marshal(doc)
		if err != nil {
			g.tb.Fatal(err)
		}
		denv, err := sign.Sign(g.logKey.Priv, statement.Denial.Lower(), payload)
		if err != nil {
			g.tb.Fatal(err)
		}
		raw, _ = denv.Canonical()
		g.e.AcceptDenial(doc, g.size)
		st = doc
	default:
		st = d.Statement
	}
	l := g.e.Link(g.size, g.now, st)
	leaf, err := statement.MarshalLeaf(&statement.Leaf{Envelope: raw, LoggedAt: statement.FormatLoggedAt(g.now),
		PrevInWorkflow: l.PrevInWorkflow, TrustHead: l.TrustHead})
	if err != nil {
		g.tb.Fatal(err)
	}
	g.append(leaf)
	return d.Verdict
}

func (g *generator) append(leaf []byte) {
	if err := g.b.Append(merkle.LeafHash(leaf)); err != nil {
		g.tb.Fatal(err)
	}
	g.pending = append(g.pending, leaf)
	g.size++
	if len(g.pending) == merkle.TileWidth {
		g.writeBundle()
		g.e.Dirty(func(k string, v []byte) { g.store[k] = v })
		g.e.Committed()
	}
}

func (g *generator) writeBundle() {
	if len(g.pending) == 0 {
		return
	}
	data, err := merkle.EncodeEntryBundle(g.pending)
	if err != nil {
		g.tb.Fatal(err)
	}
	g.write(merkle.EntriesPath((g.size-1)/merkle.TileWidth, len(g.pending)), data)
	if len(g.pending) == merkle.TileWidth {
		g.pending = g.pending[:0]
	}
	for _, t := range g.b.Flush() {
		if t.Width() == merkle.TileWidth {
			g.write(merkle.TilePath(t.Level, t.Index, merkle.TileWidth), t.Data)
			delete(g.last, t.Level)
		} else {
			g.last[t.Level] = t // the rightmost partial tile of its level
		}
	}
}

func (g *generator) write(path string, data []byte) {
	p := filepath.Join(g.dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		g.tb.Fatal(err)
	}
}

// finish writes the partial tiles and the checkpoint.
func (g *generator) finish() {
	g.writeBundle()
	for _, t := range g.b.Flush() {
		g.last[t.Level] = t
	}
	for _, t := range g.last {
		g.write(merkle.TilePath(t.Level, t.Index, t.Width()), t.Data)
	}
	for _, ref := range merkle.NewTiles(0, g.size) {
		p := filepath.Join(g.dir, filepath.FromSlash(ref.Path()))
		if _, err := os.Stat(p); err != nil {
			g.tb.Fatalf("tile %s was not written", ref.Path())
		}
	}
	cp, err := merkle.SignCheckpoint(g.origin, g.size, g.b.Root(), g.logKey.NoteSigner(g.origin))
	if err != nil {
		g.tb.Fatal(err)
	}
	g.write("checkpoint", cp)
}

// generate writes a log of about n entries: one principal; workflows of a
// CONFIRM to one of 64 agents, ten pending receipts each with its outcome,
// and one pending receipt over budget, denied.
func generate(tb testing.TB, dir string, n uint64) *generator {
	g := newGenerator(tb, dir)
	admin := testlog.NewActor("admin")
	gd := &statement.GenesisDoc{Header: statement.Header{Type: statement.Genesis}, GenesisID: "genesis",
		AdminKey: admin.PublicKey(), LogKey: g.vkey(), MaxDepth: 3, ClockSkewSeconds: 300, MaxTTLSeconds: 2592000}
	g.submit(admin, gd)
	alice := testlog.NewActor("user:alice")
	g.submit(admin, &statement.PrincipalDoc{Header: statement.Header{Type: statement.Principal}, PrincipalID: "p_alice",
		Op: statement.OpEnroll, Name: alice.Name, PublicKey: alice.PublicKey()})
	agents := make([]*testlog.Actor, 64)
	for i := range agents {
		agents[i] = testlog.NewActor(fmt.Sprintf("agent:a%02d", i))
	}
	for w := 0; g.size < n; w++ {
		a := agents[w%len(agents)]
		wf := "wf_" + strconv.Itoa(w)
		c := &statement.ConfirmDoc{Header: statement.Header{Type: statement.Confirm}, ConfirmID: "c_" + strconv.Itoa(w),
			Grant: statement.Grant{Grantee: a.Grantee(), Scope: scope.Scope{WorkflowID: wf, Targets: []string{"shop/*"}, Capabilities: []string{"buy"}},
				Limits: map[string]int64{"usd": 1000}, TTLSeconds: 86400, Revocable: true}}
		if g.submit(alice, c) != authority.Accepted {
			tb.Fatalf("CONFIRM %s denied", c.ConfirmID)
		}
		for r := 0; r < 10 && g.size < n; r++ {
			id := fmt.Sprintf("r_%d_%d", w, r)
			receipt := func(result, pendingRef string, reserve, consumed map[string]int64) *statement.ReceiptDoc {
				return &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt}, ReceiptID: id, Workflow: wf, StepID: "s",
					Action: "buy", Target: "shop/item", AuthorizationRef: c.ConfirmID, Result: result, ScopeHash: c.ScopeHash,
					Reserve: reserve, Consumed: consumed, PendingRef: pendingRef}
			}
			g.submit(a, receipt(statement.ResultPending, "", map[string]int64{"usd": 50}, nil))
			pid := id
			id += "_out"
			g.submit(a, receipt(statement.ResultSuccess, pid, nil, map[string]int64{"usd": 40}))
		}
		id := fmt.Sprintf("r_%d_over", w)
		over := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt}, ReceiptID: id, Workflow: wf, StepID: "s",
			Action: "buy", Target: "shop/item", AuthorizationRef: c.ConfirmID, Result: statement.ResultPending, ScopeHash: c.ScopeHash,
			Reserve: map[string]int64{"usd": 900}}
		if g.size < n && g.submit(a, over) != authority.Denied {
			tb.Fatalf("%s was not denied", id)
		}
	}
	g.finish()
	return g
}

func auditRate(tb testing.TB, dir, vkey string) *audit.Report {
	rep, err := audit.Run(context.Background(), audit.Dir(dir), audit.Options{VerifierKey: vkey})
	if err != nil {
		tb.Fatal(err)
	}
	if !rep.Clean() {
		tb.Fatalf("findings on a generated log: %v", rep.Findings[0])
	}
	return rep
}

func TestGeneratedLogAudits(t *testing.T) {
	dir := t.TempDir()
	g := generate(t, dir, 1500)
	rep := auditRate(t, dir, g.vkey())
	if rep.Replayed < 1500 || rep.Denials == 0 {
		t.Fatalf("%+v", rep)
	}
}

// BenchmarkAudit audits a generated log of 20,000 entries; entries/s is
// reported.
func BenchmarkAudit(b *testing.B) {
	dir := b.TempDir()
	g := generate(b, dir, 20_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		auditRate(b, dir, g.vkey())
	}
	b.ReportMetric(float64(20_000*b.N)/b.Elapsed().Seconds(), "entries/s")
}

// TestAuditScale generates and audits a big log when
// CUSTODY_AUDIT_ENTRIES is set (docs/BENCHMARKS.md: 1000000).
// CUSTODY_AUDIT_DIR keeps the generated log for another run.
func TestAuditScale(t *testing.T) {
	n, _ := strconv.ParseUint(os.Getenv("CUSTODY_AUDIT_ENTRIES"), 10, 64)
	if n == 0 {
		t.Skip("set CUSTODY_AUDIT_ENTRIES=1000000 to measure the audit of a big log")
	}
	dir := os.Getenv("CUSTODY_AUDIT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	vkey := testlog.NewActor(testlog.Origin).VerifierKey(testlog.Origin)
	if _, err := os.Stat(filepath.Join(dir, "checkpoint")); err != nil {
		start := time.Now()
		generate(t, dir, n)
		t.Logf("generated %d entries in %s", n, time.Since(start).Round(time.Second))
	}
	var ms runtime.MemStats
	rep := auditRate(t, dir, vkey)
	runtime.ReadMemStats(&ms)
	t.Logf("audited %d entries (%d DENIALs, %d tiles) in %.1fs: %.0f entries/s on %d cores; %d MiB heap in use after",
		rep.Entries, rep.Denials, rep.TilesChecked, rep.Seconds, rep.Rate, runtime.GOMAXPROCS(0), ms.HeapInuse>>20)
}
