package server

import (
	"net/http"
	"strconv"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
)

// getCheckpoint serves the latest checkpoint (C2SP tlog-tiles
// "<prefix>/checkpoint"). It changes with every commit.
func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	h := s.currentCheckpoint()
	if h.Checkpoint == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "the log has no checkpoint yet")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Length", strconv.Itoa(len(h.Checkpoint)))
	w.Write(h.Checkpoint)
}

// getTile serves a C2SP tlog-tiles hash tile or entry bundle of the
// latest committed tree. A tile (full, or partial of width W) exists when
// the tree holds its last hash; anything else is 404.
func (s *Server) getTile(w http.ResponseWriter, r *http.Request) {
	ref, err := merkle.ParseTilePath("tile/" + r.PathValue("path"))
	if err != nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
		return
	}
	size := s.l.Head().Size
	// Hashes at the tile's tree level: nodes of 256^Level leaves each.
	n := size >> (merkle.TileHeight * ref.Level)
	// ParseTilePath guarantees Index*256+Width does not overflow.
	if ref.Index*merkle.TileWidth+uint64(ref.Width) > n {
		writeError(w, http.StatusNotFound, api.CodeNotFound, ref.Path()+" is beyond the tree of size "+strconv.FormatUint(size, 10))
		return
	}
	var data []byte
	if ref.Entries {
		data, err = s.l.EntryBundle(ref.Index, ref.Width)
	} else {
		data, err = s.l.Tile(ref.Level, ref.Index, ref.Width)
	}
	if err != nil {
		s.readError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if ref.Full() {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A partial tile of a given width never changes either, but clients
		// move on to wider ones: keep it briefly.
		h.Set("Cache-Control", "public, max-age=10")
	}
	w.Write(data)
}
