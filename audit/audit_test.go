package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/audit"
	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/merkle"
)

// export writes a Rogue's log as custody export would: every tile and
// entry bundle of its current size, then the checkpoint.
func export(t testing.TB, r *testlog.Rogue, dir string) {
	t.Helper()
	size := r.Size()
	tiles := r.TileReader()
	for _, ref := range merkle.NewTiles(0, size) {
		data, err := tiles.ReadTile(ref.Level, ref.Index)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, ref.Path()), data[:ref.Width*merkle.HashSize])
	}
	for _, ref := range merkle.NewEntryBundles(0, size) {
		var leaves [][]byte
		for i := 0; i < ref.Width; i++ {
			leaves = append(leaves, r.Leaf(ref.Index*merkle.TileWidth+uint64(i)))
		}
		data, err := merkle.EncodeEntryBundle(leaves)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, ref.Path()), data)
	}
	write(t, filepath.Join(dir, "checkpoint"), r.Checkpoint())
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, dir, vkey string) *audit.Report {
	t.Helper()
	rep, err := audit.Run(context.Background(), audit.Dir(dir), audit.Options{VerifierKey: vkey})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// standard is a Rogue log holding the standard scenario (every decision
// right), with more entries so that it spans a full tile and a partial one.
func standard(t *testing.T) (*testlog.Rogue, *testlog.Scenario) {
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	s := testlog.Standard(r)
	return r, s
}

// fill appends outcome-free pending receipts under a fresh grant until the
// log has n entries.
func fill(t *testing.T, r *testlog.Rogue, n uint64) {
	au := r.Statements()
	p := testlog.NewActor("user:filler")
	agent := testlog.NewActor("agent:filler")
	r.Accept(r.Admin, au.Enroll(r.Admin, p, "p_filler"))
	r.Accept(p, au.Confirm(p, "c_fill", testlog.NewGrant(agent, "wf_fill", []string{"t/*"}, []string{"act"}, nil,
		map[string]int64{"n": 1 << 40}, 86400)))
	for i := 0; r.Size() < n; i++ {
		au.Clock.Add(time.Millisecond)
		r.Accept(agent, au.Pending(agent, fmt.Sprintf("fill_%d", i), "c_fill", "s", "act", "t/x", map[string]int64{"n": 1}))
	}
}

func hasFinding(rep *audit.Report, check string, index uint64, path string) bool {
	for _, f := range rep.Findings {
		if f.Check == check && f.Index != nil && *f.Index == index && (path == "" || f.Path == path) {
			return true
		}
	}
	return false
}

func dump(rep *audit.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

func TestAuditClean(t *testing.T) {
	r, _ := standard(t)
	fill(t, r, 300)
	dir := t.TempDir()
	export(t, r, dir)
	rep := run(t, dir, r.VerifierKey())
	if !rep.Clean() {
		t.Fatalf("findings on a clean log:\n%s", dump(rep))
	}
	if rep.Replayed != 300 || rep.Entries != 300 || !rep.RootChecked || !rep.CheckpointVerified || rep.Denials != 1 {
		t.Errorf("report %+v", rep)
	}
	// 300 leaves: tile 0/000 full, 0/001.p/44 and 1/000.p/1.
	if rep.TilesChecked != 3 {
		t.Errorf("%d tiles checked, want 3", rep.TilesChecked)
	}
	// The filler pendings have no outcome: flagged, not findings.
	if rep.OpenPendings != 300-12 || len(rep.Flags) != 100 {
		t.Errorf("%d open pendings, %d flags listed", rep.OpenPendings, len(rep.Flags))
	}
}

// TestAuditCorruptLeaf flips one byte of one stored leaf: its tile hash,
// the tiles above and the root no longer match, and the replay names the
// entry.
func TestAuditCorruptLeaf(t *testing.T) {
	r, s := standard(t)
	dir := t.TempDir()
	export(t, r, dir)
	path := filepath.Join(dir, merkle.EntriesPath(0, int(r.Size())))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := merkle.DecodeEntryBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	// One byte of the leaf's own field name: the leaf no longer parses.
	leaf := string(leaves[s.Outcome])
	bad := strings.Replace(leaf, "logged_at", "logged_au", 1)
	leaves[s.Outcome] = []byte(bad)
	data, _ = merkle.EncodeEntryBundle(leaves)
	write(t, path, data)

	rep := run(t, dir, r.VerifierKey())
	tile := merkle.TilePath(0, 0, int(r.Size()))
	if !hasFinding(rep, audit.CheckTile, s.Outcome, tile) {
		t.Errorf("no tile finding at entry %d in %s:\n%s", s.Outcome, tile, dump(rep))
	}
	if !hasFinding(rep, "leaf", s.Outcome, "") {
		t.Errorf("no replay finding at entry %d:\n%s", s.Outcome, dump(rep))
	}
	if rep.ReplayStopped == nil || *rep.ReplayStopped != s.Outcome || rep.EnvelopesOnly != r.Size()-s.Outcome {
		t.Errorf("replay stopped at %v, %d envelopes after", rep.ReplayStopped, rep.EnvelopesOnly)
	}
	var root bool
	for _, f := range rep.Findings {
		root = root || f.Check == audit.CheckRoot
	}
	if !root {
		t.Errorf("no root finding:\n%s", dump(rep))
	}
}

// TestAuditCorruptTile flips one byte of one stored hash: the tile is
// named, and nothing else is wrong.
func TestAuditCorruptTile(t *testing.T) {
	r, _ := standard(t)
	fill(t, r, 600)
	dir := t.TempDir()
	export(t, r, dir)
	// Tile 0/001 holds the hashes of leaves 256..511: hash 7 is leaf 263.
	path := filepath.Join(dir, merkle.TilePath(0, 1, merkle.TileWidth))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[7*merkle.HashSize+5] ^= 0x40
	write(t, path, data)
	rep := run(t, dir, r.VerifierKey())
	if len(rep.Findings) != 1 || !hasFinding(rep, audit.CheckTile, 263, "tile/0/001") {
		t.Fatalf("want one tile finding at entry 263:\n%s", dump(rep))
	}
	if rep.Replayed != 600 {
		t.Errorf("replayed %d", rep.Replayed)
	}
}

// TestAuditAdmittedWhatShouldBeDenied: a rogue log accepts a pending
// receipt over its grant's budget, and later a DENIAL the rules do not
// justify. The first is named; the replay stops there (its state is then
// unspecified) but tiles and envelopes are still checked to the end.
func TestAuditAdmittedWhatShouldBeDenied(t *testing.T) {
	r, s := standard(t)
	au := r.Statements()
	// The booker's grant d3 has budget_usd 300, 250 already charged.
	over := r.Accept(s.Booker, au.Pending(s.Booker, "r_over", "d3", "step_2", "purchase", testlog.StdTarget,
		map[string]int64{"budget_usd": 400, "max_side_effects": 0}))
	fill(t, r, 40)
	dir := t.TempDir()
	export(t, r, dir)
	rep := run(t, dir, r.VerifierKey())
	if !hasFinding(rep, "decision", over, "") {
		t.Fatalf("no decision finding at entry %d:\n%s", over, dump(rep))
	}
	if rep.ReplayStopped == nil || *rep.ReplayStopped != over || !rep.RootChecked || rep.EnvelopesOnly != 40-over {
		t.Errorf("stopped %v, root checked %v, %d envelopes after", rep.ReplayStopped, rep.RootChecked, rep.EnvelopesOnly)
	}
	for _, f := range rep.Findings {
		if f.Check == audit.CheckEnvelope || f.Check == audit.CheckTile || f.Check == audit.CheckRoot {
			t.Errorf("unexpected finding %s", f)
		}
	}
}

func TestAuditUnjustifiedDenial(t *testing.T) {
	r := testlog.NewRogue(t, testlog.RogueOptions{})
	au := r.Statements()
	alice, planner := testlog.NewActor("user:alice"), testlog.NewActor("agent:planner")
	r.Accept(r.Admin, au.Enroll(r.Admin, alice, "p_alice"))
	// A CONFIRM within every rule, denied as a widening.
	d := r.Deny(alice, au.Confirm(alice, "c1", testlog.NewGrant(planner, "wf_1", []string{"t"}, []string{"act"}, nil, nil, 600)), authority.Widening)
	dir := t.TempDir()
	export(t, r, dir)
	rep := run(t, dir, r.VerifierKey())
	if !hasFinding(rep, "denial", d, "") {
		t.Fatalf("no denial finding at entry %d:\n%s", d, dump(rep))
	}
	if !strings.Contains(rep.Findings[0].Detail, "unjustified") {
		t.Errorf("finding %s", rep.Findings[0])
	}
}

func TestAuditCheckpoint(t *testing.T) {
	r, _ := standard(t)
	dir := t.TempDir()
	export(t, r, dir)
	// Another key: the checkpoint does not verify, the rest still runs.
	other := testlog.NewActorSeed(testlog.Origin, "other")
	rep := run(t, dir, other.VerifierKey(testlog.Origin))
	if rep.CheckpointVerified || len(rep.Findings) < 2 || rep.Findings[0].Check != audit.CheckCheckpoint {
		t.Fatalf("findings:\n%s", dump(rep))
	}
	if !hasFinding(rep, audit.CheckGenesis, 0, "") || rep.Replayed != r.Size() {
		t.Errorf("GENESIS names another key; findings:\n%s", dump(rep))
	}
	// A missing entry bundle.
	if err := os.Remove(filepath.Join(dir, merkle.EntriesPath(0, int(r.Size())))); err != nil {
		t.Fatal(err)
	}
	rep = run(t, dir, r.VerifierKey())
	if !hasFinding(rep, audit.CheckEntries, 0, "") || rep.RootChecked {
		t.Errorf("missing bundle:\n%s", dump(rep))
	}
}
