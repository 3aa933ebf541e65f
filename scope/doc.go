// Package scope decides what a grant allows: the grammar of identifiers and
// patterns, canonical pattern sets, the scope descriptor and its hash, and
// the attenuation, principal and depth rules of DESIGN §3. It is pure: no
// I/O, no clock, no state. The ledger and the verifier both call it, so each
// rule is decided in one place.
//
// # Identifiers
//
// Ids, names, workflow and step ids, targets, capabilities, principals and
// limit keys are identifiers: 1..256 bytes of A-Z a-z 0-9 . _ : @ + = -,
// with '/' between segments, no empty segment and no segment made only of
// dots. They are ASCII, so bytewise order is the only order.
//
// # Patterns and sets
//
// A pattern is an identifier (matching itself), "prefix/*" (every
// identifier below "prefix/", one or more segments; not "prefix" itself),
// or "*" (every identifier). '*' is only ever a whole final segment, and a
// pattern is at most 256 bytes. A set is canonical when sorted bytewise,
// free of duplicates and of elements covered by another element, and, for
// the optional sets step_ids and principals, absent rather than ["*"].
// Containment of one canonical set in another is decided element by
// element with PatternCovers.
//
// # The descriptor and its hash
//
// A Descriptor is derived from a grant by Derive (expires_at = timestamp +
// ttl_seconds) and hashed as
//
//	scope_hash = hex(SHA-256("custody/scope/v1\x00" || JCS(descriptor)))
//
// with JCS from package canon. Only canonical descriptors have a hash.
//
// # Attenuation
//
// Attenuates decides whether a child grant is a strictly narrower part of
// its parent, returning the first failing rule in a fixed, documented order
// (see Attenuates). "Narrower" is about meaning: a child whose sets
// enumerate everything a parent wildcard matches (possible only for a
// wildcard within a byte or two of the 256-byte limit) is a transfer, and
// is rejected as equal_scope. CheckGrantee applies ancestors' principals to
// a DELEGATE's grantee; CheckDepth bounds the chain; InScope checks a
// RECEIPT's action, target and step against its grant.
//
// # Errors
//
// Every failure is an *Error whose Code is one of the exported Code
// constants (the reason codes of DESIGN §4) and whose Msg names the
// element and the values that broke the rule. Untrusted strings in
// messages are quoted with every non-ASCII and control character escaped.
//
// # What it does not promise
//
// It does not check liveness (expiry against the ledger clock, revocation,
// STOPs), limits' spending, ttl_seconds against max_ttl_seconds, or that a
// statement references the right grant: those belong to the authority
// package. It does not parse statements; it is handed their fields.
package scope
