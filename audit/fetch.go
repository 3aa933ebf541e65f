package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/custodylog/custody/merkle"
)

// Fetcher reads the files of a log in the C2SP tlog-tiles layout by their
// path ("checkpoint", "tile/0/000", "tile/entries/001.p/7"). A file that
// does not exist is an error wrapping fs.ErrNotExist.
type Fetcher interface {
	Fetch(ctx context.Context, path string) ([]byte, error)
}

// FetcherFunc adapts a function to Fetcher.
type FetcherFunc func(ctx context.Context, path string) ([]byte, error)

// Fetch implements Fetcher.
func (f FetcherFunc) Fetch(ctx context.Context, path string) ([]byte, error) { return f(ctx, path) }

// Size limits of the files of the layout: a full hash tile, a full entry
// bundle of maximum-size leaves, and a generous checkpoint.
const (
	maxTile       = merkle.FullTileSize
	maxEntries    = merkle.TileWidth * (2 + merkle.MaxLeafSize)
	maxCheckpoint = 1 << 20
)

func maxSize(path string) int64 {
	switch {
	case strings.HasPrefix(path, "tile/entries/"):
		return maxEntries
	case strings.HasPrefix(path, "tile/"):
		return maxTile
	}
	return maxCheckpoint
}

// Dir is a folder holding an exported log (custody export).
type Dir string

// Fetch implements Fetcher. Only layout paths are read: a path that is not
// the checkpoint or a canonical tile path is refused.
func (d Dir) Fetch(_ context.Context, path string) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(string(d), filepath.FromSlash(path)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, path)
}

// HTTP is a log served over HTTP(S) at a base URL (…/checkpoint,
// …/tile/…), by a custody server or any static web server.
type HTTP struct {
	Base   string
	Client *http.Client // nil: a client with a 30 s timeout
	// UserAgent is sent with each request (default "custody").
	UserAgent string
}

var defaultClient = &http.Client{Timeout: 30 * time.Second}

// Fetch implements Fetcher.
func (h *HTTP) Fetch(ctx context.Context, path string) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	url := strings.TrimRight(h.Base, "/") + "/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	ua := h.UserAgent
	if ua == "" {
		ua = "custody"
	}
	req.Header.Set("User-Agent", ua)
	c := h.Client
	if c == nil {
		c = defaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %s: %w", url, resp.Status, fs.ErrNotExist)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return readLimited(resp.Body, path)
}

func readLimited(r io.Reader, path string) ([]byte, error) {
	limit := maxSize(path)
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// WitnessedPath is where a custody server serves its newest checkpoint
// that meets its witness quorum (a static export has none).
const WitnessedPath = "v1/checkpoint/witnessed"

func checkPath(path string) error {
	if path == "checkpoint" || path == WitnessedPath {
		return nil
	}
	if _, err := merkle.ParseTilePath(path); err != nil {
		return fmt.Errorf("not a tlog-tiles path: %w", err)
	}
	return nil
}

// TileReader reads hash tiles through f for a tree of the given size: a
// tile the tree of that size holds only in part is read as the partial
// tile of that width, or, if that is gone (the log has grown since), as
// the full tile.
func TileReader(ctx context.Context, f Fetcher, size uint64) merkle.TileReader {
	return merkle.TileReaderFunc(func(level, index uint64) ([]byte, error) {
		w := widthAt(level, index, size)
		if w <= 0 {
			return nil, fmt.Errorf("tile %d/%d is beyond the tree of size %d", level, index, size)
		}
		data, err := f.Fetch(ctx, merkle.TilePath(level, index, w))
		if err != nil && w < merkle.TileWidth && errors.Is(err, fs.ErrNotExist) {
			data, err = f.Fetch(ctx, merkle.TilePath(level, index, merkle.TileWidth))
		}
		return data, err
	})
}

// widthAt is the width of tile (level, index) in a tree of size leaves.
func widthAt(level, index, size uint64) int {
	n := size >> (merkle.TileHeight * level) // nodes at the tile's bottom level
	first := index * merkle.TileWidth
	if n <= first {
		return 0
	}
	return int(min(n-first, merkle.TileWidth))
}
