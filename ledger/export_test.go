package ledger

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
)

// grow appends about n entries: it enrolls a few principals, then each
// confirms grants in its own workflow, concurrently so that the ledger
// batches them.
func grow(t *testing.T, w *world, n int) {
	t.Helper()
	const principals = 8
	ps := make([]*actor, principals)
	for i := range ps {
		ps[i] = newActor(t, fmt.Sprintf("user:p%d_%d", w.l.Head().Size, i))
		w.enroll(ps[i])
	}
	tag := w.l.Head().Size // names differ between calls
	agent := newActor(t, fmt.Sprintf("agent:a%d", tag))
	per := (n - principals) / principals
	var wg sync.WaitGroup
	errs := make(chan error, principals)
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range per {
				id := fmt.Sprintf("c_%s_%d", strings.ReplaceAll(p.name, ":", "_"), j)
				p.seq++
				st := &statement.ConfirmDoc{
					Header: statement.Header{Type: statement.Confirm, Timestamp: statement.FormatTimestamp(w.clock.Now()),
						Log: testOrigin, Actor: p.name, Seq: p.seq},
					ConfirmID: id,
					Grant: grant(agent, fmt.Sprintf("wf_%d_%d_%d", tag, i, j), []string{"portal/x"}, []string{"purchase"}, nil,
						map[string]int64{"budget_usd": 10}, 60),
				}
				if err := statement.Seal(st); err != nil {
					errs <- err
					return
				}
				_, raw, err := statement.Sign(p.priv, st)
				if err != nil {
					errs <- err
					return
				}
				res, err := w.l.Append(t.Context(), raw)
				if err != nil {
					errs <- err
					return
				}
				if res.Verdict != authority.Accepted {
					errs <- fmt.Errorf("%s: %s %s", id, res.Code, res.Reason)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// fileTiles reads an export's hash tiles for tlog.TileHashReader, which
// checks every tile it reads against the tree hash.
type fileTiles struct{ dir string }

func (fileTiles) Height() int { return merkle.TileHeight }

func (r fileTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if t.H != merkle.TileHeight || t.L < 0 {
			return nil, fmt.Errorf("unexpected tile %+v", t)
		}
		data, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(merkle.TilePath(uint64(t.L), uint64(t.N), t.W))))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (fileTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// openExport checks an export's checkpoint with note.Open under the log's
// verifier key and returns the tree it names.
func openExport(t *testing.T, dir string, l *Ledger) tlog.Tree {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(text, note.VerifierList(v))
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[0] != testOrigin || lines[3] != "" {
		t.Fatalf("checkpoint body %q", n.Text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		t.Fatalf("root %q: %v", lines[2], err)
	}
	return tlog.Tree{N: size, Hash: tlog.Hash(root)}
}

// checkExport reads an export with golang.org/x/mod/sumdb/tlog only: the
// tree hash from its tiles, every entry bundle against the log, and a
// record proof for each entry.
func checkExport(t *testing.T, dir string, l *Ledger) tlog.Tree {
	t.Helper()
	tree := openExport(t, dir, l)
	if head := l.Head(); uint64(tree.N) != head.Size || tree.Hash != tlog.Hash(head.Root) {
		t.Fatalf("exported tree %d %x, head %d %x", tree.N, tree.Hash, head.Size, head.Root)
	}
	hr := tlog.TileHashReader(tree, fileTiles{dir})
	th, err := tlog.TreeHash(tree.N, hr)
	if err != nil {
		t.Fatal(err)
	}
	if th != tree.Hash {
		t.Fatalf("tree hash from tiles %x, checkpoint %x", th, tree.Hash)
	}
	var i int64
	for _, ref := range merkle.NewEntryBundles(0, uint64(tree.N)) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref.Path())))
		if err != nil {
			t.Fatal(err)
		}
		leaves, err := merkle.DecodeEntryBundle(data)
		if err != nil || len(leaves) != ref.Width {
			t.Fatalf("%s: %d leaves, %v", ref.Path(), len(leaves), err)
		}
		for _, leaf := range leaves {
			want, err := l.LeafBytes(uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(leaf, want) {
				t.Fatalf("entry %d differs from the log's leaf", i)
			}
			p, err := tlog.ProveRecord(tree.N, i, hr)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckRecord(p, tree.N, tree.Hash, i, tlog.RecordHash(leaf)); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			i++
		}
	}
	if i != tree.N {
		t.Fatalf("entry bundles hold %d entries, tree %d", i, tree.N)
	}
	return tree
}

func TestExport(t *testing.T) {
	w := newWorld(t, Options{})
	grow(t, w, 300) // a full tile and a partial one at level 0, a partial at level 1
	out := filepath.Join(t.TempDir(), "tiles")
	calls, last := 0, [2]int{}
	if err := Export(w.l, out, func(done, total int) { calls++; last = [2]int{done, total} }); err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last[0] != last[1] {
		t.Fatalf("progress: %d calls, last %v", calls, last)
	}
	old := checkExport(t, out, w.l)
	for _, p := range []string{"tile/0/000", "tile/entries/000", "tile/1/000.p/1"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Errorf("missing %s: %v", p, err)
		}
	}
	fi, err := os.Stat(filepath.Join(out, "checkpoint"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("checkpoint mode %v, %v", fi.Mode(), err)
	}

	// Grow past the next tile boundary and export again: incremental, and
	// the new tree is consistent with the old one.
	grow(t, w, 260)
	written := 0
	if err := Export(w.l, out, func(done, total int) { written = total }); err != nil {
		t.Fatal(err)
	}
	if all := len(merkle.NewTiles(0, w.l.Head().Size)) + len(merkle.NewEntryBundles(0, w.l.Head().Size)) + 1; written >= all {
		t.Errorf("second export wrote %d files, a full export is %d", written, all)
	}
	tree := checkExport(t, out, w.l)
	hr := tlog.TileHashReader(tree, fileTiles{out})
	p, err := tlog.ProveTree(tree.N, old.N, hr)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(p, tree.N, tree.Hash, old.N, old.Hash); err != nil {
		t.Fatal(err)
	}
	// The stale partial tiles of the first export are still there and valid.
	if _, err := os.Stat(filepath.Join(out, merkle.TilePath(0, 1, int(old.N%256)))); err != nil {
		t.Errorf("old partial tile: %v", err)
	}

	// Exporting again with nothing new writes only the checkpoint.
	if err := Export(w.l, out, func(done, total int) { written = total }); err != nil || written != 1 {
		t.Fatalf("idempotent export: %d files, %v", written, err)
	}
}

func TestExportRefusesOtherLog(t *testing.T) {
	w1, w2 := newWorld(t, Options{}), newWorld(t, Options{})
	out := t.TempDir()
	if err := Export(w1.l, out, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(out, "checkpoint"))
	err := Export(w2.l, out, nil)
	if err == nil || !strings.Contains(err.Error(), "not this log's") {
		t.Fatalf("export over another log's checkpoint: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(out, "checkpoint"))
	if !bytes.Equal(before, after) {
		t.Fatal("the other log's checkpoint was replaced")
	}
}

func TestExportRefusesRollback(t *testing.T) {
	w := newWorld(t, Options{})
	w.enroll(newActor(t, "user:x"))
	out := t.TempDir()
	if err := Export(w.l, out, nil); err != nil {
		t.Fatal(err)
	}
	// A log one entry behind its export (a restored backup) must not
	// replace the newer checkpoint.
	head := w.l.Head()
	head.Size--
	if _, err := exportedSize(w.l, out, head); err == nil || !strings.Contains(err.Error(), "roll it back") {
		t.Fatalf("rollback: %v", err)
	}
}
