package statement

import "strings"

// Kind is a statement's "type" field.
type Kind string

const (
	Genesis   Kind = "GENESIS"
	Principal Kind = "PRINCIPAL"
	Confirm   Kind = "CONFIRM"
	Delegate  Kind = "DELEGATE"
	Revoke    Kind = "REVOKE"
	Receipt   Kind = "RECEIPT"
	Stop      Kind = "STOP"
	Resume    Kind = "RESUME"
	Approval  Kind = "APPROVAL"
	Denial    Kind = "DENIAL"
)

// Kinds lists every kind in the order DESIGN §2 gives them.
var Kinds = []Kind{Genesis, Principal, Confirm, Delegate, Revoke, Receipt, Stop, Resume, Approval, Denial}

// Lower is the kind as it appears in a payload type:
// application/vnd.custody.<lower>.v1+json.
func (k Kind) Lower() string { return strings.ToLower(string(k)) }

// PayloadType is the DSSE payloadType of the kind.
func (k Kind) PayloadType() string {
	for i, x := range Kinds {
		if x == k {
			return payloadTypes[i] // no allocation: the ledger asks for every submission
		}
	}
	return payloadType(k)
}

func payloadType(k Kind) string { return "application/vnd.custody." + k.Lower() + ".v1+json" }

// KindOfPayloadType is the inverse of PayloadType; ok is false for any other string.
func KindOfPayloadType(pt string) (Kind, bool) {
	for i, t := range payloadTypes {
		if t == pt {
			return Kinds[i], true
		}
	}
	return "", false
}

// payloadTypes[i] is Kinds[i].PayloadType().
var payloadTypes = func() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = payloadType(k)
	}
	return out
}()

// Valid reports whether k is one of the ten kinds.
func (k Kind) Valid() bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}
