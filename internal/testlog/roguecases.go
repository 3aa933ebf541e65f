package testlog

import (
	"testing"

	"github.com/custodylog/custody/authority"
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
	// Build forges the log and returns it with the entry to reject.
	Build func(tb testing.TB) (*Rogue, uint64)
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
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Alice, r.Author.StopChain(s.Alice, "s2", StdWorkflow, "forged"))
			s.Alice.Seq--
			return r, r.DenyForged(Tampered(env), authority.SeqMismatch, "STOP s2: seq forged", Forgery{})
		},
	}, {
		Name:    "denial-forged-signature-standalone",
		Attack:  "a DENIAL outside every workflow of a CONFIRM 'by bob' with a garbage signature (workflow_owned), which the verifier used to take on the log's word",
		Defence: "bob's key is bound in the trust chain the bundle carries, so the verifier checks the signature (DESIGN §6)",
		Verify:  "bad_signature", Audit: "bad_signature",
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Bob, r.Author.Confirm(s.Bob, "c_bob", NewGrant(NewActor("agent:bobs"), StdWorkflow,
				[]string{"airline_portal/*"}, []string{"purchase"}, nil, nil, 600)))
			s.Bob.Seq--
			return r, r.DenyForged(Tampered(env), authority.WorkflowOwned, "CONFIRM c_bob: forged", Forgery{})
		},
	}, {
		Name:    "denial-stranger-stop-in-chain",
		Attack:  "an agent of another workflow STOPs alice's workflow; the log puts the DENIAL (identity_conflict, a whole-log reason) on alice's workflow chain as if the agent belonged there",
		Defence: "a DENIAL joins a workflow's chain only if its signer holds or issued a grant in that workflow (DESIGN §4), which the bundle shows (§6)",
		Verify:  "cannot join the workflow's chain", Audit: "reason_code identity_conflict",
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			mallory := NewActor("agent:mallory")
			r.Accept(s.Bob, r.Author.Confirm(s.Bob, "c_bob", NewGrant(mallory, "wf_bob", []string{"shop/*"}, []string{"buy"}, nil, nil, 600)))
			env := r.SignAccept(mallory, r.Author.StopChain(mallory, "s_mallory", StdWorkflow, "halt a stranger's work"))
			mallory.Seq--
			return r, r.DenyForged(env, authority.IdentityConflict, "STOP s_mallory: forged", Forgery{Workflow: ptrTo(StdWorkflow)})
		},
	}, {
		Name:    "denial-principal-stop-in-chain",
		Attack:  "bob, a principal with no grant in alice's workflow, STOPs it; the log puts the DENIAL (seq_mismatch) on alice's workflow chain",
		Defence: "a DENIAL joins a workflow's chain only if its signer holds or issued a grant in that workflow (DESIGN §4, §6)",
		Verify:  "holds no grant in that workflow", Audit: "reason_code seq_mismatch",
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Bob, r.Author.StopChain(s.Bob, "s_bob", StdWorkflow, "not mine to stop"))
			s.Bob.Seq--
			return r, r.DenyForged(env, authority.SeqMismatch, "STOP s_bob: forged", Forgery{Workflow: ptrTo(StdWorkflow)})
		},
	}, {
		Name:    "denial-omitted-envelope-no-size",
		Attack:  "a DENIAL that leaves out an envelope that would have fit, hiding what was refused, and says nothing of its size",
		Defence: "a DENIAL leaves its envelope out only when it would not fit (DESIGN §4), and then says its envelope_size so that the verifier and audit check it (§6)",
		Verify:  "without an envelope_size", Audit: "without an envelope_size",
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			return r, r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{Omit: true})
		},
	}, {
		Name:    "denial-omitted-envelope-that-fits",
		Attack:  "a DENIAL that leaves out an envelope of a few hundred bytes and gives its true envelope_size",
		Defence: "the verifier and audit compute the DENIAL's size with the envelope inside; it would fit, so it must be there (DESIGN §4, §6)",
		Verify:  "it must be included", Audit: "it must be included",
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			c, _ := env.Canonical()
			return r, r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{Omit: true, EnvelopeSize: int64(len(c))})
		},
	}, {
		Name:    "denial-omitted-envelope-too-large",
		Attack:  "a DENIAL that leaves out its envelope and claims one larger than any the ledger denies",
		Defence: "an envelope over the leaf limit is refused as too_large and never logged (DESIGN §4, §5)",
		Verify:  "refused as too_large", Audit: "refused as too_large",
		Build: func(tb testing.TB) (*Rogue, uint64) {
			r, s := standardRogue(tb)
			env := r.SignAccept(s.Booker, r.Author.Pending(s.Booker, "r3", "d3", "step_2", "purchase", StdTarget,
				map[string]int64{"budget_usd": 10, "max_side_effects": 0}))
			s.Booker.Seq--
			return r, r.DenyForged(env, authority.WorkflowStopped, "RECEIPT r3: stopped", Forgery{Omit: true, EnvelopeSize: 65500})
		},
	}}
}

// RogueCases lists every case of testdata/adversarial/rogue.
func RogueCases() []RogueCase {
	return RogueDenialCases()
}
