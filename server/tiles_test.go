package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// httpTiles is a tlog.TileReader that fetches C2SP tlog-tiles over HTTP.
type httpTiles struct {
	base    string
	fetched int
}

func (h *httpTiles) Height() int { return merkle.TileHeight }

func (h *httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		// C2SP paths carry no height: tile/<L>/<N>[.p/<W>].
		p := merkle.TilePath(uint64(t.L), uint64(t.N), t.W)
		resp, err := http.Get(h.base + "/" + p)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: HTTP %d", p, resp.StatusCode)
		}
		out[i] = data
		h.fetched++
	}
	return out, nil
}

func (h *httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// TestTilesWithTlog reads the served checkpoint and tiles with
// golang.org/x/mod/sumdb (note, tlog) only, recomputes the root, proves
// entries, and checks the entry bundles against the leaf hashes.
func TestTilesWithTlog(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	ctx := context.Background()
	// Enough entries for a full tile at level 0 and a partial one above:
	// GENESIS and 300 PRINCIPAL entries.
	pubs := make(chan string, 300)
	for range 300 {
		pub, _ := servertest.Key(t)
		pubs <- sign.EncodePublicKey(pub)
	}
	close(pubs)
	for p := range pubs {
		if _, err := lg.Admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: lg.ID("p"), Op: statement.OpEnroll,
			Name: "user:" + lg.ID("u"), PublicKey: p}); err != nil {
			t.Fatal(err)
		}
	}

	code, _, cpText := lg.Get("/checkpoint")
	if code != 200 {
		t.Fatalf("checkpoint: %d", code)
	}
	v, err := note.NewVerifier(lg.VKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(cpText, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	cp, err := merkle.OpenCheckpoint(cpText, servertest.Origin, lg.VKey)
	if err != nil || cp.Size != 301 {
		t.Fatalf("checkpoint %q: %v", n.Text, err)
	}

	tr := &httpTiles{base: lg.URL}
	tree := tlog.Tree{N: int64(cp.Size), Hash: tlog.Hash(cp.Root)}
	hr := tlog.TileHashReader(tree, tr)
	root, err := tlog.TreeHash(tree.N, hr)
	if err != nil {
		t.Fatalf("TreeHash over HTTP tiles: %v", err)
	}
	if root != tlog.Hash(cp.Root) {
		t.Fatalf("recomputed root %v, checkpoint %v", root, cp.Root)
	}
	// Record proofs for a few entries, checked against the leaves.
	bundle0 := fetch(t, lg.URL+"/tile/entries/000")
	leaves, err := merkle.DecodeEntryBundle(bundle0)
	if err != nil || len(leaves) != 256 {
		t.Fatalf("entry bundle 0: %d leaves, %v", len(leaves), err)
	}
	partial := fetch(t, lg.URL+"/tile/entries/001.p/45")
	more, err := merkle.DecodeEntryBundle(partial)
	if err != nil || len(more) != 45 {
		t.Fatalf("entry bundle 1.p/45: %d leaves, %v", len(more), err)
	}
	leaves = append(leaves, more...)
	for _, i := range []int64{0, 1, 255, 256, 300} {
		p, err := tlog.ProveRecord(tree.N, i, hr)
		if err != nil {
			t.Fatalf("ProveRecord %d: %v", i, err)
		}
		if err := tlog.CheckRecord(p, tree.N, tree.Hash, i, tlog.RecordHash(leaves[i])); err != nil {
			t.Fatalf("CheckRecord %d: %v", i, err)
		}
	}
	if tr.fetched == 0 {
		t.Fatal("no tiles were fetched")
	}

	// Headers, and 404 beyond the tree.
	for path, want := range map[string]struct {
		code  int
		cache string
	}{
		"/tile/0/000":           {200, "public, max-age=31536000, immutable"},
		"/tile/0/001.p/45":      {200, "public, max-age=10"},
		"/tile/0/001.p/44":      {200, "public, max-age=10"}, // an older partial is a prefix
		"/tile/1/000.p/1":       {200, "public, max-age=10"},
		"/tile/entries/000":     {200, "public, max-age=31536000, immutable"},
		"/tile/0/001":           {404, ""},
		"/tile/0/001.p/46":      {404, ""},
		"/tile/1/000":           {404, ""},
		"/tile/2/000.p/1":       {404, ""},
		"/tile/entries/001":     {404, ""},
		"/tile/entries/002.p/1": {404, ""},
		"/tile/0/1":             {404, ""},
		"/tile/0/x000/001":      {404, ""},
		"/tile/8/0/000":         {404, ""},
	} {
		resp, err := http.Get(lg.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want.code {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want.code)
			continue
		}
		if want.code == 200 {
			if got := resp.Header.Get("Cache-Control"); got != want.cache {
				t.Errorf("%s: Cache-Control %q, want %q", path, got, want.cache)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/octet-stream" {
				t.Errorf("%s: Content-Type %q", path, got)
			}
		}
	}
}

func fetch(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return b
}
