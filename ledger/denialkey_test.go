package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// TestRotateDenialKey rotates the DENIAL-signing key end to end (DESIGN
// §1): DENIALs before the rotation stay signed by the GENESIS log key,
// those after it by the new key, bundles of both verify with the
// unchanged checkpoint key, and the ledger refuses a rotation to a key it
// does not hold and will not open without the key its trust chain names.
func TestRotateDenialKey(t *testing.T) {
	w := newWorld(t, Options{})
	opts := Options{Clock: w.clock.Now}
	alice, planner := newActor(t, "user:alice"), newActor(t, "agent:planner")
	w.enroll(alice)
	c := w.confirm(alice, "confirm_1", grant(planner, "wf_1", []string{"db/orders"}, []string{"write"}, nil,
		map[string]int64{"usd": 100}, 3600))
	w.must(alice, c, authority.Accepted, "")
	over := func(id string) *Result {
		return w.must(planner, w.pending(planner, id, "wf_1", "confirm_1", c.ScopeHash, "s1", "write", "db/orders",
			map[string]int64{"usd": 1000}), authority.Denied, authority.LimitExceeded)
	}
	before := over("r1")
	oldID := sign.KeyID(w.l.keys.kr.log.Public().(ed25519.PublicKey))

	// A log_key statement naming a key the ledger does not hold is refused.
	_, stranger, _ := sign.GenerateKey()
	st := &statement.PrincipalDoc{Header: w.header(w.admin, statement.Principal), PrincipalID: "lk_stranger",
		Op: statement.OpLogKey, Name: testOrigin, PublicKey: sign.EncodePublicKey(stranger.Public().(ed25519.PublicKey))}
	size := w.l.Head().Size
	_, err := w.submit(w.admin, st)
	w.admin.seq--
	var de *authority.DecisionError
	if !errors.As(err, &de) || de.Verdict != authority.Refused || !strings.Contains(de.Reason, "not one this ledger holds") {
		t.Fatalf("a rotation to a key the ledger does not hold: %v", err)
	}
	if w.l.Head().Size != size {
		t.Fatal("the refused rotation grew the log")
	}
	vkey := w.l.VerifierKey()
	w.l.Close()

	_, newPriv, _ := sign.GenerateKey()
	if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, "keys/denial-2.key"), newPriv, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := RotateDenialKey(w.dir, "keys/denial-2.key", planner.priv, opts); err == nil {
		t.Fatal("rotated with an agent's key as the admin's")
	}
	r, err := RotateDenialKey(w.dir, "keys/denial-2.key", w.admin.priv, opts)
	if err != nil {
		t.Fatal(err)
	}
	w.admin.seq++
	newID := sign.KeyID(newPriv.Public().(ed25519.PublicKey))
	if r.Old != oldID || r.New != newID {
		t.Fatalf("rotation %+v, want %s -> %s", r, oldID, newID)
	}
	if _, err := AddDenialKey(w.dir, "keys/denial-2.key", opts); err == nil {
		t.Fatal("listed the same DENIAL key twice")
	}
	if w.l, err = Open(w.dir, opts); err != nil {
		t.Fatal(err)
	}
	after := over("r2")
	for _, tc := range []struct {
		res  *Result
		want string
	}{{before, oldID}, {after, newID}} {
		e, err := w.l.Entry(tc.res.Index)
		if err != nil {
			t.Fatal(err)
		}
		if e.Envelope.KeyID != tc.want {
			t.Errorf("DENIAL %d signed by %s, want %s", tc.res.Index, e.Envelope.KeyID, tc.want)
		}
		b, err := w.l.Prove(tc.res.Index, true)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := verify.VerifyBundle(b, vkey); err != nil || !v.Valid {
			t.Fatalf("bundle of DENIAL %d: %v %+v", tc.res.Index, err, v.Failure())
		}
	}
	// Nothing the old or the new DENIAL key signs is a submission (DESIGN
	// §1): a DENIAL posted back is refused and the log does not grow.
	for _, res := range []*Result{before, after} {
		e, err := w.l.Entry(res.Index)
		if err != nil {
			t.Fatal(err)
		}
		posted, err := e.Envelope.Envelope.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		size := w.l.Head().Size
		_, err = w.l.Append(t.Context(), posted)
		var de *authority.DecisionError
		if !errors.As(err, &de) || de.Verdict != authority.Refused || de.Code != authority.BadSignature {
			t.Errorf("DENIAL %d posted back: %v, want a bad_signature refusal", res.Index, err)
		}
		if w.l.Head().Size != size {
			t.Errorf("DENIAL %d posted back grew the log", res.Index)
		}
	}
	if w.l.VerifierKey() != vkey {
		t.Errorf("the checkpoint key set changed: %q -> %q", vkey, w.l.VerifierKey())
	}
	w.replay()

	// Without the new key the ledger does not open.
	w.l.Close()
	path := filepath.Join(w.dir, configName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg config
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.DenialKeys = nil
	data, _ = json.Marshal(cfg)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(w.dir, opts); err == nil || !strings.Contains(err.Error(), "DENIAL key "+newID) {
		t.Fatalf("opened without the DENIAL key its trust chain names: %v", err)
	}
}
