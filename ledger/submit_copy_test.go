package ledger

import (
	"bytes"
	"context"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

// TestSubmitKeepsItsOwnCopy: a caller that reuses its buffer as soon as
// Submit returns cannot change what is logged (a canonical envelope's
// bytes become the leaf's own).
func TestSubmitKeepsItsOwnCopy(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	st := &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: w.id("p"),
		Op: statement.OpEnroll, Name: alice.name, PublicKey: alice.b64()}
	_, raw, err := statement.Sign(w.admin.priv, st)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(raw)
	p, err := w.l.Submit(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw { // the caller reuses its buffer at once
		raw[i] = ' '
	}
	res, err := p.Wait(context.Background())
	if err != nil || res.Verdict != authority.Accepted {
		t.Fatalf("Wait: %+v %v", res, err)
	}
	e, err := w.l.Entry(res.Index)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Envelope.Envelope.Canonical()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the logged envelope is not the one submitted:\n%s\n%s", got, want)
	}
	if err := e.Envelope.Verify(w.admin.pub); err != nil {
		t.Fatalf("the logged envelope does not verify: %v", err)
	}
}
