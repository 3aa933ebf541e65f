package merkle

import (
	"errors"
	"fmt"
)

// Sentinel errors, for use with [errors.Is]. Errors returned by this package
// wrap one of them, often inside a typed error that carries the details.
var (
	// ErrMalformedPath reports a tile or entry bundle path that is not in
	// the exact form the C2SP tlog-tiles specification prescribes.
	ErrMalformedPath = errors.New("merkle: malformed tile path")

	// ErrMalformedBundle reports entry bundle bytes that are not a sequence
	// of 1 to 256 big-endian uint16 length-prefixed entries.
	ErrMalformedBundle = errors.New("merkle: malformed entry bundle")

	// ErrLeafTooLarge reports a leaf longer than [MaxLeafSize] bytes, which an
	// entry bundle cannot carry.
	ErrLeafTooLarge = errors.New("merkle: leaf too large")

	// ErrMalformedEdge reports a serialised or restored tree edge whose
	// hashes do not match its size.
	ErrMalformedEdge = errors.New("merkle: malformed tree edge")

	// ErrTileMissing reports a tile that a computation needs and the
	// TileReader does not have, or has with fewer hashes than needed.
	ErrTileMissing = errors.New("merkle: tile missing")

	// ErrMalformedTile reports a tile blob that is not a whole number of
	// hashes, or holds more than TileWidth of them.
	ErrMalformedTile = errors.New("merkle: malformed tile")

	// ErrInconsistentTiles reports stored tiles that do not agree with the
	// stored tree edge: the storage is corrupt or was written by a bug.
	ErrInconsistentTiles = errors.New("merkle: tiles inconsistent with tree edge")

	// ErrOutOfRange reports a leaf index or tree size outside the tree.
	ErrOutOfRange = errors.New("merkle: index or size out of range")

	// ErrProofFailed reports a proof that does not verify.
	ErrProofFailed = errors.New("merkle: proof verification failed")

	// ErrMalformedCheckpoint reports a checkpoint whose signed body is not
	// the canonical three-line C2SP tlog-checkpoint this log writes.
	ErrMalformedCheckpoint = errors.New("merkle: malformed checkpoint")

	// ErrWrongOrigin reports a checkpoint (or key) for another log.
	ErrWrongOrigin = errors.New("merkle: checkpoint for another log")

	// ErrUnsignedCheckpoint reports a checkpoint that carries no valid
	// signature by the log key.
	ErrUnsignedCheckpoint = errors.New("merkle: checkpoint not signed by the log key")
)

// A PathError reports a tile path that failed to parse.
type PathError struct {
	Path   string // the path as given
	Reason string // what is wrong with it
}

func (e *PathError) Error() string {
	return fmt.Sprintf("malformed tile path %q: %s", e.Path, e.Reason)
}

// Unwrap returns [ErrMalformedPath].
func (e *PathError) Unwrap() error { return ErrMalformedPath }

// A TileError reports a tile that could not be used: the reader failed, or the
// tile holds fewer hashes than the computation needs.
type TileError struct {
	Level, Index uint64 // the tile's coordinates
	Have, Need   int    // hashes in the blob and hashes needed (bytes in the blob if malformed)
	Err          error  // the reader's error, or ErrTileMissing
}

func (e *TileError) Error() string {
	if e.Err == ErrMalformedTile {
		return fmt.Sprintf("tile %s is malformed: %d bytes", TilePath(e.Level, e.Index, TileWidth), e.Have)
	}
	if e.Err != nil && e.Err != ErrTileMissing {
		return fmt.Sprintf("couldn't read tile %s: %v", TilePath(e.Level, e.Index, TileWidth), e.Err)
	}
	return fmt.Sprintf("tile %s holds %d hashes, need %d", TilePath(e.Level, e.Index, TileWidth), e.Have, e.Need)
}

// Unwrap returns the reader's error, or [ErrTileMissing].
func (e *TileError) Unwrap() error { return e.Err }
