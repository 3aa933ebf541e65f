// Package canon reads and writes custody's canonical JSON: RFC 8785 (JCS)
// bytes under the strict profile of DESIGN §1.
//
// # The profile
//
// A document is accepted only when it is valid UTF-8 with no lone
// surrogates, has no duplicate keys, no null, no empty array or object, and
// every number is an integer n with |n| <= 2^53-1 written without fraction,
// exponent or "-0". Unmarshal and Parse further require that the bytes are
// exactly the JCS encoding of what they parse to; UnmarshalRelaxed and
// ParseRelaxed waive only that last rule (whitespace, key order and escape
// spelling), for files people write by hand and for transport wrappers.
//
// # Closed schemas
//
// Decoding into a Go struct matches keys by exact, case-sensitive name
// (encoding/json does not), rejects unknown keys, and rejects a missing
// field unless its tag says omitempty. A field tagged `json:"name"` is
// required; `json:"name,omitempty"` is optional and omitted when zero.
//
// # Errors
//
// Every failure is an *Error naming the path of the offending value
// ("scope.targets[1]") and one of two codes: CodeNonCanonical for breaches of
// the byte-level profile, CodeSchemaInvalid for breaches of the schema.
//
// # What it does not promise
//
// canon knows nothing of custody's statements; identifiers, enums and value
// ranges are checked by the packages that own them. RawJSON values are
// written verbatim: the caller vouches that they are canonical.
package canon
