package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/custodylog/custody/internal/s3proc"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
)

const testOrigin = "example.com/publish-test"

// logOnly makes a log of n leaves: GENESIS, then raw leaves appended in
// batches of 37.
func logOnly(t *testing.T, n int) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Init(filepath.Join(t.TempDir(), "data"), testOrigin, ledger.InitOptions{Options: ledger.Options{LogOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	grow(t, l, n-1)
	return l
}

func grow(t *testing.T, l *ledger.Ledger, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 37)
		leaves := make([][]byte, k)
		for i := range leaves {
			leaves[i] = fmt.Appendf(nil, "leaf %d of %s", l.Head().Size+uint64(i), t.Name())
		}
		if _, _, err := l.AppendLeaves(context.Background(), leaves); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

func open(t *testing.T, url string) *Bucket {
	t.Helper()
	b, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// httpTiles reads the bucket over plain HTTP GETs, as a CDN serves it,
// for golang.org/x/mod/sumdb/tlog: its tiles of height 8 are the
// tlog-tiles paths without the height.
type httpTiles struct {
	t    *testing.T
	base string
}

func (h httpTiles) Height() int { return merkle.TileHeight }

func (h httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tl := range tiles {
		ref := merkle.TileRef{Level: uint64(tl.L), Index: uint64(tl.N), Width: tl.W}
		data, err := httpGet(h.base + "/" + ref.Path())
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (h httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, data)
	}
	return data, err
}

// checkBucket reads the published checkpoint over HTTP, verifies it
// under the log's key, and has x/mod's tlog recompute its root from the
// bucket's hash tiles; it checks every entry bundle's leaves too.
func checkBucket(t *testing.T, l *ledger.Ledger, base string) uint64 {
	t.Helper()
	raw, err := httpGet(base + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(raw, note.VerifierList(v))
	if err != nil {
		t.Fatalf("the bucket's checkpoint does not verify: %v\n%s", err, raw)
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	var size int64
	fmt.Sscan(lines[1], &size)
	want, err := tlog.ParseHash(lines[2])
	if err != nil {
		t.Fatal(err)
	}
	// The reader checks every tile it reads against the checkpoint's root.
	tr := tlog.TileHashReader(tlog.Tree{N: size, Hash: want}, httpTiles{t, base})
	root, err := tlog.TreeHash(size, tr)
	if err != nil {
		t.Fatalf("tlog cannot recompute the root from the bucket: %v", err)
	}
	if got := root.String(); got != lines[2] {
		t.Fatalf("tlog recomputes root %s from the bucket; the checkpoint says %s", got, lines[2])
	}
	// The entry bundles hold the log's leaves.
	for _, ref := range merkle.NewEntryBundles(0, uint64(size)) {
		data, err := httpGet(base + "/" + ref.Path())
		if err != nil {
			t.Fatal(err)
		}
		want, err := l.EntryBundle(ref.Index, ref.Width)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("%s in the bucket differs from the log's", ref.Path())
		}
	}
	return uint64(size)
}

// TestPublishVersity publishes a growing log to versitygw, and reads it
// back over plain HTTP with x/mod's tlog tile reader.
func TestPublishVersity(t *testing.T) {
	g := s3proc.ForTest(t, "logs")
	l := logOnly(t, 700)
	b := open(t, "s3://logs/prod/log")
	p := New(l, b, Options{})
	res, err := p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := len(merkle.NewTiles(0, 700)) + len(merkle.NewEntryBundles(0, 700)) + 1
	if res.From != 0 || res.Size != 700 || res.Written != want || res.Existing != 0 {
		t.Fatalf("first pass: %+v, want %d objects written", res, want)
	}
	base := g.URL + "/logs/prod/log"
	if got := checkBucket(t, l, base); got != 700 {
		t.Fatalf("bucket at size %d", got)
	}
	// Cache headers, as a CDN reads them.
	for path, cc := range map[string]string{"checkpoint": CheckpointCacheControl, "tile/0/000": TileCacheControl, "tile/entries/002.p/188": TileCacheControl} {
		resp, err := http.Get(base + "/" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != cc {
			t.Errorf("%s: %s, Cache-Control %q, want %q", path, resp.Status, resp.Header.Get("Cache-Control"), cc)
		}
	}

	// Nothing new: nothing written.
	res, err = p.Once(context.Background())
	if err != nil || res.Written != 0 {
		t.Fatalf("pass with nothing new: %+v %v", res, err)
	}
	// The log grows; a new publisher (a restart) goes on from the
	// bucket's checkpoint and writes only what it lacks.
	grow(t, l, 300)
	p2 := New(l, open(t, "s3://logs/prod/log"), Options{})
	res, err = p2.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want = len(merkle.NewTiles(700, 1000)) + len(merkle.NewEntryBundles(700, 1000)) + 1
	if res.From != 700 || res.Size != 1000 || res.Written != want || res.Existing != 0 {
		t.Fatalf("second pass: %+v, want %d written", res, want)
	}
	checkBucket(t, l, base)

	// Another log's publisher refuses the bucket, writing nothing.
	other := logOnly(t, 10)
	if _, err := New(other, open(t, "s3://logs/prod/log"), Options{}).Once(context.Background()); !errors.Is(err, ErrAlarm) {
		t.Fatalf("another log's publisher into this bucket: %v, want an alarm", err)
	}
	checkBucket(t, l, base)
}

// TestPublishResumeAfterCrash leaves the bucket as a publisher killed in
// the middle of a pass does (some tiles written, the checkpoint still the
// old one), then publishes again: the bucket is complete, the objects
// already there were read back and left as they were, none overwritten.
func TestPublishResumeAfterCrash(t *testing.T) {
	g := s3proc.ForTest(t, "logs")
	l := logOnly(t, 600)
	p := New(l, open(t, "s3://logs/log"), Options{})
	if _, err := p.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	grow(t, l, 700)
	// The crashed pass: every other object of the next pass, in the
	// order a pass writes them, and no checkpoint.
	refs := slices.Concat(merkle.NewTiles(600, 1300), merkle.NewEntryBundles(600, 1300))
	crashed := New(l, open(t, "s3://logs/log"), Options{Parallel: 1})
	var half []merkle.TileRef
	for i, r := range refs {
		if i%2 == 0 {
			half = append(half, r)
		}
	}
	if c, _, err := crashed.putAll(context.Background(), half); err != nil || c != len(half) {
		t.Fatalf("the crashed pass wrote %d of %d: %v", c, len(half), err)
	}
	before := lastModified(t, g, "logs", "log/", half)
	if got := checkBucket(t, l, g.URL+"/logs/log"); got != 600 {
		t.Fatalf("after the crash the bucket serves size %d, want the old 600", got)
	}
	time.Sleep(1100 * time.Millisecond) // Last-Modified has one-second resolution

	// The takeover (a new process: it knows nothing of the crashed pass).
	res, err := New(l, open(t, "s3://logs/log"), Options{}).Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 600 || res.Size != 1300 || res.Existing != len(half) || res.Written != len(refs)-len(half)+1 {
		t.Fatalf("takeover pass: %+v; want %d existing, %d written", res, len(half), len(refs)-len(half)+1)
	}
	checkBucket(t, l, g.URL+"/logs/log")
	after := lastModified(t, g, "logs", "log/", half)
	for k, v := range before {
		if !after[k].Equal(v) {
			t.Errorf("%s was rewritten (Last-Modified %s, then %s)", k, v, after[k])
		}
	}
}

func lastModified(t *testing.T, g *s3proc.Gateway, bucket, prefix string, refs []merkle.TileRef) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, r := range refs {
		key := prefix + r.Path()
		h, err := g.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		out[key] = aws.ToTime(h.LastModified)
	}
	return out
}

// TestPublishAlarm: a tile in the bucket with other bytes stops the
// publication before the checkpoint, with an alarm, and stays as it is.
func TestPublishAlarm(t *testing.T) {
	g := s3proc.ForTest(t, "logs")
	l := logOnly(t, 300)
	// Someone writes tile/0/001.p/44 before the log does.
	bad := []byte(strings.Repeat("x", 44*32))
	key := "tile/0/001.p/44"
	if _, err := g.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("logs"), Key: &key, Body: bytes.NewReader(bad)}); err != nil {
		t.Fatal(err)
	}
	p := New(l, open(t, "s3://logs"), Options{})
	_, err := p.Once(context.Background())
	if !errors.Is(err, ErrAlarm) || !strings.Contains(err.Error(), key) {
		t.Fatalf("publishing over a foreign tile: %v; want an alarm naming %s", err, key)
	}
	if _, err := httpGet(g.URL + "/logs/checkpoint"); err == nil {
		t.Fatal("a checkpoint was published over a missing tile")
	}
	got, err := httpGet(g.URL + "/logs/" + key)
	if err != nil || !bytes.Equal(got, bad) {
		t.Fatalf("the foreign tile was overwritten (%v)", err)
	}
}

// TestPublishRun publishes behind the sequencer as the log grows, and
// reports its lag.
func TestPublishRun(t *testing.T) {
	g := s3proc.ForTest(t, "logs")
	l := logOnly(t, 10)
	p := New(l, open(t, "s3://logs/run"), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for range 20 {
		grow(t, l, 25)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Published() != l.Head().Size {
		if time.Now().After(deadline) {
			t.Fatalf("published %d of %d after 30s", p.Published(), l.Head().Size)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p.Lag() != 0 || p.LagTime() != 0 {
		t.Fatalf("lag %d entries, %s once up to date", p.Lag(), p.LagTime())
	}
	checkBucket(t, l, g.URL+"/logs/run")
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{"s3://b": "b|", "s3://b/": "b|", "s3://b/p/q/": "b|p/q"} {
		b, p, err := ParseURL(in)
		if err != nil || b+"|"+p != want {
			t.Errorf("ParseURL(%q) = %q %q %v, want %s", in, b, p, err, want)
		}
	}
	for _, in := range []string{"s3:///p", "http://b/p", "s3://b/a//c", "s3://b/../x", "s3://b/p?x=1", "b/p"} {
		if _, _, err := ParseURL(in); err == nil {
			t.Errorf("ParseURL(%q) accepted", in)
		}
	}
}
