package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/internal/author"
	"github.com/custodylog/custody/internal/cmd/keycmd"
	"github.com/custodylog/custody/internal/cmd/ledgercmd"
	"github.com/custodylog/custody/internal/cmd/signcmd"
	"github.com/custodylog/custody/internal/entryview"
	"github.com/custodylog/custody/internal/submit"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
)

// result is one run of the tool.
type result struct {
	code           int
	stdout, stderr string
}

// custody runs the tool in-process with args (without the program name).
func custody(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := runIO(context.Background(), append([]string{"custody"}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// must runs the tool and requires the exit code.
func must(t *testing.T, code int, args ...string) result {
	t.Helper()
	r := custody(t, "", args...)
	if r.code != code {
		t.Fatalf("custody %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r
}

func init() {
	// Tests pass --dir and never prompt.
	os.Unsetenv("CUSTODY_DIR")
	os.Unsetenv(sign.PassphraseEnv)
}

// commandPaths lists every command of the tree, as argument lists.
func commandPaths(c *cli.Command, prefix []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands {
		p := append(append([]string(nil), prefix...), sub.Name)
		out = append(out, p)
		out = append(out, commandPaths(sub, p)...)
	}
	return out
}

func TestHelpEveryCommand(t *testing.T) {
	paths := commandPaths(newApp(nil, nil, nil), nil)
	if len(paths) < 20 {
		t.Fatalf("only %d commands", len(paths))
	}
	for _, p := range append(paths, nil) {
		r := custody(t, "", append(p, "--help")...)
		if r.code != 0 {
			t.Errorf("%v --help: exit %d: %s", p, r.code, r.stderr)
			continue
		}
		_, example, _ := strings.Cut(r.stdout, "Example:\n\n")
		if !strings.Contains(r.stdout, "DESCRIPTION:") || !strings.Contains(example, "custody ") {
			t.Errorf("%v --help has no description with an example:\n%s", p, r.stdout)
		}
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none")
	for _, tc := range []struct {
		args []string
		code int
		err  string // in stderr
	}{
		{[]string{"version"}, 0, ""},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"key", "frob"}, 2, `unknown command "frob"`},
		{[]string{"get", "--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"get", "--dir", missing}, 2, "exactly one of --index and --id"},
		{[]string{"get", "--dir", missing, "--index", "x"}, 2, "invalid value"},
		{[]string{"proof", "inclusion", "--dir", missing}, 2, `"index" not set`},
		{[]string{"key", "public"}, 2, "missing the key FILE"},
		{[]string{"get", "--dir", missing, "--index", "0"}, 1, "custody: opening the ledger: no ledger in"},
		{[]string{"key", "public", filepath.Join(dir, "nope.key")}, 1, "custody: key public:"},
		{[]string{"init", "--dir", dir, "--origin", "bad origin"}, 1, "custody: init: origin"},
		{[]string{"init", "--dir", dir, "--origin", "x.example/log", "--max-depth", "0"}, 2, "--max-depth"},
	} {
		r := custody(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.err) {
			t.Errorf("custody %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.err)
		}
		if tc.code == 2 && !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("custody %s: a usage error should point at --help: %q", strings.Join(tc.args, " "), r.stderr)
		}
	}
}

func TestKeyGenerate(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "alice.key")
	r := must(t, 0, "key", "generate", "--out", key, "--name", "user:alice", "--json")
	var info keycmd.KeyInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(key)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", fi.Mode(), err)
	}
	before, _ := os.ReadFile(key)
	if strings.Contains(r.stdout, "PRIVATE") || strings.Contains(r.stdout, string(before)) {
		t.Fatal("private key material printed")
	}
	priv, err := sign.ReadPrivateKeyFile(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pub := priv.Public().(ed25519.PublicKey); info.PublicKey != sign.EncodePublicKey(pub) || info.KeyID != sign.KeyID(pub) || info.Name != "user:alice" {
		t.Fatalf("printed %+v", info)
	}

	// It refuses to overwrite, and the file is untouched.
	r = must(t, 1, "key", "generate", "--out", key)
	if !strings.Contains(r.stderr, "already exists") || !strings.Contains(r.stderr, "--force") {
		t.Errorf("overwrite refusal: %q", r.stderr)
	}
	if after, _ := os.ReadFile(key); !bytes.Equal(before, after) {
		t.Fatal("key file changed")
	}
	must(t, 0, "key", "generate", "--out", key, "--force")
	if after, _ := os.ReadFile(key); bytes.Equal(before, after) {
		t.Fatal("--force did not replace the key")
	}

	// key public reads a private key, a public PEM and the base64 key alike.
	r = must(t, 0, "key", "public", key)
	pemOut := must(t, 0, "key", "public", "--pem", key).stdout
	pubFile := filepath.Join(dir, "alice.pub")
	os.WriteFile(pubFile, []byte(pemOut), 0o644)
	if r2 := must(t, 0, "key", "public", pubFile); r2.stdout != r.stdout {
		t.Errorf("public PEM: %q, private: %q", r2.stdout, r.stdout)
	}
	b64 := strings.Fields(r.stdout)[2]
	if r3 := must(t, 0, "key", "public", b64); r3.stdout != r.stdout {
		t.Errorf("base64: %q, private: %q", r3.stdout, r.stdout)
	}

	// Encrypted, with the passphrase from the environment.
	enc := filepath.Join(dir, "enc.key")
	t.Setenv(sign.PassphraseEnv, "correct horse")
	must(t, 0, "key", "generate", "--out", enc, "--encrypt")
	data, _ := os.ReadFile(enc)
	if !bytes.Contains(data, []byte("ENCRYPTED PRIVATE KEY")) {
		t.Fatal("not encrypted")
	}
	must(t, 0, "key", "public", enc)
	t.Setenv(sign.PassphraseEnv, "wrong")
	if r := must(t, 1, "key", "public", enc); !strings.Contains(r.stderr, "wrong passphrase") {
		t.Errorf("wrong passphrase: %q", r.stderr)
	}
}

// The scope descriptor of DESIGN §3 and its hash.
const (
	designDescriptor = `{"capabilities":["purchase","submit_form"],"expires_at":"2026-03-19T08:27:00Z",
 "limits":{"budget_usd":800,"max_side_effects":1},"step_ids":["step_2","step_3"],
 "targets":["airline_portal/account_123"],"workflow_id":"wf_9f3a"}`
	designScopeHash = "621bb415e7267780004a1086e34284f13fb7f6ab00b623770320cd41e31a3358"
)

func TestScopeHashAndCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parent := write("parent.json", designDescriptor)
	if r := must(t, 0, "scope", "hash", parent); r.stdout != designScopeHash+"\n" {
		t.Errorf("scope hash = %q", r.stdout)
	}
	if r := custody(t, designDescriptor, "scope", "hash", "--json", "-"); r.code != 0 || !strings.Contains(r.stdout, `"scope_hash": "`+designScopeHash+`"`) {
		t.Errorf("scope hash --json from stdin: %+v", r)
	}
	child := write("child.json", `{"capabilities":["purchase"],"expires_at":"2026-03-19T08:22:00Z",
		"limits":{"budget_usd":742,"max_side_effects":1},"step_ids":["step_3"],
		"targets":["airline_portal/account_123"],"workflow_id":"wf_9f3a"}`)
	if r := must(t, 0, "scope", "check", "--parent", parent, "--child", child); r.stdout != "ok\n" {
		t.Errorf("check ok: %q", r.stdout)
	}
	if r := must(t, 3, "scope", "check", "--parent", parent, "--child", child, "--child-revocable=false"); !strings.HasPrefix(r.stdout, "revocability_widened: ") {
		t.Errorf("revocability: %q", r.stdout)
	}
	wide := write("wide.json", `{"capabilities":["purchase","refund"],"expires_at":"2026-03-19T08:22:00Z",
		"limits":{"budget_usd":742,"max_side_effects":1},"targets":["airline_portal/account_123"],"workflow_id":"wf_9f3a"}`)
	r := must(t, 3, "scope", "check", "--parent", parent, "--child", wide)
	if !strings.HasPrefix(r.stdout, "widening: ") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("widening: %q", r.stdout)
	}
	r = must(t, 3, "scope", "check", "--parent", parent, "--child", parent, "--json")
	var v signcmd.ScopeVerdict
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.OK || v.ReasonCode != "equal_scope" {
		t.Errorf("equal scope --json: %q, %v", r.stdout, err)
	}
	// DESIGN §3: at max_depth a principals set is no narrowing.
	principals := write("principals.json", strings.Replace(designDescriptor, `"step_ids"`, `"principals":["agent:acme/*"],"step_ids"`, 1))
	if r := must(t, 0, "scope", "check", "--parent", parent, "--child", principals, "--child-depth", "2"); r.stdout != "ok\n" {
		t.Errorf("principals below max_depth: %q", r.stdout)
	}
	if r := must(t, 3, "scope", "check", "--parent", parent, "--child", principals, "--child-depth", "3"); !strings.HasPrefix(r.stdout, "equal_scope: ") || !strings.Contains(r.stdout, "max_depth") {
		t.Errorf("principals at max_depth: %q", r.stdout)
	}
	if r := must(t, 0, "scope", "check", "--parent", parent, "--child", principals, "--child-depth", "3", "--max-depth", "4"); r.stdout != "ok\n" {
		t.Errorf("principals below --max-depth 4: %q", r.stdout)
	}
	must(t, 2, "scope", "check", "--parent", parent, "--child", principals, "--child-depth", "4")
	bad := write("bad.json", `{"capabilities":["submit_form","purchase"],"expires_at":"2026-03-19T08:22:00Z","targets":["a"],"workflow_id":"wf_9f3a"}`)
	if r := must(t, 1, "scope", "hash", bad); !strings.Contains(r.stderr, "custody: scope: ") {
		t.Errorf("non-canonical descriptor: %q", r.stderr)
	}
}

// knownAnswers is the part of testdata/known-answers.json this test uses.
type knownAnswers struct {
	Envelope struct {
		CanonicalPayload  string          `json:"canonical_payload"`
		Envelope          json.RawMessage `json:"envelope"`
		PrivateKeySeedHex string          `json:"private_key_seed_hex"`
	} `json:"envelope"`
}

func TestSignKnownAnswer(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/known-answers.json")
	if err != nil {
		t.Fatal(err)
	}
	var ka knownAnswers
	if err := json.Unmarshal(raw, &ka); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seed, _ := hex.DecodeString(ka.Envelope.PrivateKeySeedHex)
	key := filepath.Join(dir, "alice.key")
	if err := sign.WritePrivateKeyFile(key, ed25519.NewKeyFromSeed(seed), nil, false); err != nil {
		t.Fatal(err)
	}
	// The statement as a person would write it: indented, keys in any order.
	var pretty bytes.Buffer
	json.Indent(&pretty, []byte(ka.Envelope.CanonicalPayload), "", "    ")
	stmt := filepath.Join(dir, "confirm.json")
	os.WriteFile(stmt, pretty.Bytes(), 0o644)
	want, err := canon.Canonicalize(ka.Envelope.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	if r := must(t, 0, "sign", "--key", key, stmt); r.stdout != string(want)+"\n" {
		t.Errorf("sign =\n%s\nwant\n%s", r.stdout, want)
	}
	// --seal recomputes the same scope_hash.
	if r := must(t, 0, "sign", "--key", key, "--seal", stmt); r.stdout != string(want)+"\n" {
		t.Errorf("sign --seal =\n%s\nwant\n%s", r.stdout, want)
	}

	// Without scope_hash: an explanation, or --seal.
	var m map[string]any
	json.Unmarshal([]byte(ka.Envelope.CanonicalPayload), &m)
	delete(m, "scope_hash")
	noHash, _ := json.MarshalIndent(m, "", " ")
	r := custody(t, string(noHash), "sign", "--key", key, "-")
	if r.code != 1 || !strings.Contains(r.stderr, "custody confirm fills it") || !strings.Contains(r.stderr, "--seal") {
		t.Errorf("missing scope_hash: %+v", r)
	}
	if r := custody(t, string(noHash), "sign", "--key", key, "--seal", "-"); r.code != 0 || r.stdout != string(want)+"\n" {
		t.Errorf("--seal from stdin: %+v", r)
	}

	// A wrong scope_hash is signed as given, with a warning.
	m["scope_hash"] = strings.Repeat("ab", 32)
	wrong, _ := json.Marshal(m)
	if r := custody(t, string(wrong), "sign", "--key", key, "-"); r.code != 0 || !strings.Contains(r.stderr, "scope_hash_mismatch") {
		t.Errorf("wrong scope_hash: %+v", r)
	}
	// Schema errors name the field.
	m["surprise"] = true
	extra, _ := json.Marshal(m)
	if r := custody(t, string(extra), "sign", "--key", key, "--seal", "-"); r.code != 1 || !strings.Contains(r.stderr, "surprise") {
		t.Errorf("unknown field: %+v", r)
	}
}

// ledgerEnv is a ledger made with custody init plus key files.
type ledgerEnv struct {
	t    *testing.T
	root string
	dir  string
	keys map[string]string // name -> key file
}

func newLedgerEnv(t *testing.T) *ledgerEnv {
	root := t.TempDir()
	e := &ledgerEnv{t: t, root: root, dir: filepath.Join(root, "data"), keys: map[string]string{}}
	r := must(t, 0, "init", "--dir", e.dir, "--origin", "test.example/custody", "--json")
	var info ledgercmd.InitInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatal(err)
	}
	if info.Size != 1 || info.MaxDepth != 3 || !strings.HasPrefix(info.VerifierKey, "test.example/custody+") {
		t.Fatalf("init: %+v", info)
	}
	e.keys["admin"] = info.AdminKeyFile
	return e
}

func (e *ledgerEnv) key(name string) string {
	if f, ok := e.keys[name]; ok {
		return f
	}
	f := filepath.Join(e.root, strings.NewReplacer(":", "_", "/", "_").Replace(name)+".key")
	must(e.t, 0, "key", "generate", "--out", f)
	e.keys[name] = f
	return f
}

// run runs a command against the ledger (--dir is added) and requires the
// exit code.
func (e *ledgerEnv) run(code int, args ...string) result {
	e.t.Helper()
	return must(e.t, code, append(args, "--dir", e.dir)...)
}

// decision runs an authoring command with --json and decodes its answer.
func (e *ledgerEnv) decision(code int, args ...string) author.Outcome {
	e.t.Helper()
	r := e.run(code, append(args, "--json")...)
	var d author.Outcome
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		e.t.Fatalf("%v: %v\n%s", args, err, r.stdout)
	}
	return d
}

func TestRoundTrip(t *testing.T) {
	e := newLedgerEnv(t)
	alice, planner, booker := e.key("user:alice"), e.key("agent:planner"), e.key("agent:planner/booker")

	d := e.decision(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:alice", "--public-key", alice)
	if d.Verdict != "accepted" || *d.Index != 1 || d.Kind != "PRINCIPAL" {
		t.Fatalf("enroll: %+v", d)
	}
	// Sets given out of order and with duplicates are made canonical.
	r := e.run(0, "confirm", "--key", alice, "--grantee", "agent:planner", "--grantee-key", planner,
		"--workflow", "wf_9f3a", "--step", "step_3", "--step", "step_2", "--step", "step_3",
		"--target", "airline_portal/account_123", "--capability", "submit_form", "--capability", "purchase",
		"--limit", "budget_usd=800", "--limit", "max_side_effects=1", "--ttl", "15m", "--risk", "high", "--id", "confirm_42c1")
	if !strings.HasPrefix(r.stdout, "accepted: CONFIRM confirm_42c1 at index 2 (checkpoint size 3)\nscope_hash ") {
		t.Fatalf("confirm: %q", r.stdout)
	}
	d = e.decision(0, "delegate", "--key", planner, "--parent", "confirm_42c1", "--grantee", "agent:planner/booker",
		"--grantee-key", booker, "--step", "step_3", "--target", "airline_portal/account_123", "--capability", "purchase",
		"--limit", "budget_usd=742", "--limit", "max_side_effects=1", "--ttl", "10m", "--id", "del_booker")
	if d.Verdict != "accepted" || *d.Index != 3 || len(d.ScopeHash) != 64 {
		t.Fatalf("delegate: %+v", d)
	}
	d = e.decision(0, "receipt", "--key", booker, "--auth", "del_booker", "--step", "step_3", "--action", "purchase",
		"--target", "airline_portal/account_123", "--reserve", "budget_usd=742", "--reserve", "max_side_effects=1", "--id", "rcpt_1")
	if d.Verdict != "accepted" || d.CheckpointSize != 5 || len(d.InclusionProof) == 0 || d.Checkpoint == "" {
		t.Fatalf("pending: %+v", d)
	}
	// The answer's proof verifies against the answer's checkpoint.
	verifierKey := strings.TrimSpace(e.run(0, "checkpoint", "--verifier-key").stdout)
	cp, err := merkle.OpenCheckpoint([]byte(d.Checkpoint), "test.example/custody", verifierKey)
	if err != nil {
		t.Fatal(err)
	}
	var entry entryview.Entry
	if err := json.Unmarshal([]byte(e.run(0, "get", "--id", "rcpt_1", "--json").stdout), &entry); err != nil {
		t.Fatal(err)
	}
	leafHash, _ := merkle.ParseHash(entry.LeafHash)
	if err := merkle.VerifyInclusion(*d.Index, cp.Size, leafHash, parseHashes(t, d.InclusionProof), cp.Root); err != nil {
		t.Fatal(err)
	}
	// The outcome takes its grant, step, action and target from the pending receipt.
	d = e.decision(0, "receipt", "--key", booker, "--result", "success", "--pending-ref", "rcpt_1",
		"--consumed", "budget_usd=742", "--consumed", "max_side_effects=1", "--side-effect", "booking_ref=XK42, seat 3A",
		"--evidence", "mail from the airline, 08:14")
	if d.Verdict != "accepted" {
		t.Fatalf("outcome: %+v", d)
	}

	// Over budget: denied, exit 3, the reason on stderr, a DENIAL logged.
	r = e.run(3, "receipt", "--key", booker, "--auth", "del_booker", "--step", "step_3", "--action", "purchase",
		"--target", "airline_portal/account_123", "--reserve", "budget_usd=1", "--reserve", "max_side_effects=0", "--id", "rcpt_2")
	if !strings.HasPrefix(r.stderr, "denied: limit_exceeded: ") || !strings.Contains(r.stderr, "(DENIAL at index 6)") || r.stdout != "" {
		t.Fatalf("over budget: %+v", r)
	}
	d = e.decision(3, "delegate", "--key", planner, "--parent", "confirm_42c1", "--grantee", "agent:planner/scout",
		"--grantee-key", e.key("agent:planner/scout"), "--target", "airline_portal/account_123",
		"--capability", "purchase", "--capability", "refund", "--limit", "budget_usd=10", "--limit", "max_side_effects=1", "--ttl", "5m")
	if d.Verdict != "denied" || d.ReasonCode != "widening" || *d.Index != 7 {
		t.Fatalf("widening: %+v", d)
	}
	// A key the ledger does not know is refused before anything is logged.
	r = e.run(1, "stop", "--key", e.key("nobody"), "--workflow", "wf_9f3a", "--scope", "chain", "--reason", "x")
	if !strings.Contains(r.stderr, "is not bound in the ledger") {
		t.Fatalf("unbound key: %+v", r)
	}
	r = e.run(3, "stop", "--key", e.key("nobody"), "--actor", "agent:nobody", "--workflow", "wf_9f3a", "--scope", "chain", "--reason", "x")
	if !strings.HasPrefix(r.stderr, "refused: unknown_key: ") {
		t.Fatalf("unknown key: %+v", r)
	}
	// STOP, RESUME, REVOKE, with the workflow read from the entries.
	e.decision(0, "stop", "--key", alice, "--workflow", "wf_9f3a", "--scope", "step", "--step", "step_3",
		"--takeover", "pause", "--reason", "look at the \u202egnp.exe receipt", "--id", "stop_1")
	e.decision(0, "resume", "--key", alice, "--stop-ref", "stop_1")
	d = e.decision(0, "revoke", "--key", alice, "--grant", "del_booker", "--reason", "trip booked")
	if d.Verdict != "accepted" || *d.Index != 10 {
		t.Fatalf("revoke: %+v", d)
	}

	// get: the fields, the back-links, free text escaped.
	r = e.run(0, "get", "--id", "stop_1")
	for _, want := range []string{"entry 8 of 11", "kind              STOP", "actor             user:alice",
		"workflow          wf_9f3a", "prev_in_workflow  7", "trust_head        1", `\u202egnp.exe`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get stop_1: no %q in\n%s", want, r.stdout)
		}
	}
	if strings.ContainsRune(r.stdout, '\u202e') {
		t.Error("get printed a raw bidi override")
	}
	r = e.run(0, "get", "--index", "6")
	for _, want := range []string{"kind              DENIAL", "decision          denied RECEIPT rcpt_2: limit_exceeded: ", "denied statement:\n{\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get 6: no %q in\n%s", want, r.stdout)
		}
	}
	if err := json.Unmarshal([]byte(e.run(0, "get", "--index", "6", "--json").stdout), &entry); err != nil || entry.Denial == nil || entry.Denial.ReasonCode != "limit_exceeded" || entry.Denial.StatementID != "rcpt_2" {
		t.Fatalf("get 6 --json: %+v, %v", entry, err)
	}
	if r := e.run(1, "get", "--id", "no_such"); !strings.Contains(r.stderr, "not found") {
		t.Errorf("get missing id: %q", r.stderr)
	}

	// checkpoint and proofs.
	r = e.run(0, "checkpoint")
	cp, err = merkle.OpenCheckpoint([]byte(r.stdout), "test.example/custody", verifierKey)
	if err != nil || cp.Size != 11 {
		t.Fatalf("checkpoint %+v, %v", cp, err)
	}
	var ci ledgercmd.CheckpointInfo
	if err := json.Unmarshal([]byte(e.run(0, "checkpoint", "--json").stdout), &ci); err != nil || ci.Size != 11 || ci.Checkpoint != r.stdout || ci.VerifierKey != verifierKey {
		t.Fatalf("checkpoint --json %+v, %v", ci, err)
	}
	for i := uint64(0); i < cp.Size; i++ {
		var inc api.Inclusion
		if err := json.Unmarshal([]byte(e.run(0, "proof", "inclusion", "--index", itoa(i), "--json").stdout), &inc); err != nil {
			t.Fatal(err)
		}
		lh, _ := merkle.ParseHash(inc.LeafHash)
		if err := merkle.VerifyInclusion(i, cp.Size, lh, parseHashes(t, inc.Proof), cp.Root); err != nil || inc.Checkpoint != r.stdout {
			t.Fatalf("inclusion %d: %v", i, err)
		}
		// The text form is the same hashes, one per line.
		text := e.run(0, "proof", "inclusion", "--index", itoa(i)).stdout
		if want := strings.Join(inc.Proof, "\n"); strings.TrimSuffix(text, "\n") != want {
			t.Fatalf("inclusion %d text %q, json %q", i, text, want)
		}
	}
	var cons api.Consistency
	if err := json.Unmarshal([]byte(e.run(0, "proof", "consistency", "--from", "5", "--to", "11", "--json").stdout), &cons); err != nil {
		t.Fatal(err)
	}
	r1, _ := merkle.ParseHash(cons.FromRoot)
	if err := merkle.VerifyConsistency(5, 11, parseHashes(t, cons.Proof), r1, cp.Root); err != nil || cons.ToRoot != cp.Root.String() {
		t.Fatalf("consistency: %v", err)
	}
	if r := e.run(1, "proof", "inclusion", "--index", "11"); !strings.Contains(r.stderr, "no inclusion proof") {
		t.Errorf("inclusion past the end: %q", r.stderr)
	}

	// export: the checkpoint and tiles, and again incrementally.
	out := filepath.Join(e.root, "tiles")
	r = e.run(0, "export", "--tiles", out)
	if !strings.Contains(r.stdout, "at size 11") {
		t.Errorf("export: %q", r.stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "checkpoint")); string(got) != ci.Checkpoint {
		t.Errorf("exported checkpoint %q", got)
	}
	for _, p := range []string{"tile/0/000.p/11", "tile/entries/000.p/11"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Errorf("export: %v", err)
		}
	}
	bundle, _ := os.ReadFile(filepath.Join(out, "tile/entries/000.p/11"))
	leaves, err := merkle.DecodeEntryBundle(bundle)
	if err != nil || len(leaves) != 11 || merkle.LeafHash(leaves[2]).String() != mustEntry(t, e, "2").LeafHash {
		t.Fatalf("entry bundle: %d leaves, %v", len(leaves), err)
	}
	if r := e.run(0, "export", "--tiles", out, "--json"); !strings.Contains(r.stdout, `"files_written": 1`) {
		t.Errorf("second export: %s", r.stdout)
	}
}

func mustEntry(t *testing.T, e *ledgerEnv, index string) entryview.Entry {
	var entry entryview.Entry
	if err := json.Unmarshal([]byte(e.run(0, "get", "--index", index, "--json").stdout), &entry); err != nil {
		t.Fatal(err)
	}
	return entry
}

func parseHashes(t *testing.T, ss []string) []merkle.Hash {
	out := make([]merkle.Hash, len(ss))
	for i, s := range ss {
		h, err := merkle.ParseHash(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = h
	}
	return out
}

func itoa(i uint64) string { return strconv.FormatUint(i, 10) }

func TestAppend(t *testing.T) {
	e := newLedgerEnv(t)
	alice, planner := e.key("user:alice"), e.key("agent:planner")
	// Envelopes made offline with --out (seq, log and actor from the ledger).
	var lines []string
	envFile := func(args ...string) {
		f := filepath.Join(e.root, "env.json")
		e.run(0, append(args, "--out", f)...)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSpace(string(b)))
	}
	envFile("principal", "enroll", "--admin-key", e.keys["admin"], "--name", "user:alice", "--public-key", alice)
	// The next two are signed before the first is appended: give the seq.
	pub := strings.Fields(must(t, 0, "key", "public", planner).stdout)[2]
	envFile("confirm", "--key", alice, "--actor", "user:alice", "--seq", "1", "--grantee", "agent:planner", "--grantee-key", pub,
		"--workflow", "wf_1", "--target", "portal/x", "--capability", "purchase", "--limit", "budget_usd=5", "--ttl", "1h", "--id", "c1")
	envFile("confirm", "--key", alice, "--actor", "user:alice", "--seq", "7", "--grantee", "agent:planner", "--grantee-key", pub,
		"--workflow", "wf_1", "--target", "portal/x", "--capability", "purchase", "--ttl", "1h", "--id", "c2")
	in := strings.Join(lines, "\n") + "\n\n" + `{"payloadType":"application/vnd.custody.stop.v1+json"}` + "\n"
	path := filepath.Join(e.root, "envelopes.jsonl")
	os.WriteFile(path, []byte(in), 0o644)

	r := e.run(3, "append", path)
	want := []string{"accepted 1", "accepted 2", "denied 3 seq_mismatch: ", "refused: line 5: bad_envelope: "}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("append printed %q", r.stdout)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d: %q, want %q...", i, got[i], want[i])
		}
	}
	// Again, from standard input, as JSON: every decision is the first one.
	res := custody(t, in, "append", "--dir", e.dir, "--json", "-")
	if res.code != 3 {
		t.Fatalf("append again: %+v", res)
	}
	var verdicts []submit.Answer
	for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		var a submit.Answer
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		verdicts = append(verdicts, a)
	}
	if len(verdicts) != 4 || !verdicts[0].Duplicate || *verdicts[2].Index != 3 || verdicts[2].ReasonCode != "seq_mismatch" || verdicts[3].Verdict != "refused" {
		t.Fatalf("append --json: %+v", verdicts)
	}
	if size := mustCheckpointSize(t, e); size != 4 {
		t.Fatalf("size %d after duplicates", size)
	}
	// Independent envelopes (each principal's first CONFIRM, in its own
	// workflow) with --parallel: all accepted, exit 0, one line each in
	// input order.
	var many []string
	for i := range 6 {
		name := "user:p" + itoa(uint64(i))
		e.decision(0, "principal", "enroll", "--admin-key", e.keys["admin"], "--name", name, "--public-key", e.key(name))
		f := filepath.Join(e.root, "c.json")
		e.run(0, "confirm", "--key", e.key(name), "--grantee", "agent:planner", "--grantee-key", pub, "--workflow", "wf_p"+itoa(uint64(i)),
			"--target", "portal/x", "--capability", "purchase", "--ttl", "1h", "--id", "cp"+itoa(uint64(i)), "--out", f)
		b, _ := os.ReadFile(f)
		many = append(many, strings.TrimSpace(string(b)))
	}
	os.WriteFile(path, []byte(strings.Join(many, "\n")), 0o644)
	r = e.run(0, "append", "--parallel", "6", "--json", path)
	for i, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var a submit.Answer
		if err := json.Unmarshal([]byte(l), &a); err != nil || a.Verdict != "accepted" || a.Line != i+1 {
			t.Fatalf("parallel append line %d: %q, %v", i, l, err)
		}
	}
	if n := strings.Count(r.stdout, "\n"); n != 6 {
		t.Fatalf("parallel append printed %d lines", n)
	}
}

func mustCheckpointSize(t *testing.T, e *ledgerEnv) uint64 {
	var ci ledgercmd.CheckpointInfo
	if err := json.Unmarshal([]byte(e.run(0, "checkpoint", "--json").stdout), &ci); err != nil {
		t.Fatal(err)
	}
	return ci.Size
}

// TestBenchCountsMustBePositive: a count flag of custody bench below 1 is
// a usage error that names the flag, before anything is built.
func TestBenchCountsMustBePositive(t *testing.T) {
	for _, flag := range []string{"--growth-rounds", "--size", "--http-clients"} {
		r := must(t, 2, "bench", flag, "0")
		if !strings.Contains(r.stderr, flag+" must be positive") {
			t.Errorf("custody bench %s 0: stderr %q does not name the rule", flag, r.stderr)
		}
	}
}
