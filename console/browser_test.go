package console_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
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
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
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
		if err := chromedp.Run(tab, chromedp.FullScreenshot(&png, 90)); err != nil {
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
