package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/storage/storagetest"
)

// TestStorePhases runs the authorised, HTTP and log-only phases on
// PostgreSQL (CUSTODY_TEST_PG) at a tiny size, and checks that each figure
// and the server's counters around it were taken, never how fast.
func TestStorePhases(t *testing.T) {
	pg := storagetest.PostgresServer(t)
	var progress bytes.Buffer
	r, err := Run(context.Background(), Config{Dir: t.TempDir(), Phases: []string{PhaseAuth, PhaseHTTP, PhaseLogOnly},
		AuthN: 300, AuthWindow: 8, HTTPN: 200, HTTPClients: 4, LogOnlyN: 300, Inflight: 16, ReadFor: 100 * time.Millisecond,
		Store: pg, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Postgres
	if p == nil || len(p.Errors) > 0 || len(r.Errors) > 0 {
		t.Fatalf("errors: %v %+v\n%s", r.Errors, p, progress.String())
	}
	if p.Auth == nil || p.HTTP == nil || p.LogOnly == nil || p.LogOnly.Accepted != 300 || p.ProofsPerSec <= 0 {
		t.Fatalf("PostgreSQL figures: %+v", p)
	}
	for _, ph := range []string{PhaseAuth, PhaseHTTP, PhaseLogOnly} {
		s := p.Server[ph]
		// Every batch is a committed, WAL-flushed transaction.
		if s == nil || s.Ops == 0 || s.Commits <= 0 || s.WALBytes <= 0 || s.WALSyncs <= 0 {
			t.Errorf("server counters during %s: %+v", ph, s)
			continue
		}
		// The test server runs on this machine, so /proc shows its CPU.
		if s.CPUUs <= 0 {
			t.Errorf("server CPU during %s: %+v", ph, s)
		}
	}
	// A phase left out of Phases is not run on PostgreSQL either.
	r, err = Run(context.Background(), Config{Dir: t.TempDir(), Phases: []string{PhaseLogOnly}, LogOnlyN: 50, Inflight: 4, Store: pg})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Postgres; p == nil || p.Auth != nil || p.HTTP != nil || p.LogOnly == nil || len(p.Server) != 1 {
		t.Fatalf("logonly alone: %+v", p)
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	if !strings.Contains(table.String(), "server during logonly, per append") {
		t.Errorf("the table lacks the server's counters:\n%s", table.String())
	}
}

// TestStoreBigGrowth runs the big phase on PostgreSQL at two tiny sizes and
// checks that both logs were measured and compared.
func TestStoreBigGrowth(t *testing.T) {
	pg := storagetest.PostgresServer(t)
	r, err := Run(context.Background(), Config{Dir: t.TempDir(), Phases: []string{PhaseBig}, Size: 1500, GrowthFrom: 600,
		GrowthRounds: 2, ReadFor: 50 * time.Millisecond, Store: pg})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Postgres
	if p == nil || len(p.Errors) > 0 || len(r.Errors) > 0 {
		t.Fatalf("errors: %v %+v", r.Errors, p)
	}
	if p.Big == nil || p.Big.Size != 1500 || p.Big.ProofsPerSec <= 0 || p.Big.BundlesPerSec <= 0 ||
		p.GrowthBase == nil || p.GrowthBase.Size != 600 || p.Growth == nil || p.Growth.ProofsRatio <= 0 {
		t.Fatalf("PostgreSQL big figures: %+v", p)
	}
	if g := p.Growth; g.Paired == nil || g.Paired[0].Size != 600 || g.Paired[1].Size != 1500 || g.Paired[0].ProofOwnCPUUs <= 0 {
		t.Fatalf("PostgreSQL growth not from the paired measurement: %+v", g)
	}
	if len(p.GrowthAgain) != 1 || p.GrowthAgain[0].Paired == nil || p.GrowthAgain[0].ProofCPURatio <= 0 {
		t.Fatalf("PostgreSQL, GrowthRounds 2: %+v", p.GrowthAgain)
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	if !strings.Contains(table.String(), "growth from 600 to 1,500 entries") {
		t.Errorf("the table lacks PostgreSQL's growth:\n%s", table.String())
	}
}
