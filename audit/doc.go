// Package audit checks a whole custody log, and watches a served one.
//
// # Audit
//
// [Run] reads a log through a [Fetcher] in the C2SP tlog-tiles layout
// (checkpoint, tile/<L>/<N>[.p/<W>], tile/entries/<N>[.p/<W>]): an exported
// folder ([Dir]), a web server ([HTTP]), or a ledger's own storage behind
// the same interface. It needs no database and trusts nothing it reads
// except the log's verifier key. It
//
//   - checks the checkpoint's signature against the key;
//   - recomputes every hash tile and the root from the leaves and compares
//     them with the stored tiles and the checkpoint;
//   - re-decides every leaf from GENESIS with the ledger's own decision
//     function (authority.New over an empty store, Replay for each leaf),
//     which verifies every envelope's signature and catches an accepted
//     statement that should have been denied, a DENIAL that was not
//     justified, a wrong back-link or trust head, acceptance times going
//     backwards, and what a bundle cannot show: each key's seq across the
//     whole log and the uniqueness of every id;
//   - optionally compares the state a ledger stored with the state the
//     replay derives, record by record.
//
// It keeps going after a finding where it can. After a decision finding
// the decision engine's state is unspecified, so the replay stops there;
// the tree, root and envelope checks still run to the end (envelopes are
// then checked against the key bindings seen so far).
//
// Agent behaviour that the ledger accepts by design but flags (an outcome
// that consumed more than its reserve; a pending receipt with no outcome)
// is reported as a flag, not a finding: it says nothing against the log.
//
// # Watch
//
// [Watch] is one step of a monitor: it fetches a served checkpoint, checks
// its signature, and checks that it extends the last checkpoint the
// monitor kept by computing the consistency proof itself from the served
// tiles. A split view (same size, different root), a rollback (smaller
// size) or an inconsistent extension is an alert. [WatchWitnessed] adds a
// witness policy: a checkpoint that does not meet it is not kept.
//
// [Report.WriteText] prints a report for people (custody audit), free text
// escaped; the report itself is what --json prints.
package audit
