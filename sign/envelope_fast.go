package sign

import (
	"errors"

	"github.com/custodylog/custody/canon"
)

// The ledger parses every submission's envelope and stores its canonical
// form. Honest clients send that form already (Envelope.Canonical), so the
// functions here read it without reflection and reuse the bytes instead of
// re-encoding them; anything else goes the reflection path, which decides
// and explains (see canon.Reader). FuzzFastEnvelope checks that both paths
// agree.

// ParseEnvelopeCanonical is ParseEnvelope that also returns the envelope's
// canonical JSON, as Envelope.Canonical would. When data is already
// canonical, as an honest client sends it, the canonical form is data
// itself (not a copy) and nothing is re-encoded. An error from encoding is
// returned as is (it cannot happen for an envelope ParseEnvelope accepts).
func ParseEnvelopeCanonical(data []byte) (*Parsed, []byte, error) {
	if env, ok := readEnvelope(data); ok {
		p, err := parseFields(env)
		if err != nil {
			return nil, nil, err
		}
		return p, data, nil
	}
	p, err := parseEnvelopeReflect(data)
	if err != nil {
		return nil, nil, err
	}
	c, err := p.Envelope.Canonical()
	if err != nil {
		return nil, nil, err
	}
	return p, c, nil
}

// parseEnvelopeReflect is ParseEnvelope by canon's reflection-based
// decoder: the reference, and the path that explains every rejection.
func parseEnvelopeReflect(data []byte) (*Parsed, error) {
	var env Envelope
	if err := canon.UnmarshalRelaxed(data, &env); err != nil {
		var ce *canon.Error
		if errors.As(err, &ce) {
			return nil, &Error{Code: CodeEnvelope, Field: ce.Path, Msg: ce.Msg, Err: err}
		}
		return nil, &Error{Code: CodeEnvelope, Msg: "malformed JSON", Err: err}
	}
	return parseFields(env)
}

// readEnvelope decodes an envelope in canonical form; ok is false for
// anything else, including envelopes that are merely written differently.
func readEnvelope(data []byte) (Envelope, bool) {
	r := canon.NewReader(data)
	env, ok := ReadCanonicalEnvelope(&r)
	return env, ok && r.Done()
}

// ReadCanonicalEnvelope reads an envelope object in canonical form from r,
// as decoding it into an Envelope with canon would (closed schema, every
// field required), for decoders of documents that embed one. ok is false
// for anything else; the caller must then decode the whole document with
// canon, which decides and explains (see canon.Reader).
func ReadCanonicalEnvelope(r *canon.Reader) (env Envelope, ok bool) {
	var n int
	ok = r.Object(func(k []byte) bool {
		n++
		var ok bool
		switch string(k) {
		case "payload":
			env.Payload, ok = r.String()
		case "payloadType":
			env.PayloadType, ok = r.String()
		case "signatures":
			ok = r.Array(func() bool {
				var s Signature
				var m int
				ok := r.Object(func(k []byte) bool {
					m++
					var ok bool
					switch string(k) {
					case "keyid":
						s.KeyID, ok = r.String()
					case "sig":
						s.Sig, ok = r.String()
					}
					return ok
				}) && m == 2
				env.Signatures = append(env.Signatures, s)
				return ok
			})
		}
		return ok
	})
	return env, ok && n == 3
}

// appendCanonical appends the canonical JSON of e as canon.Marshal writes
// it; ok is false where Marshal would fail (no signatures, invalid UTF-8),
// and the caller must let Marshal say why.
func (e *Envelope) appendCanonical(b []byte) (_ []byte, ok bool) {
	if len(e.Signatures) == 0 {
		return b, false
	}
	b = append(b, `{"payload":`...)
	if b, ok = canon.AppendString(b, e.Payload); !ok {
		return b, false
	}
	b = append(b, `,"payloadType":`...)
	if b, ok = canon.AppendString(b, e.PayloadType); !ok {
		return b, false
	}
	b = append(b, `,"signatures":[`...)
	for i, s := range e.Signatures {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"keyid":`...)
		if b, ok = canon.AppendString(b, s.KeyID); !ok {
			return b, false
		}
		b = append(b, `,"sig":`...)
		if b, ok = canon.AppendString(b, s.Sig); !ok {
			return b, false
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), true
}
