package testlog

import (
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
)

// RogueCase is a log forged by a Rogue that the verifier (on a bundle of
// entry Bad) and the whole-log audit must both reject at entry Bad, each
// with a sentence holding its phrase. testdata/adversarial/rogue/<Name>/
// holds each case as files; TestRogueCases (cmd/custody) checks them.
type RogueCase struct {
	Name    string
	Attack  string // what the rogue log tries
	Defence string // the rule that stops it, with its DESIGN section
	// Verify and Audit are phrases the failure's sentence holds.
	Verify, Audit string
	// AuditCheck is the check custody audit's finding names: "denial"
	// when empty, "decision" for a statement the log should have denied.
	AuditCheck string
	// Build forges the log.
	Build func(tb testing.TB) Forged
}

// Forged is a forged log, the entry to reject and the key set to check it
// with.
type Forged struct {
	R *Rogue
	// Bad is the entry to reject; the bundle is Bad's. With NoEntry the
	// failure concerns no entry (a checkpoint) and names none.
	Bad     uint64
	NoEntry bool
	// Keys is the verifier key set to give the tools ("": R's log key).
	Keys string
}

// VerifierKey is the key set the case is checked with.
func (f Forged) VerifierKey() string {
	if f.Keys != "" {
		return f.Keys
	}
	return f.R.VerifierKey()
}

// Tampered returns env with one character of its signature changed: a
// signature its key never made.
func Tampered(env sign.Envelope) sign.Envelope {
	s := []byte(env.Signatures[0].Sig)
	if s[10] == 'A' {
		s[10] = 'B'
	} else {
		s[10] = 'A'
	}
	env.Signatures = []sign.Signature{{KeyID: env.Signatures[0].KeyID, Sig: string(s)}}
	return env
}

func ptrTo[T any](v T) *T { return &v }

// standardRogue is a Rogue holding the standard scenario (leaves 0-9).
func standardRogue(tb testing.TB) (*Rogue, *Scenario) {
	r := NewRogue(tb, RogueOptions{})
	return r, Standard(r)
}

// RogueDenialCases are forged DENIALs (issue 15, item 1): each is signed by
// the log key and proven in a genuine checkpoint, and each says something
// the bundle itself shows to be false.
func RogueDenialCases() []RogueCase {
	return []RogueCase{{
		Name:    "denial-forged-signature-whole-log-reason",
		Attack:  "a DENIAL of a STOP 'by alice' that alice never signed (garbage signature), with a reason (seq_mismatch) that needs the whole log, on alice's workflow chain",
		Defence: "the verifier checks the denied envelope's signature whenever its signer's key is bound in the bundle (DESIGN §6); a submission whose signature fails is refused, never logged (§4 step 2)",
		Verify:  "bad_signature", Audit: "bad_signature",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Alice, r.Author.StopChain(s.Alice, "s2", StdWorkflow, "forged"))
			s.Alice.Seq--
			return Forged{R: r, Bad: r.DenyForged(Tampered(env), authority.SeqMismatch, "STOP s2: seq forged", Forgery{})}
		},
	}, {
		Name:    "denial-forged-signature-standalone",
		Attack:  "a DENIAL outside every workflow of a CONFIRM 'by bob' with a garbage signature (workflow_owned), which the verifier used to take on the log's word",
		Defence: "bob's key is bound in the trust chain the bundle carries, so the verifier checks the signature (DESIGN §6)",
		Verify:  "bad_signature", Audit: "bad_signature",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Bob, r.Author.Confirm(s.Bob, "c_bob", NewGrant(NewActor("agent:bobs"), StdWorkflow,
				[]string{"airline_portal/*"}, []string{"purchase"}, nil, nil, 600)))
			s.Bob.Seq--
			return Forged{R: r, Bad: r.DenyForged(Tampered(env), authority.WorkflowOwned, "CONFIRM c_bob: forged", Forgery{})}
		},
	}, {
		Name:    "denial-stranger-stop-in-chain",
		Attack:  "an agent of another workflow STOPs alice's workflow; the log puts the DENIAL (identity_conflict, a whole-log reason) on alice's workflow chain as if the agent belonged there",
		Defence: "a DENIAL joins a workflow's chain only if its signer holds or issued a grant in that workflow (DESIGN §4), which the bundle shows (§6)",
		Verify:  "cannot join the workflow's chain", Audit: "reason_code identity_conflict",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			mallory := NewActor("agent:mallory")
			r.Accept(s.Bob, r.Author.Confirm(s.Bob, "c_bob", NewGrant(mallory, "wf_bob", []string{"shop/*"}, []string{"buy"}, nil, nil, 600)))
			env := r.SignAccept(mallory, r.Author.StopChain(mallory, "s_mallory", StdWorkflow, "halt a stranger's work"))
			mallory.Seq--
			return Forged{R: r, Bad: r.DenyForged(env, authority.IdentityConflict, "STOP s_mallory: forged", Forgery{Workflow: ptrTo(StdWorkflow)})}
		},
	}, {
		Name:    "denial-principal-stop-in-chain",
		Attack:  "bob, a principal with no grant in alice's workflow, STOPs it; the log puts the DENIAL (seq_mismatch) on alice's workflow chain",
		Defence: "a DENIAL joins a workflow's chain only if its signer holds or issued a grant in that workflow (DESIGN §4, §6)",
		Verify:  "holds no grant in that workflow", Audit: "reason_code seq_mismatch",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Bob, r.Author.StopChain(s.Bob, "s_bob", StdWorkflow, "not mine to stop"))
			s.Bob.Seq--
			return Forged{R: r, Bad: r.DenyForged(env, authority.SeqMismatch, "STOP s_bob: forged", Forgery{Workflow: ptrTo(StdWorkflow)})}
		},
	}, {
		Name:    "denial-omitted-envelope-no-size",
		Attack:  "a DENIAL that leaves out an envelope that would have fit, hiding what was refused, and says nothing of its size",
		Defence: "a DENIAL leaves its envelope out only when it would not fit (DESIGN §4), and then says its envelope_size so that the verifier and audit check it (§6)",
		Verify:  "without an envelope_size", Audit: "without an envelope_size",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			return Forged{R: r, Bad: r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{Omit: true})}
		},
	}, {
		Name:    "denial-omitted-envelope-that-fits",
		Attack:  "a DENIAL that leaves out an envelope of a few hundred bytes and gives its true envelope_size",
		Defence: "the verifier and audit compute the DENIAL's size with the envelope inside; it would fit, so it must be there (DESIGN §4, §6)",
		Verify:  "it must be included", Audit: "it must be included",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			c, _ := env.Canonical()
			return Forged{R: r, Bad: r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{Omit: true, EnvelopeSize: int64(len(c))})}
		},
	}, {
		Name:    "denial-omitted-envelope-too-large",
		Attack:  "a DENIAL that leaves out its envelope and claims one larger than any the ledger denies",
		Defence: "an envelope over the leaf limit is refused as too_large and never logged (DESIGN §4, §5)",
		Verify:  "refused as too_large", Audit: "refused as too_large",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			return Forged{R: r, Bad: r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{Omit: true, EnvelopeSize: 65500})}
		},
	}}
}

// RogueCases lists every case of testdata/adversarial/rogue.
func RogueCases() []RogueCase {
	return append(append(RogueDenialCases(), RogueKeyCases()...), RogueAuthorityCases()...)
}

func retiredLine(tb testing.TB, vkey string, size uint64, root merkle.Hash) string {
	tb.Helper()
	return merkle.RetiredLine(vkey, size, root)
}

// RetiredKeyPast builds the attack of issue 15, item 7: the honest log
// (the standard scenario) rotates its checkpoint key; the old one, the
// GENESIS log key, still on the host because it signs DENIALs, builds a
// whole new 4-entry log under the same origin, with its own GENESIS (its
// own admin, naming the old key as log key) and a grant of "*". It returns
// the honest log, the forged one, and the honest log's key set after the
// rotation: the new key, and the old one retired at the honest head.
func RetiredKeyPast(tb testing.TB) (honest, forged *Rogue, keys string) {
	tb.Helper()
	honest, _ = standardRogue(tb)
	newKey := NewActorSeed(Origin, "the checkpoint key after the rotation")
	old := honest.VerifierKey()
	keys = newKey.VerifierKey(Origin) + "\n" + retiredLine(tb, old, honest.Size(), honest.Root()) + "\n"

	forged = NewRogue(tb, RogueOptions{Admin: NewActor("admin:forger"), LogKey: honest.LogKey})
	mallory, agent := NewActor("user:mallory"), NewActor("agent:mallory/everything")
	forged.Accept(forged.Admin, forged.Author.Enroll(forged.Admin, mallory, "p_mallory"))
	forged.Accept(mallory, forged.Author.Confirm(mallory, "c_all", NewGrant(agent, StdWorkflow, []string{"*"}, []string{"*"}, nil,
		map[string]int64{"budget_usd": 1_000_000}, 3600)))
	forged.Accept(agent, forged.Author.Pending(agent, "r_all", "c_all", "step_1", "purchase", StdTarget,
		map[string]int64{"budget_usd": 999_999}))
	return honest, forged, keys
}

// RogueKeyCases are logs signed with a retired checkpoint key (item 7).
func RogueKeyCases() []RogueCase {
	return []RogueCase{{
		Name:    "retired-key-other-past",
		Attack:  "after a checkpoint key rotation, the retired key (the GENESIS log key, still on the host to sign DENIALs) signs a different 4-entry log of the same origin: its own GENESIS, a principal, a grant of \"*\" and a receipt spending it",
		Defence: "a retired key is trusted only for the (size, root) it was retired at and checkpoints proven consistent with it (DESIGN §6): the key set pins it as max_size=N root=R",
		Verify:  "signed only by a retired key", Audit: "signed only by a retired key",
		Build: func(tb testing.TB) Forged {
			_, forged, keys := RetiredKeyPast(tb)
			return Forged{R: forged, Bad: forged.Size() - 1, NoEntry: true, Keys: keys}
		},
	}, {
		Name:    "denial-key-retired-signs",
		Attack:  "after the admin rotated the DENIAL key (PRINCIPAL op log_key), the retired key, still on a host, signs a DENIAL of a receipt the booker never had refused",
		Defence: "from the rotation's entry on only the new key signs DENIALs; the old one is retired for good (DESIGN §1), which the trust chain in every bundle shows",
		Verify:  "not the log key", Audit: "not the log key",
		Build: func(tb testing.TB) Forged {
			r, s := standardRogue(tb)
			old := r.DenialKey()
			r.RotateDenialKey("log_key_2", NewActorSeed(Origin, "the DENIAL key after the rotation"))
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			return Forged{R: r, Bad: r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{SignWith: old})}
		},
	}}
}
