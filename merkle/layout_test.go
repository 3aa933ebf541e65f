package merkle

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/custodylog/custody/internal/fuzzseed"
)

func TestTilePaths(t *testing.T) {
	// Examples from C2SP tlog-tiles, and the boundaries of the encoding.
	for _, tc := range []struct {
		ref  TileRef
		path string
	}{
		{TileRef{Level: 0, Index: 1234067, Width: 256}, "tile/0/x001/x234/067"},
		{TileRef{Level: 1, Index: 1234067, Width: 8}, "tile/1/x001/x234/067.p/8"},
		{TileRef{Index: 1234067, Width: 8, Entries: true}, "tile/entries/x001/x234/067.p/8"},
		{TileRef{Index: 1234067, Width: 256, Entries: true}, "tile/entries/x001/x234/067"},
		{TileRef{Level: 0, Index: 0, Width: 256}, "tile/0/000"},
		{TileRef{Level: 0, Index: 0, Width: 1}, "tile/0/000.p/1"},
		{TileRef{Level: 0, Index: 0, Width: 255}, "tile/0/000.p/255"},
		{TileRef{Level: 2, Index: 999, Width: 256}, "tile/2/999"},
		{TileRef{Level: 2, Index: 1000, Width: 256}, "tile/2/x001/000"},
		{TileRef{Level: 0, Index: 123456789, Width: 17}, "tile/0/x123/x456/789.p/17"},
		{TileRef{Level: 0, Index: 1000000, Width: 256}, "tile/0/x001/x000/000"},
		{TileRef{Level: 0, Index: (1<<64 - 1) / 256, Width: 255}, "tile/0/x072/x057/x594/x037/x927/935.p/255"},
		{TileRef{Level: 6, Index: 255, Width: 255}, "tile/6/255.p/255"},
		{TileRef{Level: 7, Index: 0, Width: 255}, "tile/7/000.p/255"},
		{TileRef{Index: (1<<64 - 1) / 256, Width: 255, Entries: true}, "tile/entries/x072/x057/x594/x037/x927/935.p/255"},
	} {
		if got := tc.ref.Path(); got != tc.path {
			t.Errorf("%+v.Path() = %q, want %q", tc.ref, got, tc.path)
		}
		got, err := ParseTilePath(tc.path)
		if err != nil || got != tc.ref {
			t.Errorf("ParseTilePath(%q) = %+v, %v; want %+v", tc.path, got, err, tc.ref)
		}
		if !tc.ref.Entries {
			// Same encoding as sumdb/tlog, which adds the height.
			tt := tlog.Tile{H: TileHeight, L: int(tc.ref.Level), N: int64(tc.ref.Index), W: tc.ref.Width}
			if want := strings.Replace(tt.Path(), "tile/8/", "tile/", 1); tc.ref.Path() != want {
				t.Errorf("Path() = %q, tlog says %q", tc.ref.Path(), want)
			}
		}
	}
}

func TestParseTilePathRejects(t *testing.T) {
	for _, p := range []string{
		"",
		"tile",
		"tile/",
		"tile/0",
		"tile/0/",
		"/tile/0/000",
		"tiles/0/000",
		"tile/0/000/",
		"tile/0/0",
		"tile/0/00",
		"tile/0/0000",
		"tile/0/67",
		"tile/0/x067",
		"tile/0/001/234",        // missing x
		"tile/0/x001/x234/x067", // x on the last group
		"tile/0/x000/067",       // leading zero group
		"tile/0/x000/x001/000",  // leading zero group
		"tile/0/x1/234",         // short group
		"tile/0/x0001/234",      // long group
		"tile/0/+01",            // sign
		"tile/0/-01",            // sign
		"tile/0/0x1",            // hex
		"tile/0/000.p/0",        // W = 0
		"tile/0/000.p/256",      // W = 256 is a full tile, no suffix
		"tile/0/000.p/300",      // W too large
		"tile/0/000.p/08",       // leading zero in W
		"tile/0/000.p/",         // empty W
		"tile/0/000.p",          // no W
		"tile/0/000.p/8/",       // trailing slash
		"tile/0/000.p/8x",       // trailing junk
		"tile/0/000.p/8.p/8",    // double suffix
		"tile/0/000.q/8",        // bad suffix
		"tile/0/000 ",           // trailing space
		"tile/0/000\n",          // trailing newline
		"tile/00/000",           // leading zero in L
		"tile/01/000",           // leading zero in L
		"tile/64/000",           // L above 63
		"tile/8/000",            // no tree below 2^64 has level 8
		"tile/7/000",            // full level-7 tile needs 2^64 entries
		"tile/7/001.p/1",        // beyond 2^64 entries
		"tile/-1/000",           // negative level
		"tile/data/000",         // sumdb/tlog's name, not C2SP's
		"tile/8/0/000",          // sumdb/tlog path with height
		"tile/Entries/000",      // case
		"tile/entries/000/",     // trailing slash
		"tile/entries/x000/001", // leading zero group
		"tile/0/x018/x446/x744/x073/x709/x551/616", // 2^64 overflows
		"tile/0/x999/x999/x999/x999/x999/x999/999", // overflows
		"tile/0/x001/x001/x001/x001/x001/x001/x001/001",
		"tile/0/x072/x057/x594/x037/x927/936",       // beyond 2^64 entries
		"tile/entries/x072/x057/x594/x037/x927/936", // beyond 2^64 entries
		"tile/0/０００",                                // non-ASCII digits
		"tile/0//000",
		"tile//000",
	} {
		got, err := ParseTilePath(p)
		var pe *PathError
		if !errors.As(err, &pe) || !errors.Is(err, ErrMalformedPath) || pe.Path != p {
			t.Errorf("ParseTilePath(%q) = %+v, %v; want a *PathError", p, got, err)
		}
	}
}

func TestTilePathPanics(t *testing.T) {
	for _, f := range []func(){
		func() { TilePath(0, 0, 0) },
		func() { TilePath(0, 0, 257) },
		func() { TilePath(64, 0, 1) },
		func() { EntriesPath(0, -1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}

func TestNewTiles(t *testing.T) {
	// The C2SP tlog-tiles example: a tree of size 70,000 has 273 full level 0
	// tiles, a partial level 0 tile of width 112, one full level 1 tile, a
	// partial level 1 tile of width 17, and a partial level 2 tile of width 1.
	var want []TileRef
	for n := range uint64(273) {
		want = append(want, TileRef{Level: 0, Index: n, Width: 256})
	}
	want = append(want, TileRef{Level: 0, Index: 273, Width: 112},
		TileRef{Level: 1, Index: 0, Width: 256}, TileRef{Level: 1, Index: 1, Width: 17},
		TileRef{Level: 2, Index: 0, Width: 1})
	if got := NewTiles(0, 70000); !slices.Equal(got, want) {
		t.Errorf("NewTiles(0, 70000) = %v", got)
	}
	// "A tree of size 256 will be represented by a full level 0 tile and a
	// partial level 1 tile of width 1."
	if got := NewTiles(0, 256); !slices.Equal(got, []TileRef{{Level: 0, Index: 0, Width: 256}, {Level: 1, Index: 0, Width: 1}}) {
		t.Errorf("NewTiles(0, 256) = %v", got)
	}
	if got := NewTiles(5, 5); got != nil {
		t.Errorf("NewTiles(5, 5) = %v", got)
	}
	// At the top of the uint64 range: crossing 255 * 2^56 completes one tile
	// at each of levels 0..6 and grows the level 7 tile to 255 hashes.
	const x = 255 << 56
	top := NewTiles(x-1, x)
	if len(top) != 8 || top[6] != (TileRef{Level: 6, Index: x>>48/256 - 1, Width: 256}) || top[7] != (TileRef{Level: 7, Index: 0, Width: 255}) {
		t.Errorf("NewTiles(255<<56 - 1, 255<<56) = %v", top)
	}
	rnd := newRand(7)
	sizes := []uint64{0, 1, 2, 255, 256, 257, 511, 512, 65535, 65536, 65537, 1 << 20}
	for range 40 {
		sizes = append(sizes, rnd.intn(1<<20))
	}
	for _, old := range sizes {
		for _, nw := range sizes {
			if old > nw {
				continue
			}
			var want []TileRef
			for _, tt := range tlog.NewTiles(TileHeight, int64(old), int64(nw)) {
				want = append(want, TileRef{Level: uint64(tt.L), Index: uint64(tt.N), Width: tt.W})
			}
			if got := NewTiles(old, nw); !slices.Equal(got, want) {
				t.Fatalf("NewTiles(%d, %d) = %v, tlog says %v", old, nw, got, want)
			}
			var wantE []TileRef
			for _, r := range want {
				if r.Level == 0 {
					r.Entries = true
					wantE = append(wantE, r)
				}
			}
			if got := NewEntryBundles(old, nw); !slices.Equal(got, wantE) {
				t.Fatalf("NewEntryBundles(%d, %d) = %v, want %v", old, nw, got, wantE)
			}
		}
	}
}

func TestEntryBundles(t *testing.T) {
	leaves := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte{0xff}, MaxLeafSize), []byte("last")}
	b, err := EncodeEntryBundle(leaves)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0, 1, 'a', 0, 0, 0xff, 0xff, 0xff}) {
		t.Errorf("bundle starts %x", b[:8])
	}
	got, err := DecodeEntryBundle(b)
	if err != nil || !slices.EqualFunc(got, leaves, bytes.Equal) {
		t.Fatalf("DecodeEntryBundle: %v", err)
	}
	full := make([][]byte, TileWidth)
	for i := range full {
		full[i] = testLeaf(uint64(i))
	}
	fb, err := EncodeEntryBundle(full)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeEntryBundle(fb); err != nil || len(got) != TileWidth {
		t.Fatalf("full bundle: %d, %v", len(got), err)
	}

	if _, err := EncodeEntryBundle(nil); !errors.Is(err, ErrMalformedBundle) {
		t.Errorf("EncodeEntryBundle(nil) = %v", err)
	}
	if _, err := EncodeEntryBundle(append(full, []byte("x"))); !errors.Is(err, ErrMalformedBundle) {
		t.Errorf("EncodeEntryBundle(257 leaves) = %v", err)
	}
	if _, err := EncodeEntryBundle([][]byte{make([]byte, MaxLeafSize+1)}); !errors.Is(err, ErrLeafTooLarge) {
		t.Errorf("EncodeEntryBundle(65536-byte leaf) = %v", err)
	}
	if _, err := AppendEntry(nil, make([]byte, MaxLeafSize+1)); !errors.Is(err, ErrLeafTooLarge) {
		t.Errorf("AppendEntry(65536-byte leaf) = %v", err)
	}
	for _, bad := range [][]byte{
		nil,
		{},
		{0},                        // truncated length
		{0, 2, 'a'},                // truncated entry
		{0, 1, 'a', 0},             // trailing byte
		{0, 1, 'a', 0, 5, 'b'},     // truncated second entry
		{0xff, 0xff},               // length beyond data
		append(fb, 0, 0),           // 257 entries
		append(slices.Clone(b), 1), // trailing junk
	} {
		if _, err := DecodeEntryBundle(bad); !errors.Is(err, ErrMalformedBundle) {
			t.Errorf("DecodeEntryBundle(%x...) = %v, want ErrMalformedBundle", bad[:min(len(bad), 8)], err)
		}
	}
}

func FuzzParseTilePath(f *testing.F) {
	fuzzseed.Add(f)
	for _, s := range []string{"tile/0/x001/x234/067", "tile/1/x001/x234/067.p/8", "tile/entries/x001/x234/067.p/8", "tile/0/000", "tile/63/000", "tile/7/000.p/255"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		ref, err := ParseTilePath(p)
		if err != nil {
			if !errors.Is(err, ErrMalformedPath) {
				t.Fatalf("ParseTilePath(%q) error %v is not ErrMalformedPath", p, err)
			}
			return
		}
		if got := ref.Path(); got != p {
			t.Fatalf("ParseTilePath(%q).Path() = %q", p, got)
		}
		if ref.Width < 1 || ref.Width > TileWidth || ref.Level > MaxTileLevel || (ref.Entries && ref.Level != 0) {
			t.Fatalf("ParseTilePath(%q) = %+v out of range", p, ref)
		}
		if again, err := ParseTilePath(ref.Path()); err != nil || again != ref {
			t.Fatalf("round trip of %q: %+v, %v", p, again, err)
		}
	})
}

func FuzzEntryBundle(f *testing.F) {
	fuzzseed.Add(f)
	f.Add([]byte{0, 1, 'a'})
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 3, 'a', 'b', 'c', 0, 0, 0, 1, 'z'})
	f.Add([]byte{0, 2, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		leaves, err := DecodeEntryBundle(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedBundle) {
				t.Fatalf("DecodeEntryBundle error %v is not ErrMalformedBundle", err)
			}
			return
		}
		if len(leaves) < 1 || len(leaves) > TileWidth {
			t.Fatalf("decoded %d leaves", len(leaves))
		}
		again, err := EncodeEntryBundle(leaves)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("re-encoding %x gives %x, %v", data, again, err)
		}
	})
}
