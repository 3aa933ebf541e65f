// Package testlog is test support for custody: named actors with Ed25519
// keys and seq counters, a settable clock, a [World] that drives a real
// ledger (Badger, in a temporary folder), and a [Rogue] log that skips
// admission entirely.
//
// # World
//
// A World is ledger.Init in t.TempDir() with fixed admin and log keys and a
// clock the test moves. Its helpers build statements with an [Author]
// (headers with the log's origin, the clock's time and each actor's next
// seq; scope hashes sealed with statement.Seal), sign them with
// statement.Sign and submit them with ledger.Append, returning the
// ledger.Result. [World.Standard] builds the standard scenario every
// verifier test starts from.
//
// # Rogue
//
// A Rogue is what a compromised or buggy ledger would write: it appends any
// signed statement as an accepted leaf, with correct back-links
// (prev_in_workflow per workflow, the GENESIS/PRINCIPAL chain, trust_head),
// and it can write DENIAL leaves signed with the log key for any envelope
// and any reason code. It keeps its tree as C2SP tiles in a map through
// merkle.Builder, signs checkpoints with merkle.SignCheckpoint and builds
// bundles in the verify.Bundle format with proofs from merkle.InclusionProof.
// Everything it signs is genuinely signed; only its decisions are wrong.
// A verifier that trusts the ledger's decisions is fooled by it; one that
// re-runs them is not.
//
// # Statements as objects
//
// Tests that write statements field by field, including fields and
// values no Go type allows (the authority tests and the adversarial
// corpus), share [Obj], [GrantHash], [SetDefault], [DeepCopy] and
// deterministic [KeyFor] keys, each package under its own key domain.
//
// # Keys
//
// [NewActor] derives its key from the actor's name, so logs built twice
// are the same but for acceptance times, and seed corpora can be
// regenerated. Two logs that must not share keys use [NewActorSeed].
//
// This package imports the ledger (and so Badger); only tests import it.
package testlog
