package ledger

import (
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// TestOwnKeysNeverSubmit: an envelope signed by one of the log's own keys
// (the log key, a checkpoint key current or retired) is refused before
// sequencing, with bad_signature, and the log does not grow (DESIGN §1).
// A logged DENIAL posted back is the attack: without this, each repost
// logged a new DENIAL that could be posted again.
func TestOwnKeysNeverSubmit(t *testing.T) {
	w := newWorld(t, Options{})
	alice, planner := newActor(t, "user:alice"), newActor(t, "agent:planner")
	w.enroll(alice)
	c := w.confirm(alice, "confirm_1", grant(planner, "wf_1", []string{"db/orders"}, []string{"write"}, nil,
		map[string]int64{"usd": 100}, 3600))
	w.must(alice, c, authority.Accepted, "")
	res := w.must(planner, w.pending(planner, "r1", "wf_1", "confirm_1", c.ScopeHash, "s1", "write", "db/orders",
		map[string]int64{"usd": 1000}), authority.Denied, authority.LimitExceeded)
	denial, err := w.l.Entry(res.Index)
	if err != nil {
		t.Fatal(err)
	}
	posted, err := denial.Envelope.Envelope.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	refused := func(env []byte, what string) {
		t.Helper()
		size := w.l.Head().Size
		_, err := w.l.Append(t.Context(), env)
		var de *authority.DecisionError
		if !errors.As(err, &de) || de.Verdict != authority.Refused || de.Code != authority.BadSignature || !strings.Contains(de.Reason, "never a submission") {
			t.Errorf("%s: %v, want a bad_signature refusal", what, err)
		}
		if got := w.l.Head().Size; got != size {
			t.Errorf("%s: the log grew from %d to %d", what, size, got)
		}
	}
	refused(posted, "a logged DENIAL posted back")
	refused(posted, "the same DENIAL again")

	// A checkpoint key, once retired, signs nothing either.
	w.l.Close()
	_, cpPriv, _ := sign.GenerateKey()
	if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, "keys/checkpoint-2.key"), cpPriv, nil, false); err != nil {
		t.Fatal(err)
	}
	opts := Options{Clock: w.clock.Now}
	if _, err := RotateCheckpointKey(w.dir, "keys/checkpoint-2.key", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := FinishRotation(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	if w.l, err = Open(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	refused(posted, "a DENIAL by the log key, now a retired checkpoint key, posted back")
	st := &statement.PrincipalDoc{Header: statement.Header{Type: statement.Principal, Timestamp: statement.FormatTimestamp(w.clock.Now()),
		Log: testOrigin, Actor: "checkpoint", Seq: 1}, PrincipalID: "p_cp", Op: statement.OpEnroll, Name: "user:cp",
		PublicKey: sign.EncodePublicKey(cpPriv.Public().(ed25519.PublicKey))}
	_, raw, err := statement.Sign(cpPriv, st)
	if err != nil {
		t.Fatal(err)
	}
	refused(raw, "a statement signed by the current checkpoint key")
}

// TestWorkerVerifiesBeforeParsing: the verify worker parses a payload only
// after its signature verified (DESIGN §1: verify first, then parse the
// same bytes), so an unsigned payload never reaches the parser.
func TestWorkerVerifiesBeforeParsing(t *testing.T) {
	w := newWorld(t, Options{})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	st := &statement.PrincipalDoc{Header: w.header(alice, statement.Principal), PrincipalID: "p_x", Op: statement.OpEnroll,
		Name: "user:x", PublicKey: alice.b64()}
	env, _, err := statement.Sign(alice.priv, st)
	if err != nil {
		t.Fatal(err)
	}
	env.Payload = env.Payload[:len(env.Payload)-4] + "AAAA" // other bytes, same signature
	raw, err := env.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	req := &request{data: raw, ready: make(chan struct{})}
	w.l.seq.check(req)
	if req.refusal == nil || req.refusal.Code != authority.BadSignature {
		t.Fatalf("refusal %v, want bad_signature", req.refusal)
	}
	if req.parsed || req.stmt != nil || req.parseErr != nil {
		t.Errorf("the worker parsed a payload whose signature did not verify (stmt %v, err %v)", req.stmt, req.parseErr)
	}
}
