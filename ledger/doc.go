// Package ledger is custody's log: an RFC 6962 Merkle tree of signed
// statements in the C2SP tlog-tiles layout, with the authority engine
// deciding every submission before it is written. It decides; a store
// (package storage: a data folder, PostgreSQL, or any other driver behind
// the same seam) keeps what it decided.
//
// # The append pipeline
//
// Submit hands a submission to a bounded queue. Worker goroutines (one per
// core) check its envelope and verify its signature in parallel. A single
// sequencer takes submissions in arrival order, deduplicates them, runs the
// authority engine (package authority) and gathers a batch; the batch's
// leaves, changed tiles, dedup indexes, the engine's changed state records,
// the tree edge and the newly signed checkpoint go to the store as one
// storage.Batch, committed in one durable transaction and fenced by the
// tree size it extends. The checkpoint is then written to the signed-head
// file outside the store, and only after that is each submitter answered,
// with the entry's index, the checkpoint and an inclusion proof. The
// sequencer decides the next batch while one commits.
//
// # Many servers, one sequencer
//
// On a store with a sequencer lease (storage.Leaser: PostgreSQL) any
// number of processes open the same log; the one holding the lease
// sequences, the others follow the head (storage.HeadWatcher, or a poll)
// and refuse appends with a NotLeaderError naming the leader. Every commit
// is fenced by the lease's epoch, so a paused or partitioned former leader
// can write nothing.
//
// # Parts
//
// A Ledger is a facade over small parts; each is a type in its own file
// that owns its fields and says in its doc comment what it owns and how
// it is locked, and the Ledger's methods delegate to them:
//
//   - sequencer (pipeline.go): the append pipeline above: the queues,
//     the verify workers, the sequencer goroutine and the state it alone
//     touches (the authority engine, the tree builder, the batch in
//     flight, the workflow index of the batches in flight), each batch's
//     commit, and the (re)load of that state from the store at open and
//     at a takeover of the lease;
//   - reader (readers.go, with read.go, prove.go, wfindex.go and
//     approvals.go): every read of the committed log (entries, records,
//     proofs, tiles, bundles, the workflow index, held receipts), and the
//     prover's proof cache;
//   - signingKeys (keys.go): the keys the log signs with and the key set
//     verifiers hold; the offline steps that change them are in
//     rotate.go (checkpoint keys) and denialkey.go (DENIAL keys);
//   - leadership (lease.go): the sequencer lease of a shared store, the
//     role and its counters; the lease loop drives it and keeps a
//     follower's head current;
//   - heads (watch.go): the published head and the subscribers told of
//     each new one (Watch, WatchWorkflow);
//   - headFile (signedhead.go): the signed-head file kept outside the
//     store;
//   - stats (stats.go): the commit counters behind Stats.
//
// The decisions are made in package authority alone; the sequencer calls
// it, and the reader reads what it left.
//
// # Promises
//
//   - An acknowledged entry is durable: it survives kill -9 and power loss.
//   - The log never signs two inconsistent checkpoints: a checkpoint is
//     signed over the tree the same transaction commits, and is shown to no
//     one before that commit and the signed-head write.
//   - A store that comes back behind what the ledger acknowledged is
//     refused at open (the signed head), whatever the store.
//   - Opening a ledger does not replay the log: it reads the edge, the
//     latest checkpoint and at most one partial tile per tile level.
//   - Bad input never corrupts the log: a submission is refused, or denied
//     and recorded as a DENIAL, and the ledger keeps working.
//   - At most one process sequences a log: the data folder's lock, or the
//     store's fenced lease.
//
// # What it does not promise
//
// Availability under a full disk (appends fail with an error until space
// returns) or while the database is away, and protection against an
// operator who deletes the folder or the database.
package ledger
