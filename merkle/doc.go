// Package merkle computes custody's RFC 6962 Merkle tree in the C2SP
// tlog-tiles storage model: leaf and node hashes, appends, tiles, tile paths,
// entry bundles, inclusion and consistency proofs, past roots, and signed
// checkpoints. It computes; it does not store. The ledger decides where
// tiles and the tree edge live and when they become durable.
//
// # The tree
//
// The tree is the RFC 6962 SHA-256 Merkle tree of the log's leaves:
//
//	leaf hash  = SHA-256(0x00 || leaf)
//	node hash  = SHA-256(0x01 || left || right)
//	empty root = SHA-256()
//
// Hashes are the fixed-size value type [Hash]. The tree algorithms are
// those of github.com/transparency-dev/merkle (compact ranges, proof node
// lists, verification); this package adds the tile storage around them.
//
// # What is stored
//
// A log stores its tree only as C2SP tlog-tiles of height 8 plus its
// [Edge] (the compact range: one hash per set bit of the tree size). A tile
// at tile level k holds up to 256 consecutive hashes of tree level 8k; its
// blob is the concatenation of those 32-byte hashes. A full tile is 256
// hashes (8,192 bytes); the rightmost tile of a level is partial and holds
// the hashes completed so far, so each partial tile is a prefix of every
// later version of itself and can be overwritten in place as it grows.
//
// So the only nodes tiles store are roots of perfect (complete) subtrees at
// tree levels 0, 8, 16, ...: leaf hashes, and the roots of complete 256-leaf,
// 65,536-leaf, ... subtrees. [Edge.Append] reports exactly those, and a
// [Builder] turns them into tile blobs to write.
//
// Beside them a Builder made by [NewBuilderSummaries] makes summary tiles
// ([Builder.Summaries], at [SummaryTileLevel], never published): for each
// level-0 tile, its complete nodes at tree level 6 (up to 4 hashes). They are what a [Prover]'s cache
// keeps of a level-0 tile, so a proof that meets a level-0 tile the cache
// does not hold reads 128 bytes and hashes 3 times rather than reading the
// 8 KiB tile and hashing 255 times (and, from a [TileBatchReader], reads
// those of 64 tiles at once): a proof costs about as much whether its tile
// was cached or not, so its cost does not grow with the number of tiles.
// A log that stores no summaries (or not for its older tiles) gets the
// same proofs, at the old cost.
//
// # What is never stored
//
// Interior nodes at the other tree levels between two tile levels are never
// stored: a proof recomputes them from the bottom hashes of their tile.
// Ephemeral nodes (the roots of incomplete subtrees along the right edge of
// a tree whose size is not a power of two) are never stored and never put in
// a tile: their hashes change as the tree grows. A proof that needs one
// folds it from the perfect nodes under it. The tree root is not stored
// either; it is recomputed from the edge, and the signed checkpoint carries it.
//
// # Paths
//
// Tiles are named as in C2SP tlog-tiles, relative to the log prefix:
// tile/<L>/<N>[.p/<W>] for hash tiles and tile/entries/<N>[.p/<W>] for entry
// bundles, N written in 3-digit groups with "x" prefixes (1234067 is
// x001/x234/067). [ParseTilePath] accepts exactly the canonical form. Entry
// bundles are sequences of big-endian uint16 length-prefixed leaves, so a
// leaf is at most [MaxLeafSize] bytes.
//
// # Checkpoints
//
// A checkpoint is a C2SP tlog-checkpoint (origin, decimal size, base64
// root) signed as a C2SP signed note by the log's Ed25519 key, whose key
// name is the origin. [OpenCheckpoint] ignores cosignatures by other keys.
//
// # Promises
//
// The package promises that:
//   - roots, tiles and proofs are those of RFC 6962 and C2SP tlog-tiles;
//     tests check them against golang.org/x/mod/sumdb/tlog as well as
//     transparency-dev/merkle;
//   - appending a batch at once, or leaf by leaf, or across an Edge that was
//     serialised and restored in between, yields the same tiles and roots;
//   - a [Builder] refuses stored partial tiles that disagree with the stored
//     edge ([ErrInconsistentTiles]);
//   - parsers (paths, entry bundles, edges, checkpoints) are strict and never
//     panic on any input.
//
// It does not promise:
//   - durability or atomicity: the caller writes tiles and edge together,
//     in one transaction, and discards a Builder whose batch did not commit;
//   - authenticity of tiles: a [Prover] trusts its [TileReader]; proofs made
//     from corrupt tiles fail verification, but the Prover does not detect it;
//   - anything about sizes the tiles do not cover: asking for a proof beyond
//     the stored tree returns a *[TileError], not a guess.
package merkle
