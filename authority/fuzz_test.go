package authority_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// fuzzBase is a log with a depth-3 chain and an open pending receipt, to
// decide fuzzed payloads against. The executor agent agent:acme/exec signs
// them.
func fuzzBase(tb testing.TB) *harness {
	h := newHarness(tb)
	h.genesis(nil)
	h.submit("admin", statement.Principal, obj{"principal_id": "p-alice", "key": "principal:alice"}, opts{})
	h.submit("principal:alice", statement.Confirm, obj{"confirm_id": "c1", "grantee": "agent:acme/root",
		"scope":  obj{"workflow_id": "wf1", "capabilities": []string{"purchase", "refund"}, "targets": []string{"shop/*"}},
		"limits": obj{"usd": 1000}}, opts{})
	h.submit("agent:acme/root", statement.Delegate, obj{"delegation_id": "d1", "parent_ref": "c1", "grantee": "agent:acme/coord",
		"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/*"}}, "limits": obj{"usd": 500}, "ttl_seconds": 3000}, opts{})
	h.submit("agent:acme/coord", statement.Delegate, obj{"delegation_id": "d2", "parent_ref": "d1", "grantee": "agent:acme/exec",
		"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/books/*"}}, "limits": obj{"usd": 300}, "ttl_seconds": 2000}, opts{})
	h.submit("agent:acme/exec", statement.Receipt, obj{"receipt_id": "r1", "authorization_ref": "d2", "action": "purchase",
		"target": "shop/books/1", "reserve": obj{"usd": 10}}, opts{})
	h.submit("agent:acme/exec", statement.Stop, obj{"request_id": "s1", "workflow_id": "wf1", "step_id": "step_9"}, opts{})
	if len(h.leaves) != 7 {
		tb.Fatalf("fuzz base: %d leaves", len(h.leaves))
	}
	h.advance(time.Second)
	h.flush()
	return h
}

// FuzzDecide signs arbitrary payload bytes as a statement of any kind with
// a bound agent's key and decides them. The engine must never panic; a
// denial must yield a valid DENIAL statement; an accepted payload must be
// exactly the canonical form of what was accepted; and the leaf written
// must replay.
func FuzzDecide(f *testing.F) {
	fuzzseed.Add(f)
	h := fuzzBase(f)
	exec := keyFor("agent:acme/exec")
	f.Fuzz(func(t *testing.T, kind uint, payload []byte) {
		k := statement.Kinds[kind%uint(len(statement.Kinds))]
		env, err := sign.Sign(exec.Priv, k.Lower(), payload)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sign.ParseEnvelopeValue(env)
		if err != nil {
			return // empty payload: refused before the engine
		}
		e := authority.New(h.store)
		index := uint64(len(h.leaves))
		d := e.Decide(authority.Submission{Env: p}, index, h.now)
		switch d.Verdict {
		case authority.Refused:
			t.Fatalf("a bound agent's valid signature was refused: %s %s", d.Code, d.Reason)
		case authority.Accepted:
			b, err := statement.Marshal(d.Statement)
			if err != nil || !bytes.Equal(b, payload) {
				t.Fatalf("accepted %q, whose canonical form is %q (%v)", payload, b, err)
			}
			e.Link(index, h.now, d.Statement)
		case authority.Denied:
			if d.Reason == "" || d.Code == "" {
				t.Fatalf("denial without code or reason: %+v", d)
			}
			doc := e.Denial(&d, p, index, h.now, true)
			if _, err := statement.Marshal(doc); err != nil {
				t.Fatalf("the DENIAL for %s is invalid: %v", d.Code, err)
			}
		}
	})
}

// TestWriteFuzzDecideSeeds regenerates testdata/fuzz/FuzzDecide when
// CUSTODY_WRITE_SEEDS=1. The seeds are payloads valid against fuzzBase.
func TestWriteFuzzDecideSeeds(t *testing.T) {
	if os.Getenv("CUSTODY_WRITE_SEEDS") != "1" {
		t.Skip("set CUSTODY_WRITE_SEEDS=1 to regenerate the seeds")
	}
	h := fuzzBase(t)
	exec := keyFor("agent:acme/exec")
	kindIndex := map[statement.Kind]uint{}
	for i, k := range statement.Kinds {
		kindIndex[k] = uint(i)
	}
	type seed struct {
		kind    statement.Kind
		payload []byte
	}
	b := func(kind statement.Kind, o obj, op opts) seed { return seed{kind, h.build(exec, kind, o, op)} }
	seeds := []seed{
		b(statement.Receipt, obj{"receipt_id": "r2", "authorization_ref": "d2", "action": "purchase", "target": "shop/books/2", "reserve": obj{"usd": 5}}, opts{}),
		b(statement.Receipt, obj{"receipt_id": "r1-out", "pending_ref": "r1", "result": "success", "consumed": obj{"usd": 20}}, opts{}),
		b(statement.Receipt, obj{"receipt_id": "r3", "authorization_ref": "d2", "action": "purchase", "target": "shop/books/3", "step_id": "step_9/a", "reserve": obj{"usd": 5}}, opts{}),
		b(statement.Delegate, obj{"delegation_id": "d3", "parent_ref": "d2", "grantee": "agent:acme/deep",
			"scope": obj{"capabilities": []string{"purchase"}, "targets": []string{"shop/books/new/*"}}, "limits": obj{"usd": 30}, "ttl_seconds": 100}, opts{}),
		b(statement.Stop, obj{"request_id": "s2", "workflow_id": "wf1"}, opts{}),
		b(statement.Resume, obj{"resume_id": "res1", "stop_ref": "s1"}, opts{}),
		b(statement.Revoke, obj{"revoke_id": "rv1", "target_ref": "d2"}, opts{}),
		b(statement.Confirm, obj{"confirm_id": "c9", "grantee": "agent:acme/x", "scope": obj{"workflow_id": "wf9", "capabilities": []string{"a"}, "targets": []string{"t"}}}, opts{}),
		b(statement.Receipt, obj{"receipt_id": "r4", "authorization_ref": "d2", "action": "purchase", "target": "shop/books/4", "reserve": obj{"usd": 5}}, opts{form: "indent"}),
		{statement.Receipt, []byte(`{"type":"RECEIPT"}`)},
		{statement.Denial, []byte(`{"actor":"agent:acme/exec","denial_id":"x","envelope_sha256":"` + zeroHash + `","log":"custody.test/log","reason":"r","reason_code":"expired","seq":2,"signer_keyid":"` + zeroHash + `","statement_type":"RECEIPT","timestamp":"2026-03-19T08:00:01Z","type":"DENIAL"}`)},
		{statement.Genesis, []byte(`{"admin_key":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","type":"GENESIS"}`)},
		{statement.Receipt, []byte("\xff\xfe{}")},
		{statement.Receipt, []byte(`[1,2,3]`)},
	}
	dir := filepath.Join(fuzzseed.Dir(), "FuzzDecide")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\nuint(%d)\n[]byte(%s)\n", kindIndex[s.kind], strconv.Quote(string(s.payload)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
