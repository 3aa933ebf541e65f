// Package sign holds custody's keys and signed envelopes (DESIGN §1): Ed25519
// key generation, key ids, public-key validation, PEM key files, DSSE v1
// envelopes, and the one check of a passkey (WebAuthn) signature.
//
// # Keys
//
// Keys are Ed25519 (crypto/ed25519), except that a principal may enroll a
// passkey (below). A key id is the
// lowercase hex SHA-256 of the 32-byte public key. Inside a statement a
// public key is the standard base64 of its 32 raw bytes; ParsePublicKey reads
// that form strictly (canonical base64, exactly 32 bytes) and CheckPublicKey
// accepts only a canonical encoding (y < p, no sign bit on x = 0) of a point
// on the curve of prime order L: the eight small-order points (libsodium's
// blocklist, RFC 8032 §5.1.3) and points with a small-order component are
// rejected, by computing the order, not only by list.
//
// # Files
//
// Private keys are PKCS#8 PEM ("PRIVATE KEY"), the format of `openssl
// genpkey -algorithm ed25519`, or passphrase-encrypted PKCS#8 ("ENCRYPTED
// PRIVATE KEY", PBES2 of RFC 8018). Writing uses scrypt (N=2^14, r=8, p=1,
// 16-byte salt) and AES-256-CBC; reading also accepts PBKDF2-HMAC-SHA256,
// i.e. what `openssl pkcs8 -topk8 -v2 aes-256-cbc [-scrypt]` writes. Private
// key files are created with mode 0600, never overwritten unless asked,
// and fsynced with their directory. Public keys are PKIX PEM ("PUBLIC KEY").
//
// # Envelopes
//
// A statement is signed in a DSSE v1 envelope with exactly one signature,
// over PAE(payloadType, payload) where payloadType is
// application/vnd.custody.<kind>.v1+json, so a signature made for one kind
// never verifies as another. ParseEnvelope checks shape (DESIGN §4 step 1,
// CodeEnvelope), Parsed.Verify the signature (step 2, CodeSignature);
// both failures are refused, not logged. DedupHash names a submission for
// deduplication.
//
// # Passkeys
//
// A principal's passkey is a WebAuthn credential (ES256 on P-256, or
// Ed25519), enrolled by its SPKI DER (one encoding per key, key id its
// SHA-256), relying party id and origins (NewPasskey). A passkey envelope's
// sig is the canonical JSON {authenticator_data, client_data_json,
// signature}; VerifyPasskey checks it by the relying-party steps of W3C
// WebAuthn Level 3 §7.2, with the statement's PAE hash as the challenge,
// using the standard library only. Parsed.VerifyKey verifies an envelope
// under either kind of key. A passkey envelope's DedupHash is over
// (payloadType, payload, keyid), since ECDSA signatures are malleable and
// randomised.
//
// # What it does not promise
//
// sign does not parse or validate the statement inside an envelope (its
// schema, canonical form, or that its `type` matches the payload type): that
// belongs to the statement package, which must parse exactly the Payload
// bytes that Verify checked. It does not find keys by id or know which keys
// are bound. It does not protect private keys in memory beyond clearing
// buffers it owns, and never prints or logs them. Parsed.Verify trusts the
// caller to pass a key that passed CheckPublicKey when it was bound; it
// repeats only a cheap small-order blocklist.
package sign
