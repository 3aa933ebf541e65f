// Package authority is custody's one decision function: given the state
// derived from a log and a signed submission, it decides, in the order of
// DESIGN §4, whether the submission is accepted, denied (and so recorded as
// a DENIAL) or refused (not logged at all), and updates the state.
//
// # Who uses it
//
// The ledger runs it in its sequencer for every submission, over state kept
// in Badger. The offline verifier runs the very same code over state built
// in memory from a bundle, so a ledger that admitted what it should have
// refused is caught. Replay (Engine.Replay) re-runs every leaf of a log and
// requires each to be decided exactly as it was.
//
// # State
//
// State lives in records behind the Store interface, cached in the Engine
// as Go values. Changes made while deciding a batch are tracked; the ledger
// writes them (Engine.Dirty) in the same transaction as the batch's leaves
// and then calls Engine.Committed, or Engine.Discard if the commit failed.
//
// # Determinism
//
// A decision depends only on the state (the log's earlier entries), the
// submission's bytes and the acceptance time the caller supplies. Nothing
// reads a clock, a random source or a map's iteration order.
//
// # What it does not do
//
// It does not verify envelope shape or parse base64 (package sign does),
// deduplicate identical submissions or rate-limit denials (the ledger
// does), or touch the Merkle tree.
package authority
