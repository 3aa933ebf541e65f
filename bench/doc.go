// Package bench measures custody: the figures `custody bench` prints and
// docs/BENCHMARKS.md records.
//
// Every measurement runs against a fresh ledger in a temporary folder, with
// the same code paths a runtime uses: Append and Submit through the
// pipeline, durable (fsynced, one Badger transaction per batch) and
// answered only under a signed checkpoint.
//
// # What is measured
//
//   - VerifyCeiling: raw parallel Ed25519 verifies of a receipt envelope on
//     all cores. No ledger can accept signed submissions faster than it can
//     check their signatures, so this is the ceiling authorised appends are
//     compared with.
//   - AuthorizedAppends: pre-signed RECEIPTs under depth-3 chains (pending
//     ones reserving budget and their outcomes), with 1 in 20 from a rogue
//     agent outside its scope and denied (a DENIAL is logged), every check
//     of DESIGN §4 on.
//   - LogOnlyAppends: ~400-byte raw leaves through Options.LogOnly and
//     AppendLeaves, the log without authority: the figure to compare with
//     other logs (Tessera).
//   - BuildBigLog and MeasureBigLog: a log of Size entries (raw leaves, plus
//     a real depth-3 workflow at both ends), then open time, inclusion
//     proofs/s, bundles built/s (ledger.Prove), bundles verified/s offline
//     (verify.VerifyBundle), disk bytes per entry and peak RSS.
//   - RunPeer: the Tessera POSIX peer in bench/peers/tessera, a separate
//     module, run with `go run`.
//
// No test asserts on wall-clock time; the tests here only keep a tiny
// configuration working.
package bench
