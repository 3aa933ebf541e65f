// Package storagetest is the conformance suite every custody store
// passes: the same commits, reads, fences and files at the store's seam
// (Store), and the same appends, reads, proofs, bundles, reopening,
// recovery from a failed commit and replay-equals-state through a real
// ledger (Ledger). Each driver's tests call both with its own opener.
//
// PostgreSQL tests take a server from CUSTODY_TEST_PG (a URL; start one
// with scripts/postgres.sh start DIR). Without it they skip, except when
// CI is set: then they fail.
package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/storage"
)

// PostgresEnv names the variable holding the test server's URL.
const PostgresEnv = "CUSTODY_TEST_PG"

// PostgresServer returns CUSTODY_TEST_PG, skipping the test when it is
// unset (failing it when CI is set).
func PostgresServer(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(PostgresEnv)
	if u == "" {
		testenv.Need(tb, "%s is not set (start a server with scripts/postgres.sh start DIR and export the URL it prints)", PostgresEnv)
	}
	return u
}

// PostgresURL returns the URL of a new, empty schema on the test server,
// dropped when the test ends with the schemas of the named logs made in
// it: one database's worth of logs per test.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	base := PostgresServer(tb)
	var r [6]byte
	rand.Read(r[:])
	schema := "custody_test_" + hex.EncodeToString(r[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connecting to %s: %v", PostgresEnv, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		// And the schemas of the named logs made in it (pgstore: logs.go).
		rows, err := conn.Query(ctx, "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)", schema+"_log_")
		if err != nil {
			return
		}
		names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, n := range names {
			conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{n}.Sanitize()+" CASCADE")
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Opener returns a function that opens one store, the same each call,
// ready to commit (a store with a lease holds it). The suite closes what
// it opens.
type Opener func(t *testing.T) func() storage.Store

func hash(i int) [32]byte {
	var h [32]byte
	copy(h[:], fmt.Sprintf("dedup-%d", i))
	return h
}

// edge is a stand-in compact range of size n: the store checks its size
// prefix only.
func edge(t *testing.T, n uint64) []byte {
	t.Helper()
	return edgeOf(n)
}

// Store runs the store-level conformance suite.
func Store(t *testing.T, opener Opener) {
	ctx := context.Background()
	t.Run("EmptyAndFiles", func(t *testing.T) {
		open := opener(t)
		s := open()
		defer s.Close()
		h, err := s.Head(ctx)
		if err != nil || h != nil {
			t.Fatalf("empty store: head %v, %v; want nil, nil", h, err)
		}
		if v, err := s.Leaf(ctx, 0); err != nil || v != nil {
			t.Fatalf("empty store: leaf 0 = %q, %v", v, err)
		}
		if _, err := s.ReadFile("custody.json"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
		}
		for _, data := range []string{"one", "two"} {
			if err := s.WriteFile("custody.json", []byte(data)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.ReadFile("custody.json"); err != nil || string(got) != data {
				t.Fatalf("file: %q, %v; want %q", got, err, data)
			}
		}
		if err := s.WriteFile("keys/log.key", []byte("pem")); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ReadFile("keys/log.key"); err != nil || string(got) != "pem" {
			t.Fatalf("keys/log.key: %q, %v", got, err)
		}
	})
	t.Run("SameKeyTwiceInABatch", func(t *testing.T) {
		// A batch may change one authority record (or grow one tile) more
		// than once, as a Badger transaction may: the last write wins.
		s := opener(t)()
		b := &storage.Batch{From: 0, Origin: "example.com/log", Leaves: [][]byte{[]byte("a"), []byte("b")},
			Tiles: []storage.Tile{{Level: 0, Index: 0, Data: bytes.Repeat([]byte{1}, 32)}, {Level: 0, Index: 0, Data: bytes.Repeat([]byte{2}, 64)}},
			Records: []storage.Record{{Key: "k/twice", Value: []byte("first")}, {Key: "k/once", Value: []byte("x")},
				{Key: "k/twice", Value: []byte("second")}, {Key: "k/twice"}}}
		b.Edge, b.Checkpoint = edge(t, b.Size()), []byte("checkpoint 2")
		if err := s.Commit(ctx, b); err != nil {
			t.Fatalf("a batch writing one record twice: %v", err)
		}
		if v, err := s.Record(ctx, "k/twice"); err != nil || string(v) != "second" {
			t.Fatalf("record k/twice: %q, %v; want the last value written", v, err)
		}
		if v, err := s.Record(ctx, "k/once"); err != nil || string(v) != "x" {
			t.Fatalf("record k/once: %q, %v", v, err)
		}
		if v, err := s.Tile(ctx, 0, 0); err != nil || !bytes.Equal(v, bytes.Repeat([]byte{2}, 64)) {
			t.Fatalf("tile 0/0: %x, %v; want the last written", v, err)
		}
	})
	t.Run("CommitsReadsAndReopens", func(t *testing.T) {
		open := opener(t)
		s := open()
		var leaves [][]byte
		from := uint64(0)
		for round := 0; round < 3; round++ {
			b := &storage.Batch{From: from}
			for i := 0; i < 300; i++ {
				leaf := []byte(fmt.Sprintf("leaf %d of round %d", len(leaves), round))
				b.Leaves = append(b.Leaves, leaf)
				b.Dedup = append(b.Dedup, storage.Dedup{Hash: hash(len(leaves)), Index: uint64(len(leaves))})
				leaves = append(leaves, leaf)
			}
			tile := bytes.Repeat([]byte{byte(round)}, 32*(round+1))
			b.Tiles = []storage.Tile{{Level: 0, Index: 0, Data: tile}, {Level: 1, Index: uint64(round), Data: tile}}
			b.Records = []storage.Record{{Key: "k/shared", Value: []byte(fmt.Sprint(round))}, {Key: fmt.Sprintf("k/%d", round), Value: []byte("v")}, {Key: "k/nil"}}
			b.Edge, b.Checkpoint = edge(t, b.Size()), []byte(fmt.Sprintf("checkpoint %d", b.Size()))
			if round == 0 {
				b.Origin = "example.com/log"
			}
			if w := s.Weigh(b); w <= 0 || w > s.Budget() {
				t.Fatalf("a small batch weighs %d against a budget of %d", w, s.Budget())
			}
			if err := s.Commit(ctx, b); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			from = b.Size()
		}
		check := func(s storage.Store) {
			t.Helper()
			h, err := s.Head(ctx)
			if err != nil || h == nil {
				t.Fatalf("head: %v, %v", h, err)
			}
			if h.Size != 900 || string(h.Checkpoint) != "checkpoint 900" || h.Origin != "example.com/log" || !bytes.Equal(h.Edge, edge(t, 900)) {
				t.Fatalf("head: size %d, checkpoint %q, origin %q", h.Size, h.Checkpoint, h.Origin)
			}
			for _, i := range []int{0, 299, 300, 899} {
				if v, err := s.Leaf(ctx, uint64(i)); err != nil || !bytes.Equal(v, leaves[i]) {
					t.Fatalf("leaf %d: %q, %v", i, v, err)
				}
				if idx, ok, err := s.Dedup(ctx, hash(i)); err != nil || !ok || idx != uint64(i) {
					t.Fatalf("dedup %d: %d %v %v", i, idx, ok, err)
				}
			}
			if v, err := s.Leaf(ctx, 900); err != nil || v != nil {
				t.Fatalf("leaf 900: %q, %v", v, err)
			}
			if _, ok, err := s.Dedup(ctx, hash(900)); err != nil || ok {
				t.Fatalf("dedup 900: %v %v", ok, err)
			}
			got, err := s.Leaves(ctx, 250, 100)
			if err != nil || len(got) != 100 || !bytes.Equal(got[0], leaves[250]) || !bytes.Equal(got[99], leaves[349]) {
				t.Fatalf("leaves 250..349: %d, %v", len(got), err)
			}
			if got, err := s.Leaves(ctx, 890, 20); err != nil || len(got) != 10 {
				t.Fatalf("leaves 890..909: %d, %v; want the 10 held", len(got), err)
			}
			tile, err := s.Tile(ctx, 0, 0)
			if err != nil || !bytes.Equal(tile, bytes.Repeat([]byte{2}, 96)) {
				t.Fatalf("tile 0/0 (grown in place): %x, %v", tile, err)
			}
			if r, err := s.TileRange(ctx, 0, 0, 1, 2); err != nil || !bytes.Equal(r, bytes.Repeat([]byte{2}, 32)) {
				t.Fatalf("tile 0/0 hashes 1..2: %x, %v", r, err)
			}
			if r, err := s.TileRange(ctx, 0, 0, 2, 9); err != nil || len(r) != 32 {
				t.Fatalf("tile 0/0 hashes 2..9 of 3: %d bytes, %v", len(r), err)
			}
			if v, err := s.Tile(ctx, 1, 1); err != nil || len(v) != 64 {
				t.Fatalf("tile 1/1: %d, %v", len(v), err)
			}
			if v, err := s.Tile(ctx, 2, 0); err != nil || v != nil {
				t.Fatalf("tile 2/0: %x, %v", v, err)
			}
			if v, err := s.TileRange(ctx, 2, 0, 0, 1); err != nil || v != nil {
				t.Fatalf("tile range 2/0: %x, %v", v, err)
			}
			if b := s.Capabilities().TileBatch; b != nil {
				// Consecutive tiles of one level, none of another.
				if v, err := b.Tiles(ctx, 0, 0, 3); err != nil || len(v) != 3 || !bytes.Equal(v[0], tile) || v[1] != nil || v[2] != nil {
					t.Fatalf("tiles 0/0..2: %d, %v", len(v), err)
				}
				if v, err := b.Tiles(ctx, 1, 1, 4); err != nil || len(v) != 4 || len(v[0]) != 64 || len(v[1]) != 96 || v[2] != nil || v[3] != nil {
					t.Fatalf("tiles 1/1..4: %d, %v", len(v), err)
				}
				if v, err := b.Tiles(ctx, 1, 3, 5); err != nil || len(v) != 5 || slices.ContainsFunc(v, func(x []byte) bool { return x != nil }) {
					t.Fatalf("tiles 1/3..7: %v, %v", v, err)
				}
			}
			if v, err := s.Record(ctx, "k/shared"); err != nil || string(v) != "2" {
				t.Fatalf("record k/shared: %q, %v", v, err)
			}
			if v, err := s.Record(ctx, "k/nil"); err != nil || v != nil {
				t.Fatalf("record k/nil (never written): %q, %v", v, err)
			}
			all := map[string]string{}
			if err := s.Records(ctx, func(k string, v []byte) error { all[k] = string(v); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(all) != 4 || all["k/1"] != "v" {
				t.Fatalf("records: %v", all)
			}
		}
		check(s)
		// Fenced: a batch that does not extend the committed head writes
		// nothing.
		for _, from := range []uint64{0, 899, 901} {
			b := &storage.Batch{From: from, Leaves: [][]byte{[]byte("stale")}, Dedup: []storage.Dedup{{Hash: hash(1000), Index: from}},
				Records: []storage.Record{{Key: "k/shared", Value: []byte("stale")}}}
			b.Edge, b.Checkpoint = edge(t, b.Size()), []byte("stale")
			if err := s.Commit(ctx, b); !errors.Is(err, storage.ErrFenced) {
				t.Fatalf("a batch from %d on a head of 900: %v, want ErrFenced", from, err)
			}
			if err := s.SetCheckpoint(ctx, from, []byte("stale")); !errors.Is(err, storage.ErrFenced) {
				t.Fatalf("a checkpoint for size %d on a head of 900: %v, want ErrFenced", from, err)
			}
		}
		check(s)
		if err := s.SetCheckpoint(ctx, 900, []byte("checkpoint 900")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open()
		defer s.Close()
		check(s)
	})
}
