package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// consoleServer serves lg's ledger with the console on a loopback port
// known before it starts (the console's origin names it) and returns that
// origin.
func consoleServer(t *testing.T, lg *servertest.Log) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hs := httptest.NewUnstartedServer(server.New(lg.Ledger, server.Options{Console: true, ConsoleOrigin: origin,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	return origin
}

// passkey is a P-256 passkey for rp_id localhost: the file the console
// takes and the credential the virtual authenticator holds.
type passkey struct {
	File                  []byte // the passkey file (public)
	PublicKey, Credential string // standard base64 SPKI DER and credential id
	origins               []string
	pkcs8                 string // the private key, for the virtual authenticator
}

func newPasskey(t *testing.T, origin string, allowed []string) *passkey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(priv)
	cred := make([]byte, 16)
	rand.Read(cred)
	p := &passkey{PublicKey: base64.StdEncoding.EncodeToString(spki), Credential: base64.StdEncoding.EncodeToString(cred),
		origins: []string{origin}, pkcs8: base64.StdEncoding.EncodeToString(pkcs8)}
	file := map[string]any{"key_type": sign.KeyTypeWebAuthnES256, "public_key": p.PublicKey, "credential_id": p.Credential,
		"rp_id": "localhost", "origins": p.origins}
	if allowed != nil {
		file["allowed_types"] = allowed
	}
	p.File, _ = json.Marshal(file)
	return p
}

// addKey binds the passkey to principal name (OpAddKey), able to sign the
// kinds allowed.
func (p *passkey) addKey(t *testing.T, lg *servertest.Log, name string, allowed []string) {
	t.Helper()
	if _, err := lg.Admin.Append(context.Background(), &statement.PrincipalDoc{PrincipalID: lg.ID("p"), Op: statement.OpAddKey, Name: name,
		KeyType: sign.KeyTypeWebAuthnES256, PublicKey: p.PublicKey, CredentialID: p.Credential, RPID: "localhost",
		Origins: p.origins, AllowedTypes: allowed}); err != nil {
		t.Fatalf("adding %s's passkey: %v", name, err)
	}
}

// holdPasskeys puts the passkeys' credentials in the tab's virtual
// authenticator (virtualAuthenticator, browser_enroll_test.go).
func holdPasskeys(t *testing.T, tab context.Context, pks ...*passkey) {
	t.Helper()
	id := virtualAuthenticator(t, tab)
	for _, p := range pks {
		if err := chromedp.Run(tab, webauthn.AddCredential(id, &webauthn.Credential{CredentialID: p.Credential, RpID: "localhost",
			PrivateKey: p.pkcs8})); err != nil {
			t.Fatalf("adding a credential to the virtual authenticator: %v", err)
		}
	}
}

// choosePasskey has the console's first page take the passkey file, as a
// person pastes it (once the page has loaded the one it had, if any, so
// that the older choice cannot land last).
func choosePasskey(origin string, p *passkey, name string) chromedp.Tasks {
	return chromedp.Tasks{
		chromedp.Navigate(origin + "/console/"),
		chromedp.WaitVisible(`#passkey-file`, chromedp.ByQuery),
		chromedp.Poll(`localStorage.getItem("custody.passkey") === null || document.getElementById("signer").textContent !== ""`, nil,
			chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.SetValue(`#passkey-file`, string(p.File), chromedp.ByQuery),
		chromedp.Click(`#passkey-save`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as `+name+`")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
	}
}

// clickWhenThere clicks the button sel names as soon as the page shows
// it, in one step of the page's own (the page redraws the workflow when
// an entry is added, so a node found in one CDP call may be gone in the
// next); reason, when set, is typed first into the input beside it.
func clickWhenThere(sel, reason string) chromedp.Action {
	js := `(() => { const b = document.querySelector(` + strconv.Quote(sel) + `); if (!b || b.hidden) return false;
		const r = b.parentElement.querySelector("input.reason"); if (r && ` + strconv.Quote(reason) + `) r.value = ` + strconv.Quote(reason) + `;
		b.click(); return true; })()`
	return chromedp.Poll(js, nil, chromedp.WithPollingTimeout(60*time.Second))
}

// gateParts finds the MCP reference servers scripts/mcp.sh installs under
// .cache/mcp, and builds custody: without node or npm the test skips on a
// developer's machine and fails under CI.
func gateParts(t *testing.T) (mcpDir, bin string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "%s is not installed: the gate under the console needs it", tool)
		}
	}
	out, err := exec.Command("bash", "../scripts/mcp.sh").Output()
	if err != nil {
		testenv.Need(t, "scripts/mcp.sh: %v", err)
	}
	return strings.TrimSpace(string(out)), buildCustody(t)
}

// TestBrowserWorkflowPages: the workflows list shows a workflow as it
// begins, live; its page shows replay's timeline and delegation tree and
// says "verified" against the bundle's signed checkpoint, checked in the
// browser by the SDK; its download link gives a bundle that verifies; an
// agent's markup in its free text stays text; a principal with no part in
// the workflow is shown no Stop or Revoke. With
// a real `custody gate` in front of the reference MCP server running a
// slow tool call, the owner presses Stop workflow on the page (her
// passkey signs the STOP) and the call is cancelled with the STOP's
// reason; Resume from the page lets calls through again; Revoke from the
// page ends the grant and the next call is denied revoked; a step STOP
// (pause) from the page shows on it and on the list. Signed in, with no
// passkey file chosen, the page signs as the session's person. Pinned to
// another log's key, the page verifies nothing.
func TestBrowserWorkflowPages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	mcpDir, bin := gateParts(t)
	lg := servertest.Start(t, server.Options{})
	origin := consoleServer(t, lg)
	ctx := context.Background()
	alice := lg.Principal("user:alice")
	allowed := []string{"APPROVAL", "RESUME", "REVOKE", "STOP"}
	pk := newPasskey(t, origin, allowed)
	pk.addKey(t, lg, "user:alice", allowed)
	// bob is enrolled with a passkey too, but has no part in the workflow.
	bob := newPasskey(t, origin, allowed)
	if _, err := lg.Admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: "p_bob", Op: statement.OpEnroll, Name: "user:bob",
		KeyType: sign.KeyTypeWebAuthnES256, PublicKey: bob.PublicKey, CredentialID: bob.Credential, RPID: "localhost",
		Origins: bob.origins, AllowedTypes: allowed}); err != nil {
		t.Fatal(err)
	}

	tab := browser(t)
	holdPasskeys(t, tab, pk, bob)
	if err := chromedp.Run(tab, choosePasskey(origin, pk, "user:alice"),
		chromedp.Navigate(origin+"/console/workflows.html"),
		chromedp.Poll(`document.getElementById("workflows-status").textContent.startsWith("0 workflows")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
	); err != nil {
		var msg string
		chromedp.Run(tab, chromedp.Text(`#workflows-status`, &msg, chromedp.ByQuery))
		t.Fatalf("opening the workflows list: %v (%q)", err, msg)
	}

	// The workflow begins while the list is open: its row appears.
	pub, priv := servertest.Key(t)
	const grant = "confirm_gate"
	if _, err := alice.Confirm(ctx, client.Grant{ID: grant, Workflow: "wf_live", Grantee: "agent:gate", GranteeKey: pub,
		Targets: []string{"ops/*"}, Capabilities: []string{"ops.run"}, TTL: time.Hour, Revocable: true}); err != nil {
		t.Fatal(err)
	}
	var rowText string
	row := `tr[data-workflow="wf_live"]`
	if err := chromedp.Run(tab, chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.Text(row, &rowText, chromedp.ByQuery)); err != nil {
		t.Fatalf("the new workflow on the open list: %v", err)
	}
	for _, want := range []string{"user:alice", "agent:gate", "no"} {
		if !strings.Contains(rowText, want) {
			t.Errorf("the list's row lacks %q: %q", want, rowText)
		}
	}

	// An agent of the workflow writes markup in its free text.
	const evil = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	spub, spriv := servertest.Key(t)
	if _, err := alice.Confirm(ctx, client.Grant{ID: "confirm_scribe", Workflow: "wf_live", Grantee: "agent:scribe", GranteeKey: spub,
		Targets: []string{"notes/*"}, Capabilities: []string{"write"}, TTL: time.Hour, Revocable: true}); err != nil {
		t.Fatal(err)
	}
	scribe := client.NewRuntime(lg.Client, spriv, "agent:scribe", nil)
	if _, err := scribe.Execute(ctx, client.Step{Auth: "confirm_scribe", StepID: "note", Action: "write", Target: "notes/a"},
		func(context.Context) (client.Outcome, error) {
			return client.Outcome{Result: "success", SideEffects: map[string]string{"note": evil}}, nil
		}); err != nil {
		t.Fatalf("the scribe's step: %v", err)
	}

	// The gate, in front of the reference server over stdio.
	work := t.TempDir()
	keyFile, vkeyFile, cfgFile := filepath.Join(work, "agent.pem"), filepath.Join(work, "log.vkey"), filepath.Join(work, "gate.json")
	if err := sign.WritePrivateKeyFile(keyFile, priv, nil, false); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(vkeyFile, []byte(lg.VKey+"\n"), 0o644)
	os.WriteFile(cfgFile, []byte(`{"tools": {
	  "trigger-long-running-operation": {"capability": "ops.run", "target": "ops/long", "step": "long", "inert": ["duration", "steps"]},
	  "echo": {"capability": "ops.run", "target": "ops/echo", "inert": ["message"]}}}`), 0o644)
	gate := exec.Command(bin, "gate", "--ledger", lg.URL, "--log-key", vkeyFile, "--key", keyFile, "--grant", grant,
		"--config", cfgFile, "--stream-timeout", "2s", "--",
		"node", filepath.Join(mcpDir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
	gate.Stderr = io.Discard
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "console-test-agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: gate}, nil)
	if err != nil {
		t.Fatalf("connecting to custody gate: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	call := func(tool string, args map[string]any) (bool, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("calling %s: %v", tool, err)
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		return res.IsError, text
	}
	if isErr, text := call("echo", map[string]any{"message": "hello"}); isErr {
		t.Fatalf("a call before the STOP: %s", text)
	}

	// bob, who has no part in it, sees the workflow but no button to
	// stop it or revoke a grant.
	page := origin + "/console/workflow.html?id=wf_live"
	var bobSees bool
	if err := chromedp.Run(tab, choosePasskey(origin, bob, "user:bob"), chromedp.Navigate(page),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as user:bob")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`!document.getElementById("stop-form").hidden || document.querySelectorAll("button.revoke, button.resume").length > 0 ||
			Array.from(document.querySelectorAll("button.stop-step")).some((b) => !b.hidden)`, &bobSees),
	); err != nil {
		t.Fatalf("the page as bob: %v", err)
	}
	if bobSees {
		t.Fatal("bob, who may neither stop the workflow nor revoke its grants, is shown the buttons")
	}
	if err := chromedp.Run(tab, choosePasskey(origin, pk, "user:alice")); err != nil {
		t.Fatal(err)
	}

	// The workflow's page as alice: the timeline, the tree, verified.
	var verified, tree, timeline string
	var pwned bool
	var markup int
	if err := chromedp.Run(tab, chromedp.Navigate(page),
		chromedp.Poll(`document.getElementById("verify").textContent.startsWith("verified:")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text(`#verify`, &verified, chromedp.ByQuery),
		chromedp.Text(`#tree`, &tree, chromedp.ByQuery),
		chromedp.Text(`#timeline`, &timeline, chromedp.ByQuery),
		chromedp.Evaluate(`"pwned" in window`, &pwned),
		chromedp.Evaluate(`document.querySelectorAll("main script, main img").length`, &markup),
	); err != nil {
		var msg string
		chromedp.Run(tab, chromedp.Text(`#verify`, &msg, chromedp.ByQuery))
		t.Fatalf("the workflow page: %v (%s)", err, msg)
	}
	t.Logf("the page: %s", verified)
	for _, want := range []string{"agent:gate", "agent:scribe", "user:alice", grant} {
		if !strings.Contains(tree, want) {
			t.Errorf("the delegation tree lacks %q: %q", want, tree)
		}
	}
	if !strings.Contains(timeline, "ops/echo") || !strings.Contains(timeline, strings.ReplaceAll(evil, `"`, `\"`)) || strings.Contains(timeline, "✗") {
		t.Errorf("the timeline: %q", timeline)
	}
	if pwned || markup != 0 {
		t.Fatalf("the agent's markup ran or became elements: pwned %v, %d script/img elements", pwned, markup)
	}
	// The download link gives the workflow's bundle, which verifies offline.
	var href string
	if err := chromedp.Run(tab, chromedp.Evaluate(`document.getElementById("bundle").href`, &href)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(href)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b, err := verify.ParseBundle(raw)
	if err != nil {
		t.Fatalf("the bundle link %s: %v", href, err)
	}
	if v, err := verify.VerifyBundle(b, lg.VKey); err != nil || !v.Valid || v.Workflow != "wf_live" {
		t.Fatalf("the downloaded bundle: %+v, %v", v, err)
	}

	// A slow call in flight; its pending RECEIPT appears on the open page
	// (the events stream), then the owner stops the workflow from it.
	type result struct {
		isErr bool
		text  string
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 60, "steps": 60}})
		if err != nil {
			done <- result{true, err.Error()}
			return
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		done <- result{res.IsError, text}
	}()
	const reason = "the agent loops; a person takes over"
	if err := chromedp.Run(tab,
		chromedp.Poll(`Array.from(document.querySelectorAll("#timeline tbody tr")).some((tr) => tr.textContent.includes("ops/long"))`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible(`#stop-button`, chromedp.ByQuery),
		chromedp.SetValue(`#stop-reason`, reason, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("the call in flight on the page: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the slow call ended before the STOP: %+v", r)
	default:
	}
	if dir := os.Getenv("CUSTODY_SCREENSHOTS"); dir != "" {
		var png []byte
		if err := chromedp.Run(tab, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "console-workflow.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clicked := time.Now()
	var answer string
	if err := chromedp.Run(tab, chromedp.Click(`#stop-button`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("answer").textContent.startsWith("the ledger answered")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(`#answer`, &answer, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("Stop workflow: %v", err)
	}
	if !strings.HasPrefix(answer, "the ledger answered 200 accepted: STOP") {
		t.Fatalf("the STOP: %q", answer)
	}
	select {
	case r := <-done:
		t.Logf("the call in flight ended %v after the Stop click: %s", time.Since(clicked), r.text)
		if !r.isErr || !strings.HasPrefix(r.text, "workflow_stopped: ") || !strings.Contains(r.text, reason) {
			t.Fatalf("the stopped call: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight was not cancelled by the STOP")
	}
	if isErr, text := call("echo", map[string]any{"message": "x"}); !isErr || !strings.HasPrefix(text, "workflow_stopped: ") {
		t.Fatalf("a call under the STOP: %v %s", isErr, text)
	}

	// Resume from the page: calls pass again.
	if err := chromedp.Run(tab,
		clickWhenThere(`li[data-stop] button.resume`, ""),
		chromedp.Poll(`document.getElementById("answer").textContent.includes("RESUME")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(`#answer`, &answer, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("Resume: %v (%s)", err, answer)
	}
	if !strings.HasPrefix(answer, "the ledger answered 200 accepted: RESUME") {
		t.Fatalf("the RESUME: %q", answer)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		isErr, text := call("echo", map[string]any{"message": "after the resume"})
		if !isErr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a call after the RESUME: %s", text)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Revoke the gate's grant from the page: the next call is denied.
	revoke := `li[data-grant="` + grant + `"] button.revoke`
	if err := chromedp.Run(tab,
		clickWhenThere(revoke, "the gate is retired"),
		chromedp.Poll(`document.getElementById("answer").textContent.includes("REVOKE")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(`#answer`, &answer, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('li[data-grant="`+grant+`"] .grant').classList.contains("revoked")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("Revoke: %v (%s)", err, answer)
	}
	if !strings.HasPrefix(answer, "the ledger answered 200 accepted: REVOKE") {
		t.Fatalf("the REVOKE: %q", answer)
	}
	if isErr, text := call("echo", map[string]any{"message": "after the revoke"}); !isErr || !strings.HasPrefix(text, "revoked: ") {
		t.Fatalf("a call after the REVOKE: %v %s", isErr, text)
	}
	// Stop one step (the scribe's), pausing it: a step STOP on the page.
	if err := chromedp.Run(tab,
		chromedp.SetValue(`#stop-step`, "note", chromedp.ByQuery),
		chromedp.SetValue(`#stop-mode`, "pause", chromedp.ByQuery),
		chromedp.SetValue(`#stop-reason`, "hold the notes", chromedp.ByQuery),
		chromedp.Click(`#stop-button`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("answer").textContent.includes("accepted: STOP")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Poll(`Array.from(document.querySelectorAll("li[data-stop]")).some((li) => li.textContent.startsWith("step note stopped by user:alice (pause)") && li.textContent.includes("in force"))`,
			nil, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		chromedp.Run(tab, chromedp.Text(`#answer`, &answer, chromedp.ByQuery))
		t.Fatalf("stopping a step: %v (%s)", err, answer)
	}
	// The list shows what happened; the page still verifies.
	if err := chromedp.Run(tab,
		chromedp.Poll(`document.getElementById("verify").textContent.startsWith("verified:")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Navigate(origin+"/console/workflows.html"),
		chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.Text(row, &rowText, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	// Signed in (Sign in on the first page, no passkey file chosen), the
	// page signs as the session's person, with the kinds the log lets its
	// passkey sign: alice may revoke the scribe's grant.
	var signer string
	var revokes int
	if err := chromedp.Run(tab,
		chromedp.Evaluate(`localStorage.removeItem("custody.passkey"); true`, nil),
		chromedp.Navigate(origin+"/console/"),
		chromedp.WaitVisible(`#session-name`, chromedp.ByQuery),
		chromedp.SetValue(`#session-name`, "user:alice", chromedp.ByQuery),
		chromedp.Click(`#session-signin`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("session-status").textContent.startsWith("Signed in as user:alice")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Navigate(page),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text(`#signer`, &signer, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("button.revoke").length`, &revokes),
	); err != nil {
		var status string
		chromedp.Run(tab, chromedp.Text(`#session-status`, &status, chromedp.ByQuery))
		t.Fatalf("signed in: %v (%s)", err, status)
	}
	if !strings.HasPrefix(signer, "signing as user:alice") || !strings.HasSuffix(signer, "signed in)") || revokes != 1 {
		t.Fatalf("signed in, the page says %q and shows %d Revoke buttons (want the scribe's)", signer, revokes)
	}

	// Pinned to another log's key (same origin name), the page does not
	// believe the server: nothing it shows is verified.
	other := servertest.Start(t, server.Options{})
	var notVerified string
	if err := chromedp.Run(tab,
		chromedp.Evaluate(`localStorage.setItem("custody.vkey./", `+strconv.Quote(other.VKey)+`); true`, nil),
		chromedp.Navigate(page),
		chromedp.Poll(`document.getElementById("verify").textContent.startsWith("NOT verified")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text(`#verify`, &notVerified, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("the page under another log's key: %v", err)
	}
	if !strings.Contains(notVerified, "checkpoint") || strings.Contains(notVerified, "✓") {
		t.Errorf("under another log's key: %q", notVerified)
	}
	t.Logf("the list's row at the end: %s", rowText)
	if !strings.Contains(rowText, "\t1 step stop(s)\t2") {
		t.Errorf("the list's row after the RESUME, the step STOP and the two denied calls: %q, want one step stop and 2 violations", rowText)
	}
}
