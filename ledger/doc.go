// Package ledger is custody's log: an RFC 6962 Merkle tree of signed
// statements, stored as C2SP tlog-tiles in Badger, with the authority engine
// deciding every submission before it is written.
//
// # The append pipeline
//
// Append hands a submission to a bounded queue. Worker goroutines (one per
// core) check its envelope and verify its signature in parallel. A single
// sequencer takes submissions in arrival order, deduplicates them, runs the
// authority engine (package authority) and gathers a batch; the batch's
// leaves, new tiles, indexes, the engine's changed state records, the tree
// edge and the newly signed checkpoint are written in ONE Badger
// transaction with SyncWrites. Only after that commit does Append return,
// with the entry's index, the checkpoint and an inclusion proof.
//
// # Promises
//
//   - An acknowledged entry is durable: it survives kill -9 and power loss.
//   - The log never signs two inconsistent checkpoints: a checkpoint is
//     signed over the tree the same transaction commits, and is shown to no
//     one before that commit.
//   - Opening a ledger does not replay the log: it reads the edge, the
//     latest checkpoint and at most one partial tile per tile level.
//   - Bad input never corrupts the log: a submission is refused, or denied
//     and recorded as a DENIAL, and the ledger keeps working.
//   - One process owns a data folder; a second Open fails.
//
// # What it does not promise
//
// Availability under a full disk (appends fail with an error until space
// returns) and protection against an operator who deletes the folder.
package ledger
