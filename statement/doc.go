// Package statement defines custody's nine statement kinds and the log leaf
// that carries them, exactly as DESIGN §2 and §5 fix them on the wire.
//
// # What it promises
//
// Parse accepts a payload only when it is canonical JSON under the strict
// profile (package canon), its "type" matches the envelope's payload type,
// it fits its kind's closed schema, and every field is well formed:
// identifiers follow the grammar of DESIGN §1, timestamps are RFC 3339 UTC
// whole seconds, enums hold one of their values, and fields that only make
// sense together appear together. Errors are *canon.Error values whose Code
// is "non_canonical" or "schema_invalid" and whose Path names the field.
//
// # What it does not promise
//
// Nothing here consults the log. Whether the signer may issue the statement,
// whether its references resolve, whether its scope attenuates its parent's
// or whether its budget holds is decided by package authority.
package statement
