package console_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/console"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// buildCustody builds the custody command, as the CLI's tests run it.
func buildCustody(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "custody")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/custodylog/custody/cmd/custody").CombinedOutput()
	if err != nil {
		t.Fatalf("building custody: %v\n%s", err, out)
	}
	return bin
}

// virtualAuthenticator gives the tab a platform authenticator that holds
// discoverable credentials and verifies its user (WebAuthn's CDP domain).
func virtualAuthenticator(t *testing.T, tab context.Context) webauthn.AuthenticatorID {
	t.Helper()
	var id webauthn.AuthenticatorID
	if err := chromedp.Run(tab, chromedp.ActionFunc(func(ctx context.Context) error {
		if err := webauthn.Enable().Do(ctx); err != nil {
			return err
		}
		var err error
		id, err = webauthn.AddVirtualAuthenticator(&webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Transport: webauthn.AuthenticatorTransportInternal,
			HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}).Do(ctx)
		return err
	})); err != nil {
		t.Fatalf("adding a virtual authenticator: %v", err)
	}
	return id
}

// registerPasskey registers a passkey for name on the page at
// consoleURL/console/enroll and returns the passkey file and key id the
// page hands back.
func registerPasskey(t *testing.T, tab context.Context, consoleURL, name string) (file, keyID string) {
	t.Helper()
	var status string
	if err := chromedp.Run(tab,
		chromedp.Navigate(consoleURL+"/console/enroll"),
		chromedp.WaitVisible(`#enroll-name`, chromedp.ByQuery),
		chromedp.SetValue(`#enroll-name`, name, chromedp.ByQuery),
		chromedp.Click(`#enroll-button`, chromedp.ByQuery),
		chromedp.Poll(`!document.getElementById("enroll-status").textContent.endsWith("…")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(`#enroll-status`, &status, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("registering a passkey for %s: %v", name, err)
	}
	if !strings.HasPrefix(status, "registered a passkey for "+name) {
		t.Fatalf("registering a passkey for %s: the page says %q", name, status)
	}
	var download string
	if err := chromedp.Run(tab,
		chromedp.Value(`#enroll-file`, &file, chromedp.ByQuery),
		chromedp.Text(`#enroll-keyid`, &keyID, chromedp.ByQuery),
		chromedp.AttributeValue(`#enroll-download`, "href", &download, nil, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(download, "blob:") {
		t.Errorf("the download link is %q, not the file's blob", download)
	}
	screenshot(t, tab, "console-enroll.png")
	return file, keyID
}

// enrollFromCLI runs the real `custody principal enroll --passkey FILE`
// against the ledger's server, signed with the admin's key file.
func enrollFromCLI(t *testing.T, bin string, lg *servertest.Log, adminKey, name, file string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "passkey.json")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "principal", "enroll", "--ledger", lg.URL, "--log-key", lg.VKey,
		"--admin-key", adminKey, "--name", name, "--passkey", path).CombinedOutput()
	if err != nil {
		t.Fatalf("custody principal enroll --passkey: %v\n%s", err, out)
	}
	return string(out)
}

// signIn types name on the console's page and presses Sign in; it
// returns what the page then says.
func signIn(t *testing.T, tab context.Context, name string) string {
	t.Helper()
	var status string
	if err := chromedp.Run(tab,
		chromedp.WaitVisible(`#session-signin`, chromedp.ByQuery),
		chromedp.SetValue(`#session-name`, name, chromedp.ByQuery),
		chromedp.Click(`#session-signin`, chromedp.ByQuery),
		chromedp.Poll(`!document.getElementById("session-status").textContent.endsWith("…")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(`#session-status`, &status, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("signing in as %s: %v", name, err)
	}
	return status
}

// TestBrowserEnrollSignInApprove is the console's passkeys from start to
// end, in Chromium with a virtual authenticator (user verification on):
// dana registers a passkey at /console/enroll; the admin enrolls the
// file the page handed back with the real `custody principal enroll
// --passkey`; dana signs in (the session cookie is HttpOnly,
// SameSite=Strict, with an expiry) and the page lists the receipts held
// for her. An agent's runtime executes a step a rule holds for her
// approval: its card appears on the open page (the figure logged is the
// time from the held answer to the card), she clicks Approve, her
// passkey signs the APPROVAL, and the runtime, having verified it, runs
// the step. A passkey erin registered on another origin's console does
// not sign in here, and the page says why.
func TestBrowserEnrollSignInApprove(t *testing.T) {
	tab := browser(t)
	bin := buildCustody(t)
	lg := servertest.Start(t, server.Options{})
	origin, _ := serveConsole(t, lg, server.Options{})
	adminKey := filepath.Join(t.TempDir(), "admin.key")
	if err := sign.WritePrivateKeyFile(adminKey, lg.AdminKey, nil, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	virtualAuthenticator(t, tab)

	// Register, and enroll from the CLI.
	file, keyID := registerPasskey(t, tab, origin, "user:dana")
	pf, err := sign.NewPasskey(sign.KeyTypeWebAuthnES256, jsonField(t, file, "public_key"), "localhost", []string{origin})
	if err != nil || pf.KeyID() != keyID {
		t.Fatalf("the page's passkey file %s (key id %s): %v", file, keyID, err)
	}
	if out := enrollFromCLI(t, bin, lg, adminKey, "user:dana", file); !strings.Contains(out, keyID) {
		t.Fatalf("custody principal enroll does not print the key id %s the page showed:\n%s", keyID, out)
	}

	// A grant whose rule holds big steps for dana.
	alice := lg.Principal("user:alice")
	apub, apriv := servertest.Key(t)
	grant := lg.ID("confirm")
	if _, err := alice.Confirm(ctx, client.Grant{ID: grant, Workflow: "wf_dana", Grantee: "agent:buyer", GranteeKey: apub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"usd": 1000}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"act"}, Above: map[string]int64{"usd": 10},
			Approvers: []string{"user:dana"}, Quorum: 1, TTLSeconds: 600}}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var heldAt time.Time
	agent := client.NewRuntime(lg.Client, apriv, "agent:buyer", &client.Hooks{OnHeld: func(context.Context, client.Step, *client.Receipt) {
		mu.Lock()
		heldAt = time.Now()
		mu.Unlock()
	}})

	// Sign in: the list is dana's.
	if err := chromedp.Run(tab, chromedp.Navigate(origin+"/console/")); err != nil {
		t.Fatal(err)
	}
	if status := signIn(t, tab, "user:dana"); !strings.HasPrefix(status, "Signed in as user:dana") {
		t.Fatalf("dana's sign-in: the page says %q", status)
	}
	var cookies []*network.Cookie
	var pageCookies, approver string
	if err := chromedp.Run(tab,
		chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			cookies, err = network.GetCookies().WithURLs([]string{origin + "/console/"}).Do(ctx)
			return err
		}),
		chromedp.Evaluate(`document.cookie`, &pageCookies),
		chromedp.Poll(`document.getElementById("approvals-status").textContent.startsWith("0 held for user:dana")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Value(`#approver`, &approver, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as user:dana")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("after sign-in: %v", err)
	}
	var session *network.Cookie
	for _, c := range cookies {
		if c.Name == console.CookieName {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Path != "/console/" {
		t.Fatalf("the session cookie: %+v", session)
	}
	if left := time.Until(time.Unix(int64(session.Expires), 0)); left < console.DefaultSession-time.Minute || left > console.DefaultSession+time.Minute {
		t.Errorf("the session cookie expires in %v, want %v", left, console.DefaultSession)
	}
	if strings.Contains(pageCookies, console.CookieName) || approver != "user:dana" {
		t.Fatalf("the page reads the HttpOnly cookie (%q) or lists %q's approvals", pageCookies, approver)
	}

	// The held step appears on the open page while the runtime waits.
	if err := chromedp.Run(tab, chromedp.Evaluate(`window.seen = {}; new MutationObserver(() => {
		for (const li of document.querySelectorAll("li.card")) {
			if (!(li.dataset.receiptId in window.seen)) window.seen[li.dataset.receiptId] = Date.now();
		}
	}).observe(document.getElementById("approvals"), {childList: true}); true`, nil)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ex  *client.Execution
		err error
	}
	done := make(chan result, 1)
	ran := make(chan struct{})
	sent := time.Now()
	go func() {
		ex, err := agent.Execute(ctx, client.Step{ReceiptID: "r_dana", StepID: "buy", Action: "act", Target: "t/laptop", Auth: grant,
			Reserve: map[string]int64{"usd": 900}, ApprovalWait: 90 * time.Second}, func(context.Context) (client.Outcome, error) {
			close(ran)
			return client.Outcome{Result: statement.ResultSuccess, Consumed: map[string]int64{"usd": 850}}, nil
		})
		done <- result{ex, err}
	}()
	card := `li.card[data-receipt-id="r_dana"]`
	var seenMS float64
	if err := chromedp.Run(tab,
		chromedp.WaitVisible(card+` button.approve`, chromedp.ByQuery),
		chromedp.Evaluate(`window.seen["r_dana"]`, &seenMS),
	); err != nil {
		t.Fatalf("the held step's card: %v", err)
	}
	mu.Lock()
	held := heldAt
	mu.Unlock()
	seen := time.UnixMilli(int64(seenMS))
	t.Logf("held receipt on the open page %v after its held answer (%v after the runtime sent it)", seen.Sub(held), seen.Sub(sent))
	select {
	case <-ran:
		t.Fatal("the held step ran before anyone approved it")
	default:
	}
	screenshot(t, tab, "console-signed-in.png")
	clicked := time.Now()
	if err := chromedp.Run(tab, chromedp.Click(card+` button.approve`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	// What the card says, read without waiting for it to be visible.
	cardStatus := func() string {
		var s string
		chromedp.Run(tab, chromedp.Evaluate(`(document.querySelector('`+card+` p[role=status]') || {}).textContent || ""`, &s))
		return s
	}
	select {
	case r := <-done:
		if r.err != nil || !r.ex.Ran || r.ex.Approval == nil || r.ex.Outcome == nil {
			t.Fatalf("the approved step: %+v, %v (page: %q)", r.ex, r.err, cardStatus())
		}
		t.Logf("the step ran and its outcome was logged %v after the Approve click", time.Since(clicked))
	case <-time.After(90 * time.Second):
		t.Fatalf("the step did not run after the Approve click; the page says %q", cardStatus())
	}
	// The card stays, decided, with the ledger's answer.
	if err := chromedp.Run(tab, chromedp.Poll(`(document.querySelector('`+card+`.decided p[role=status]') || {}).textContent?.startsWith("the ledger answered 200 accepted")`,
		nil, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the decided card: %v (it says %q)", err, cardStatus())
	}

	// Sign out: the session ends.
	var after string
	if err := chromedp.Run(tab,
		chromedp.Click(`#session-signout`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("session-status").textContent === "signed out"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Reload(),
		chromedp.Poll(`document.getElementById("session-status").textContent === "not signed in"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text(`#session-status`, &after, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("signing out: %v (%q)", err, after)
	}

	// erin registers on another origin's console (the same relying party,
	// localhost, another port): her passkey does not sign in here.
	other, _ := serveConsole(t, lg, server.Options{})
	efile, ekey := registerPasskey(t, tab, other, "user:erin")
	if out := enrollFromCLI(t, bin, lg, adminKey, "user:erin", efile); !strings.Contains(out, ekey) {
		t.Fatalf("enrolling erin: %s", out)
	}
	if err := chromedp.Run(tab, chromedp.Navigate(origin+"/console/")); err != nil {
		t.Fatal(err)
	}
	status := signIn(t, tab, "user:erin")
	t.Logf("erin's sign-in at %s: %s", origin, status)
	if !strings.HasPrefix(status, "not signed in: no passkey of \"user:erin\" may sign in at "+origin) ||
		!strings.Contains(status, "is enrolled for origins "+other+", not this console's "+origin) {
		t.Fatalf("a passkey of another origin: the page says %q", status)
	}
	var code int
	if err := chromedp.Run(tab, chromedp.Evaluate(`fetch("session").then(r => r.json()).then(s => s.signed_in ? 1 : 0)`, &code,
		func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatal("erin is signed in with another origin's passkey")
	}
}

// screenshot writes the page to $CUSTODY_SCREENSHOTS/name, when that is
// set (the README's pictures), once per test run.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CUSTODY_SCREENSHOTS")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, name)
	if shot[path] {
		return
	}
	shot[path] = true
	var png []byte
	if err := chromedp.Run(tab, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

var shot = map[string]bool{}

// jsonField is a string member of a JSON object's text.
func jsonField(t *testing.T, text, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	s, _ := m[name].(string)
	return s
}
