package api

import "strconv"

// HeaderStreamStep names the header with which a runtime opens the event
// stream of the workflow it is executing a step in:
//
//	Custody-Stream-Step: <index of its pending RECEIPT> <std base64 Ed25519 signature>
//
// the signature, by the key that signed that RECEIPT, over
// StreamStepMessage. The server gives such a stream capacity no other
// client can take (server.Options.MaxStepStreams).
const HeaderStreamStep = "Custody-Stream-Step"

// StreamStepMessage is what a runtime signs to open its step's stream:
// the log's origin, the workflow and the pending RECEIPT's index, each on
// its own line after a fixed first line (no statement payload starts so,
// so the signature cannot be taken for a statement's).
func StreamStepMessage(origin, workflow string, step uint64) []byte {
	return []byte("custody event stream for a step v1\n" + origin + "\n" + workflow + "\n" + strconv.FormatUint(step, 10) + "\n")
}
