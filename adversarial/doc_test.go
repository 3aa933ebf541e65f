// Package adversarial_test runs custody's adversarial corpus
// (testdata/adversarial/*.json) against a real ledger: for each case it
// creates a Badger-backed log with ledger.Init in a temporary folder,
// builds and signs the case's submissions from symbolic keys, submits them
// through ledger.Append, and checks every verdict and reason code, that
// refusals append nothing, that duplicates append nothing, and finally that
// a fresh authority engine replaying every leaf reproduces every decision
// and the stored state byte for byte.
//
// # Case files
//
// A case is one JSON file:
//
//	{"class": "widening", "attack": "...", "defence": "...",
//	 "options": {"denial_burst": 3},      // optional log/ledger parameters
//	 "setup": ["basic", "chain"],         // testdata/adversarial/setup/<name>.json, in order
//	 "steps": [ {...}, ... ]}
//
// A step names its signer by handle ("user:alice", "agent:acme/root",
// "admin", "log"); the key is derived from the handle (SHA-256 of
// "custody/adversarial\x00" + handle is the Ed25519 seed), and the handle
// is also the name the key is bound under unless the log says otherwise.
// `set` holds the statement's fields; the runner fills in type, timestamp,
// log, actor, seq, scope hashes, grantee keys and the references a
// statement's kind implies, exactly as an honest client would, so a case
// spells out only what the attack changes. The step fields that deviate
// from an honest client (ts_offset, seq_delta, drop, sign_as, present_as,
// keyid, sig_op, payload_edit, envelope_edit, raw_payload) are documented
// on the step type below.
//
// Strings in `set`, in edits and in raw text may hold placeholders:
// {{key:H}} and {{keyid:H}} (a handle's public key and key id),
// {{rawkey:NAME}} and {{rawkeyid:NAME}} (the special keys: identity,
// order2, order4, order8, order8b, zero, y_eq_p, mixed8), {{hash:ID}} (an
// accepted grant's scope_hash), {{rep:N:S}} (S repeated N times),
// {{byte:HH}} (one raw byte, in edits and raw text only), {{seq}},
// {{ts}} and {{log}} (this statement's header values), {{n}} (the repeat
// counter), and in envelope edits {{payload}}, {{sig}}, {{keyid}}, {{type}}.
//
// # Expectations
//
// `expect` is "accepted", "denied/<reason_code>" or "refused/<code>".
// Races (`race`) submit several statements at once; the ledger picks an
// order, and `outcomes` (by order) or `by_position` say what each order
// must yield, so the check is that the log is consistent with the order
// the ledger chose.
package adversarial_test
