// Package replay is the incident responder's view of one workflow: who
// authorised what, when, under which scope, what was blocked, and where it
// was stopped.
//
// # What it is built from
//
// A [Report] is built from a workflow bundle (verify.Bundle: the trust
// chain and the workflow's complete back-link chain, each entry with an
// inclusion proof against one signed checkpoint) and the log's verifier
// key. [Build] first runs verify.VerifyBundle, the auditor's checks:
// checkpoint signature, every inclusion proof, both back-link chains, and a
// re-run of every decision with the ledger's own decision function. It
// then replays the same entries with authority.NewView to read the
// authority state they imply (grants, what each has spent, STOPs, pending
// receipts). Where the bundle comes from (a local ledger, a file, a
// server) does not matter: every fact is checked here.
//
// # What it promises
//
// Every row of the timeline says whether it was verified. A bundle that
// fails verification still produces a report: the failure is named (the
// check, the entry and the values), the entry that failed is marked
// FAILED and entries whose checks did not run are marked unverified. No
// fact is hidden because it failed.
//
// Untrusted text (reasons, identifiers, free text) is escaped for the
// output it goes to: control and bidirectional characters in text
// (internal/textsafe), HTML-escaped in the HTML page, quoted in DOT.
//
// # What needs attention
//
// The report lists, most serious first: a verification failure; denied
// attempts to escalate (widening, equal_scope, depth_exceeded,
// principal_mismatch, not_grantee, not_principal, ...); other denials;
// outcomes that consumed more than their pending receipt reserved;
// pending receipts with no outcome (in flight, or lost); outcomes
// recorded after a STOP (steps that were already running); and
// timestamps far from the ledger's logged time.
//
// # What it does not do
//
// A bundle holds one workflow. What needs the whole log (each key's seq
// across workflows, identities bound elsewhere, global id uniqueness) is
// left to `custody audit`, and the report says so.
package replay
