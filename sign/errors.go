package sign

import (
	"errors"
	"strings"
)

// Error codes. They are stable: the ledger reports them to submitters and
// tests match on them.
const (
	// CodeEnvelope: the envelope is not a well-formed custody DSSE envelope
	// (JSON shape, closed schema, base64, key id syntax, payload type, number
	// of signatures). DESIGN §4 step 1: refused, not logged.
	CodeEnvelope = "envelope_invalid"
	// CodeSignature: the signature does not verify under the named key, or
	// the key does not match the envelope's key id. DESIGN §4 step 2:
	// refused, not logged.
	CodeSignature = "signature_invalid"
	// CodeKey: a public key is malformed, non-canonical, not a point on the
	// curve, of small order, or outside the prime-order subgroup.
	CodeKey = "key_invalid"
	// CodePrivateKey: a private key file could not be read or decrypted.
	CodePrivateKey = "private_key_invalid"
)

// Error is the error type returned by this package's parsers and verifiers.
// Code is one of the Code* constants, Field names the offending field (a JSON
// field such as "signatures[0].sig", or "public_key"), and Msg states the rule
// that was broken. Err, if set, is the underlying cause.
type Error struct {
	Code  string
	Field string
	Msg   string
	Err   error
}

func (e *Error) Error() string {
	s := e.Code + ": "
	if e.Field != "" {
		s += e.Field + ": "
	}
	s += e.Msg
	// A cause that says what Field and Msg already say (canon's error,
	// kept for errors.As) is not said twice.
	if e.Err != nil && !strings.HasSuffix(s, e.Err.Error()) {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel for e's code, so that
// errors.Is(err, sign.ErrSignature) works on any *Error with CodeSignature.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Field == "" && t.Msg == "" && t.Err == nil && t.Code == e.Code
}

// Sentinels for errors.Is, one per code.
var (
	ErrEnvelope   = &Error{Code: CodeEnvelope}
	ErrSignature  = &Error{Code: CodeSignature}
	ErrKey        = &Error{Code: CodeKey}
	ErrPrivateKey = &Error{Code: CodePrivateKey}
)

// ErrWrongPassphrase is returned (wrapped in an *Error with CodePrivateKey)
// when an encrypted private key does not decrypt with the given passphrase.
var ErrWrongPassphrase = errors.New("wrong passphrase or corrupted key")

// ErrNoPassphrase is returned when a key is encrypted and no passphrase
// source is available.
var ErrNoPassphrase = errors.New("no passphrase available")

func envErr(field, msg string) error { return &Error{Code: CodeEnvelope, Field: field, Msg: msg} }
func keyErr(field, msg string) error { return &Error{Code: CodeKey, Field: field, Msg: msg} }
func privErr(msg string, err error) error {
	return &Error{Code: CodePrivateKey, Msg: msg, Err: err}
}
