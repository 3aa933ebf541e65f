// Package verify checks custody evidence offline, with nothing but the
// log's checkpoint verifier key: bundles (DESIGN §6), consistency between
// two checkpoints, and single-entry C2SP tlog-proof files.
//
// # What a bundle proves
//
// A bundle carries a subject entry and the complete history its decision
// rested on: the trust chain (GENESIS and every PRINCIPAL entry up to the
// subject's trust head) and the subject's workflow from its first leaf, each
// with an inclusion proof against one signed checkpoint. Verify checks the
// checkpoint signature, every proof, every envelope signature and canonical
// form, that both back-link chains are complete, and then re-runs the
// ledger's own decision function (package authority) over the entries in
// log order: every accepted statement must be accepted again and every
// DENIAL denied again for the same reason. A ledger that admitted what it
// should have refused is caught.
//
// # What it leaves to a whole-log audit
//
// A key's seq and its identity across workflows, and the uniqueness of ids
// across workflows, need every leaf of the log; the verdict says so in its
// notes, and `custody audit` checks them.
//
// # Dependencies
//
// This package never imports Badger or the ledger, so an auditor's binary
// stays small; a test enforces it.
package verify
