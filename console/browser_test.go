package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
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

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// chromium finds Debian's chromium (scripts/chromium.sh installs it; .ci/run
// runs that before the tests).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Need(t, "chromium is not installed (bash scripts/chromium.sh installs Debian's)")
	return ""
}

// browser starts headless Chromium with its own profile folder and returns
// a chromedp context for one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, 2*time.Minute)
	// chromedp.Cancel closes the browser and waits for it, so that its
	// profile folder is no longer written when the test removes it.
	t.Cleanup(func() { chromedp.Cancel(ctx); cancelC(); cancelB(); cancelA() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// TestBrowserApprovalsLive opens the console's approvals page in headless
// Chromium, then has an agent submit a receipt a rule holds, with markup
// in its target: the card appears on the open page without a reload, its
// markup shown as text and never run; when bob rejects it (with the Go
// SDK) the card goes away. The figure logged is the time from the held
// answer (the entry is committed before it) to the card in the DOM.
func TestBrowserApprovalsLive(t *testing.T) {
	lg := servertest.Start(t, server.Options{Console: true, ConsoleOrigin: "http://127.0.0.1"})
	ctx := context.Background()
	alice, bob := lg.Principal("user:alice"), lg.Principal("user:bob")
	pub, priv := servertest.Key(t)
	grant := lg.ID("confirm")
	if _, err := alice.Confirm(ctx, client.Grant{ID: grant, Workflow: "wf_console", Grantee: "agent:buyer", GranteeKey: pub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"usd": 1000}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"act"}, Above: map[string]int64{"usd": 10},
			Approvers: []string{"user:bob"}, Quorum: 1, TTLSeconds: 600}}}); err != nil {
		t.Fatal(err)
	}
	agent := client.NewRuntime(lg.Client, priv, "agent:buyer", nil)

	tab := browser(t)
	if err := chromedp.Run(tab,
		chromedp.Navigate(lg.URL+"/console/?approver=user:bob"),
		chromedp.WaitVisible(`#approvals-status`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("approvals-status").textContent.startsWith("0 held")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		// Note when each card first appears, by the page's clock.
		chromedp.Evaluate(`window.seen = {}; new MutationObserver(() => {
			for (const li of document.querySelectorAll("li.card")) {
				if (!(li.dataset.receiptId in window.seen)) window.seen[li.dataset.receiptId] = Date.now();
			}
		}).observe(document.getElementById("approvals"), {childList: true}); true`, nil),
	); err != nil {
		t.Fatalf("opening the approvals page: %v", err)
	}

	const evil = `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	doc := servertest.Pending(grant, "s1", map[string]int64{"usd": 50})
	doc.ReceiptID, doc.SideEffects = "r_console", map[string]string{"note": evil}
	sent := time.Now()
	rec, err := agent.Receipt(ctx, doc)
	answered := time.Now()
	var held *client.HeldError
	if !errors.As(err, &held) || rec == nil || !rec.Held() {
		t.Fatalf("the receipt is not held: %+v, %v", rec, err)
	}

	var seenMS float64
	var text string
	var pwned bool
	var markup int
	if err := chromedp.Run(tab,
		chromedp.WaitVisible(`li.card[data-receipt-id="r_console"]`, chromedp.ByQuery),
		chromedp.Evaluate(`window.seen["r_console"]`, &seenMS),
		chromedp.TextContent(`li.card[data-receipt-id="r_console"]`, &text, chromedp.ByQuery),
		chromedp.Evaluate(`"pwned" in window`, &pwned),
		chromedp.Evaluate(`document.querySelectorAll("#approvals script, #approvals img").length`, &markup),
	); err != nil {
		t.Fatalf("waiting for the held receipt on the page: %v", err)
	}
	seen := time.UnixMilli(int64(seenMS))
	t.Logf("held receipt on the open page %v after its held answer (%v after it was sent)", seen.Sub(answered), seen.Sub(sent))
	if !strings.Contains(text, strings.ReplaceAll(evil, `"`, `\"`)) {
		t.Errorf("the card does not show the agent's text as text: %q", text)
	}
	if pwned || markup != 0 {
		t.Fatalf("the agent's markup ran or became elements: pwned %v, %d script/img elements", pwned, markup)
	}
	for _, want := range []string{"user:bob", "big", grant, "wf_console", `"usd":50`} {
		if !strings.Contains(text, want) {
			t.Errorf("the card lacks %q: %q", want, text)
		}
	}
	if dir := os.Getenv("CUSTODY_SCREENSHOTS"); dir != "" {
		var png []byte
		if err := chromedp.Run(tab, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "console-approvals.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Rejected: the card leaves the open page.
	if _, err := bob.Approve(ctx, "r_console", true, "not this vendor"); err != nil {
		t.Fatalf("bob rejects: %v", err)
	}
	if err := chromedp.Run(tab,
		chromedp.Poll(`document.querySelectorAll('li.card[data-receipt-id="r_console"]').length === 0`, nil, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("the rejected receipt stays on the page: %v", err)
	}
}

// TestBrowserApproveWithPasskey: bob's passkey lives in Chromium's virtual
// authenticator (user verification on); the admin enrolled it from Go
// with the passkey file the page takes. With the page open, an agent's
// runtime waits on a held receipt; bob clicks Approve, the page builds
// the APPROVAL, the passkey signs its PAE's SHA-256, the ledger accepts
// it, and the runtime's own check of the approval passes (the step may
// run). A second held receipt bob rejects with a reason: the runtime is
// told approval_rejected and never runs it. A passkey whose enrolled
// origins lack the console's is refused by the ledger. Last, the
// workflow's owner stops it with "Stop workflow" (a STOP her passkey
// signs) and the agent's next step is denied workflow_stopped.
func TestBrowserApproveWithPasskey(t *testing.T) {
	// The console's server, on a port known before it starts (its origin
	// names the port), over the same ledger as lg's.
	lg := servertest.Start(t, server.Options{})
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
	base := origin
	ctx := context.Background()

	// bob's passkey: a P-256 key the virtual authenticator holds.
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(priv)
	credID := make([]byte, 16)
	rand.Read(credID)
	file := map[string]any{"key_type": sign.KeyTypeWebAuthnES256, "public_key": base64.StdEncoding.EncodeToString(spki),
		"credential_id": base64.StdEncoding.EncodeToString(credID), "rp_id": "localhost", "origins": []string{origin}}
	fileJSON, _ := json.Marshal(file)
	if _, err := lg.Admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: "p_bob", Op: statement.OpEnroll, Name: "user:bob",
		KeyType: sign.KeyTypeWebAuthnES256, PublicKey: file["public_key"].(string), CredentialID: file["credential_id"].(string),
		RPID: "localhost", Origins: []string{origin}}); err != nil {
		t.Fatalf("enrolling bob's passkey: %v", err)
	}
	alice := lg.Principal("user:alice")
	apub, apriv := servertest.Key(t)
	grant := lg.ID("confirm")
	if _, err := alice.Confirm(ctx, client.Grant{ID: grant, Workflow: "wf_pk", Grantee: "agent:buyer", GranteeKey: apub,
		Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"usd": 1000}, TTL: time.Hour, Revocable: true,
		Approvals: []scope.Rule{{RuleID: "big", Capabilities: []string{"act"}, Above: map[string]int64{"usd": 10},
			Approvers: []string{"user:bob", "user:carol"}, Quorum: 1, TTLSeconds: 600}}}); err != nil {
		t.Fatal(err)
	}
	agent := client.NewRuntime(lg.Client, apriv, "agent:buyer", nil)

	// carol's passkey lists another origin only: the console cannot sign
	// with it.
	cpriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cspki, _ := x509.MarshalPKIXPublicKey(&cpriv.PublicKey)
	cpkcs8, _ := x509.MarshalPKCS8PrivateKey(cpriv)
	cCredID := make([]byte, 16)
	rand.Read(cCredID)
	other := "https://localhost"
	carolFile, _ := json.Marshal(map[string]any{"key_type": sign.KeyTypeWebAuthnES256, "public_key": base64.StdEncoding.EncodeToString(cspki),
		"credential_id": base64.StdEncoding.EncodeToString(cCredID), "rp_id": "localhost", "origins": []string{other}})
	if _, err := lg.Admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: "p_carol", Op: statement.OpEnroll, Name: "user:carol",
		KeyType: sign.KeyTypeWebAuthnES256, PublicKey: base64.StdEncoding.EncodeToString(cspki), CredentialID: base64.StdEncoding.EncodeToString(cCredID),
		RPID: "localhost", Origins: []string{other}}); err != nil {
		t.Fatalf("enrolling carol's passkey: %v", err)
	}

	tab := browser(t)
	var authID webauthn.AuthenticatorID
	if err := chromedp.Run(tab,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`#passkey-file`, chromedp.ByQuery),
		chromedp.ActionFunc(func(ctx context.Context) error {
			if err := webauthn.Enable().Do(ctx); err != nil {
				return err
			}
			var err error
			authID, err = webauthn.AddVirtualAuthenticator(&webauthn.VirtualAuthenticatorOptions{
				Protocol: webauthn.AuthenticatorProtocolCtap2, Transport: webauthn.AuthenticatorTransportInternal,
				HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}).Do(ctx)
			if err != nil {
				return err
			}
			if err := webauthn.AddCredential(authID, &webauthn.Credential{CredentialID: base64.StdEncoding.EncodeToString(cCredID),
				RpID: "localhost", PrivateKey: base64.StdEncoding.EncodeToString(cpkcs8)}).Do(ctx); err != nil {
				return err
			}
			return webauthn.AddCredential(authID, &webauthn.Credential{CredentialID: base64.StdEncoding.EncodeToString(credID),
				RpID: "localhost", PrivateKey: base64.StdEncoding.EncodeToString(pkcs8)}).Do(ctx)
		}),
		chromedp.SetValue(`#passkey-file`, string(fileJSON), chromedp.ByQuery),
		chromedp.Click(`#passkey-save`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as user:bob")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		var msg string
		chromedp.Run(tab, chromedp.Text(`#signer`, &msg, chromedp.ByQuery))
		t.Fatalf("setting up the passkey: %v (%s)", err, msg)
	}

	hold := func(id string) chan error {
		doc := servertest.Pending(grant, "s_"+id, map[string]int64{"usd": 50})
		doc.ReceiptID = id
		if _, err := agent.Receipt(ctx, doc); err == nil {
			t.Fatalf("%s was not held", id)
		}
		done := make(chan error, 1)
		go func() {
			_, err := agent.AwaitApproval(ctx, id, client.AwaitOptions{Wait: 20 * time.Second})
			done <- err
		}()
		return done
	}
	card := func(id string) string { return `li.card[data-receipt-id="` + id + `"]` }

	ran := hold("r_yes")
	var answer string
	if err := chromedp.Run(tab, chromedp.WaitVisible(card("r_yes")+` button.approve`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("CUSTODY_SCREENSHOTS"); dir != "" {
		var png []byte
		if err := chromedp.Run(tab, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "console-approve.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clicked := time.Now()
	if err := chromedp.Run(tab, chromedp.Click(card("r_yes")+` button.approve`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		t.Logf("the runtime's step may run %v after the Approve click", time.Since(clicked))
		if err != nil {
			chromedp.Run(tab, chromedp.Text(card("r_yes")+` p[role=status]`, &answer, chromedp.ByQuery))
			t.Fatalf("the runtime does not take bob's approval: %v (page: %q)", err, answer)
		}
	case <-time.After(90 * time.Second):
		chromedp.Run(tab, chromedp.Text(card("r_yes")+` p[role=status]`, &answer, chromedp.ByQuery))
		t.Fatalf("no approval reached the runtime; the page says %q", answer)
	}

	notRun := hold("r_no")
	if err := chromedp.Run(tab,
		chromedp.WaitVisible(card("r_no")+` button.reject`, chromedp.ByQuery),
		chromedp.SendKeys(card("r_no")+` input.reason`, "wrong vendor", chromedp.ByQuery),
		chromedp.Click(card("r_no")+` button.reject`, chromedp.ByQuery),
	); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-notRun:
		var ae *client.ApprovalError
		if !errors.As(err, &ae) || ae.Code != client.ApprovalRejected {
			t.Fatalf("after the reject the runtime got %v, want %s", err, client.ApprovalRejected)
		}
	case <-time.After(90 * time.Second):
		chromedp.Run(tab, chromedp.Text(card("r_no")+` p[role=status]`, &answer, chromedp.ByQuery))
		t.Fatalf("no reject reached the runtime; the page says %q", answer)
	}

	// carol, whose passkey lists only another origin, approves a third:
	// the ledger refuses her signature, and the runtime still waits.
	waiting := hold("r_other")
	if err := chromedp.Run(tab,
		chromedp.SetValue(`#passkey-file`, string(carolFile), chromedp.ByQuery),
		chromedp.Click(`#passkey-save`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as user:carol")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Navigate(base+"/console/?approver=user:carol"),
		chromedp.WaitVisible(card("r_other")+` button.approve`, chromedp.ByQuery),
		chromedp.Click(card("r_other")+` button.approve`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('`+card("r_other")+` p[role=status]').textContent.startsWith("the ledger answered")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(card("r_other")+` p[role=status]`, &answer, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("carol's approval from another origin: %v", err)
	}
	if !strings.HasPrefix(answer, "the ledger answered 400: bad_signature") || !strings.Contains(answer, "is not one of the enrolled origins") {
		t.Fatalf("a passkey of another origin signed here: %q", answer)
	}
	t.Logf("another origin's passkey: %s", answer)
	select {
	case err := <-waiting:
		t.Fatalf("the runtime stopped waiting after a refused approval: %v", err)
	default:
	}

	// alice owns wf_pk; her passkey (another key of user:alice) stops it
	// from the console, and the agent's next step is denied.
	lpriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	lspki, _ := x509.MarshalPKIXPublicKey(&lpriv.PublicKey)
	lpkcs8, _ := x509.MarshalPKCS8PrivateKey(lpriv)
	lCredID := make([]byte, 16)
	rand.Read(lCredID)
	aliceFile, _ := json.Marshal(map[string]any{"key_type": sign.KeyTypeWebAuthnES256, "public_key": base64.StdEncoding.EncodeToString(lspki),
		"credential_id": base64.StdEncoding.EncodeToString(lCredID), "rp_id": "localhost", "origins": []string{origin}})
	if _, err := lg.Admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: "p_alice_pk", Op: statement.OpAddKey, Name: "user:alice",
		KeyType: sign.KeyTypeWebAuthnES256, PublicKey: base64.StdEncoding.EncodeToString(lspki), CredentialID: base64.StdEncoding.EncodeToString(lCredID),
		RPID: "localhost", Origins: []string{origin}}); err != nil {
		t.Fatalf("adding alice's passkey: %v", err)
	}
	var stopAnswer string
	if err := chromedp.Run(tab,
		chromedp.ActionFunc(func(ctx context.Context) error {
			return webauthn.AddCredential(authID, &webauthn.Credential{CredentialID: base64.StdEncoding.EncodeToString(lCredID),
				RpID: "localhost", PrivateKey: base64.StdEncoding.EncodeToString(lpkcs8)}).Do(ctx)
		}),
		chromedp.SetValue(`#passkey-file`, string(aliceFile), chromedp.ByQuery),
		chromedp.Click(`#passkey-save`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("signer").textContent.startsWith("signing as user:alice")`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.SetValue(`#stop-workflow`, "wf_pk", chromedp.ByQuery),
		chromedp.SetValue(`#stop-reason`, "the agent buys from the wrong vendor", chromedp.ByQuery),
		chromedp.Click(`#stop-button`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("stop-status").textContent.startsWith("the ledger answered")`, nil, chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Text(`#stop-status`, &stopAnswer, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("stopping wf_pk from the console: %v", err)
	}
	if !strings.HasPrefix(stopAnswer, "the ledger answered 200 accepted") {
		t.Fatalf("the STOP: %q", stopAnswer)
	}
	after := servertest.Pending(grant, "s_after", map[string]int64{"usd": 1})
	rec, err := agent.Receipt(ctx, after)
	if err == nil || rec == nil || rec.Accepted() || rec.ReasonCode != "workflow_stopped" {
		t.Fatalf("a step after the console's STOP: %+v, %v; want denied workflow_stopped", rec, err)
	}
}
