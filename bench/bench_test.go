package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/verify"
)

// TestSuiteTiny runs every in-process phase at a tiny size, so the suite
// keeps working. It checks that each figure was taken, never how fast.
func TestSuiteTiny(t *testing.T) {
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Dir: t.TempDir(), Ceiling: 100 * time.Millisecond,
		AuthN: 400, AuthWindow: 8, HTTPN: 400, HTTPClients: 4, LogOnlyN: 300, Inflight: 32, Size: 3000, ReadFor: 100 * time.Millisecond,
		Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("errors: %v\n%s", r.Errors, progress.String())
	}
	if r.VerifyCeiling <= 0 || r.AuthRatio <= 0 {
		t.Errorf("verify ceiling %v, ratio %v", r.VerifyCeiling, r.AuthRatio)
	}
	if a := r.Auth; a == nil || a.Denied == 0 || a.Accepted+a.Denied != a.Submissions || a.Submissions < 380 {
		t.Errorf("authorised appends: %+v", a)
	}
	if a := r.Auth; a != nil && (a.MeanBatch < 1 || a.CommitMs <= 0) {
		t.Errorf("authorised appends: batching figures %+v", a)
	}
	if a, h := r.Auth, r.HTTP; a != nil && h != nil && (a.Allocs <= 0 || h.Allocs <= 0) {
		t.Errorf("allocations per append: %v in process, %v over HTTP", a.Allocs, h.Allocs)
	}
	if h := r.HTTP; h == nil || h.Denied == 0 || h.Accepted+h.Denied != h.Submissions || h.MeanBatch < 1 {
		t.Errorf("HTTP appends: %+v", h)
	}
	if l := r.LogOnly; l == nil || l.Accepted != 300 || l.PerSec <= 0 {
		t.Errorf("log-only: %+v", l)
	}
	b := r.Big
	if b == nil || b.Size != 3000 || b.ProofsPerSec <= 0 || b.BundlesPerSec <= 0 || b.VerifiesPerSec <= 0 ||
		len(b.OpenMs) != OpenRounds || b.DiskBytesPerLeaf <= 0 {
		t.Fatalf("big log: %+v", b)
	}
	// GENESIS, PRINCIPAL, CONFIRM, 2 DELEGATEs, a receipt pair, the tail's
	// receipts up to the subject.
	if b.BundleEntries < 8 {
		t.Errorf("the bundle has %d entries", b.BundleEntries)
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	for _, want := range []string{"verify ceiling", "authorised ÷ verify ceiling", "over HTTP", "log-only appends",
		"inclusion proofs at 3,000", "disk per entry"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Error(err)
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0.0", 7.25: "7.2", 999: "999", 1000: "1,000", 1234567.8: "1,234,568"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

// BenchmarkVerifyCeiling is one Ed25519 verify of a pending receipt (what
// a pipeline worker does), b.N of them on all cores: the ceiling of
// authorised appends. ns/op is wall time per verify with every core busy;
// verifies/s is its inverse.
func BenchmarkVerifyCeiling(b *testing.B) {
	env, pub, err := SampleReceipt()
	if err != nil {
		b.Fatal(err)
	}
	p, err := sign.ParseEnvelope(env)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Verify(pub); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Verify(pub); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "verifies/s")
}

// BenchmarkAuthorizedAppends is the suite's authorised-append figure; ns/op
// is per submission (see ledger.BenchmarkAuthorizedAppends for the same
// over the ledger's test harness).
func BenchmarkAuthorizedAppends(b *testing.B) {
	res, ceiling, err := AuthorizedAppends(context.Background(), b.TempDir(), max(b.N, 64), 256, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.PerSec, "appends/s")
	b.ReportMetric(res.PerSec/ceiling.PerSec, "ratio")
	b.ReportMetric(res.P99Ms, "p99-ms")
}

// proveBench builds a 100,000-entry log once per process for the bundle
// benchmarks.
var proveBench struct {
	once sync.Once
	dir  string
	meta bigMeta
	err  error
}

func bigLog(b *testing.B) (string, bigMeta) {
	proveBench.once.Do(func() {
		proveBench.dir, proveBench.err = os.MkdirTemp("", "custody-bench-")
		if proveBench.err == nil {
			_, proveBench.err = BuildBigLog(context.Background(), proveBench.dir+"/log", 100_000, nil)
		}
		if proveBench.err == nil {
			proveBench.meta, proveBench.err = readBigMeta(proveBench.dir + "/log")
		}
	})
	if proveBench.err != nil {
		b.Fatal(proveBench.err)
	}
	return proveBench.dir + "/log", proveBench.meta
}

// TestMain removes the benchmarks' shared log.
func TestMain(m *testing.M) {
	code := m.Run()
	if proveBench.dir != "" {
		os.RemoveAll(proveBench.dir)
	}
	os.Exit(code)
}

// BenchmarkProve builds the bundle of a receipt under a depth-3 chain in a
// 100,000-entry log (ledger.Prove), on one goroutine. cpu-us/op is the
// process's CPU time per bundle, steadier than ns/op on a loaded machine.
func BenchmarkProve(b *testing.B) {
	dir, meta := bigLog(b)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := l.Prove(meta.Subject, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(cpuPerOp(cpu0, b.N), "cpu-us/op")
}

// BenchmarkVerifyBundle verifies, offline, the bundle of a receipt under a
// depth-3 chain in a 100,000-entry log, on one goroutine.
func BenchmarkVerifyBundle(b *testing.B) {
	dir, meta := bigLog(b)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	bundle, err := l.Prove(meta.Subject, false)
	vkey := l.VerifierKey()
	l.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		v, err := verify.VerifyBundle(bundle, vkey)
		if err != nil || !v.Valid {
			b.Fatal(err, v.Failure())
		}
	}
	b.ReportMetric(cpuPerOp(cpu0, b.N), "cpu-us/op")
}

// TestGrowthTiny: the big phase with GrowthFrom measures both sizes in one
// run and prints their ratios; with BigDir both logs are kept and a second
// run reuses them, but not a log built before summary tiles.
func TestGrowthTiny(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "log")
	cfg := Config{Dir: t.TempDir(), Phases: []string{PhaseBig}, Size: 2000, GrowthFrom: 700, BigDir: keep, ReadFor: 50 * time.Millisecond}
	r, err := Run(context.Background(), cfg)
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("%v %v", err, r.Errors)
	}
	g := r.Growth
	if g == nil || g.From != 700 || g.To != 2000 || g.ProofsRatio <= 0 || g.ProofCPURatio <= 0 || g.BundlesRatio <= 0 || g.BundleCPURatio <= 0 ||
		g.ProofHashesFrom != 10 || g.ProofHashesTo != 11 {
		t.Fatalf("growth: %+v", g)
	}
	// The ratios are of the two logs measured in turn.
	if g.Paired == nil || g.Paired[0].Size != 700 || g.Paired[1].Size != 2000 || g.Paired[0].ProofOwnCPUUs <= 0 || g.Paired[1].BundleOwnCPUUs <= 0 ||
		g.ProofCPURatio != g.Paired[1].ProofOwnCPUUs/g.Paired[0].ProofOwnCPUUs {
		t.Fatalf("growth not from the paired measurement: %+v", g)
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	if !strings.Contains(table.String(), "growth from 700 to 2,000 entries") {
		t.Errorf("the table lacks the growth rows:\n%s", table.String())
	}
	if len(r.GrowthAgain) != 0 {
		t.Errorf("one round asked for, %d more measured", len(r.GrowthAgain))
	}
	cfg.GrowthRounds = 3
	r2, err := Run(context.Background(), cfg)
	if err != nil || len(r2.Errors) > 0 || r2.Build == nil || r2.Build.Seconds != 0 || r2.GrowthBuild == nil || r2.GrowthBuild.Seconds != 0 {
		t.Fatalf("second run did not reuse both logs: %v %v %+v %+v", err, r2.Errors, r2.Build, r2.GrowthBuild)
	}
	// Three rounds on the same logs: the first in Growth, two more after.
	if len(r2.GrowthAgain) != 2 || r2.GrowthAgain[1].Paired == nil || r2.GrowthAgain[1].ProofCPURatio <= 0 {
		t.Fatalf("GrowthRounds 3: %+v", r2.GrowthAgain)
	}
	table.Reset()
	r2.WriteTable(&table)
	if !strings.Contains(table.String(), "measured again, round 3") {
		t.Errorf("the table lacks the third round:\n%s", table.String())
	}
	// A log whose meta file does not say it stores summaries is rebuilt.
	meta, err := readBigMeta(keep)
	if err != nil {
		t.Fatal(err)
	}
	meta.Summaries = false
	raw, _ := json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(keep, metaFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// Without BigDir the smaller log is kept until both are measured in turn.
	r4, err := Run(context.Background(), Config{Dir: t.TempDir(), Phases: []string{PhaseBig}, Size: 1200, GrowthFrom: 500, ReadFor: 50 * time.Millisecond})
	if err != nil || len(r4.Errors) > 0 || r4.Growth == nil || r4.Growth.Paired == nil {
		t.Fatalf("growth of fresh logs: %v %v %+v", err, r4.Errors, r4.Growth)
	}
	cfg.GrowthFrom = -1
	r3, err := Run(context.Background(), cfg)
	if err != nil || len(r3.Errors) > 0 || r3.Build == nil || r3.Build.Seconds == 0 || r3.Growth != nil {
		t.Fatalf("a log built before summaries was reused: %v %v %+v", err, r3.Errors, r3.Build)
	}
}
