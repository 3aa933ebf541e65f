package ledger

import (
	"bytes"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/statement"
)

// FuzzDecodeEntry feeds arbitrary leaf bytes to DecodeEntry (what every
// read of the log, export and `custody get` go through). It never panics;
// an accepted leaf is exactly the canonical leaf its parts encode to, its
// statement is the kind its payload type names, and the statement encodes
// back to the very payload bytes that were signed (one statement, one
// spelling).
func FuzzDecodeEntry(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, index uint64, raw []byte) {
		e, err := DecodeEntry(index, raw)
		if err != nil {
			if e != nil {
				t.Fatal("an entry and an error")
			}
			return
		}
		if e.Index != index || !bytes.Equal(e.Leaf, raw) || e.Statement == nil || e.Envelope == nil {
			t.Fatalf("incomplete entry %+v", e)
		}
		if len(raw) > statement.MaxLeafSize {
			t.Fatalf("accepted a leaf of %d bytes", len(raw))
		}
		env, err := e.Envelope.Envelope.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		again, err := statement.MarshalLeaf(&statement.Leaf{Envelope: env, LoggedAt: statement.FormatLoggedAt(e.LoggedAt),
			PrevInWorkflow: e.Prev, TrustHead: e.TrustHead})
		if err != nil {
			t.Fatalf("re-encoding an accepted leaf: %v", err)
		}
		if !bytes.Equal(again, raw) {
			t.Fatalf("accepted a leaf that is not canonical:\n%s\nre-encodes as\n%s", raw, again)
		}
		if k, ok := statement.KindOfPayloadType(e.Envelope.PayloadType); !ok || k != e.Kind() {
			t.Fatalf("statement of kind %s under payload type %s", e.Kind(), e.Envelope.PayloadType)
		}
		payload, err := statement.Marshal(e.Statement)
		if err != nil {
			t.Fatalf("re-encoding an accepted statement: %v", err)
		}
		if !bytes.Equal(payload, e.Envelope.Payload) {
			t.Fatalf("statement re-encodes differently:\n%s\nsigned\n%s", payload, e.Envelope.Payload)
		}
	})
}
