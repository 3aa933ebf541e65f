// Package witness reads witness policies and checks witness cosignatures
// on custody checkpoints. It imports nothing of the ledger, so the offline
// verifier carries it.
//
// # Cosignatures
//
// A witness (C2SP tlog-witness) checks that each checkpoint it is shown is
// consistent with the last one it saw of the same log, and answers with a
// cosignature: a signed-note signature line (C2SP tlog-cosignature,
// cosignature/v1, Ed25519)
//
//	— <witness key name> base64(key ID || timestamp || signature)
//
// where the key ID is SHA-256(name || "\n" || 0x04 || public key)[:4], the
// timestamp is 8 bytes big-endian (POSIX seconds), and the signature is
// Ed25519 over
//
//	cosignature/v1
//	time <timestamp>
//	<the checkpoint's body: origin, size, root, each line ending in "\n">
//
// Cosignature lines are appended to the checkpoint's own signature lines;
// the body never changes, so a reader that does not know the witnesses
// still verifies the checkpoint with the log's key alone.
//
// # Policies
//
// A policy is the text Tessera's NewWitnessGroupFromPolicy reads (the
// sigsum policy format with signed-note verifier keys): one statement a
// line, "#" starts a comment, blank lines are ignored.
//
//	log VKEY [URL]                  the log (ignored here; for other tools)
//	witness NAME VKEY [URL]         a witness: its verifier key and base URL
//	group NAME N|any|all MEMBER...  N of the members (witnesses or groups
//	                                defined above) must be satisfied
//	quorum NAME|none                the component that must be satisfied
//
// VKEY is a signed-note verifier key of type 0x04 (cosignature/v1) or of
// type 0x01 (plain Ed25519, read as the same key's cosignature/v1 key, as
// Tessera does). The URL is where the log sends add-checkpoint requests;
// a verifier does not need it. Names are unique and never a keyword.
package witness
