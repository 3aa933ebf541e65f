package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/cmd/ledgercmd"
	"github.com/custodylog/custody/internal/witnesstest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/witness"
)

// TestWitnessCommands runs custody serve --witness-policy against real
// witnesses (omniwitness and litewitness), then checks the served
// checkpoint and a bundle with verify, watch, audit and replay --policy:
// valid under a policy the witnesses meet, rejected with a sentence that
// says why under one they do not.
func TestWitnessCommands(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	r := must(t, 0, "init", "--dir", data, "--origin", "test.example/witnessed", "--json")
	var info ledgercmd.InitInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatal(err)
	}
	lg := witnesstest.Log{Origin: "test.example/witnessed", VKey: info.VerifierKey}
	omni := witnesstest.StartOmniwitness(t, "omni.test.example", lg)
	lite := witnesstest.StartLitewitness(t, "lite.test.example", lg)
	// A third witness that never hears of this log.
	ghost := witnesstest.StartOmniwitness(t, "ghost.test.example")
	policy := filepath.Join(dir, "witnesses.policy")
	writeFile(t, policy, "# the log's witnesses\n"+omni.PolicyLine("omni")+"\n"+lite.PolicyLine("lite")+"\ngroup both all omni lite\nquorum both\n")
	strict := filepath.Join(dir, "strict.policy")
	writeFile(t, strict, omni.PolicyLine("omni")+"\n"+lite.PolicyLine("lite")+"\n"+ghost.PolicyLine("ghost")+"\ngroup all3 all omni lite ghost\nquorum all3\n")
	vkeyFile := filepath.Join(dir, "log.vkey")
	writeFile(t, vkeyFile, info.VerifierKey+"\n")

	// Usage errors name the rule.
	if r := custody(t, "", "serve", "--dir", data, "--witness-finality"); r.code != clikit.ExitUsage || !strings.Contains(r.stderr, "--witness-finality needs --witness-policy FILE") {
		t.Errorf("serve --witness-finality alone: %+v", r)
	}
	noURL := filepath.Join(dir, "nourl.policy")
	writeFile(t, noURL, "witness omni "+omni.VKey+"\nquorum omni\n")
	if r := custody(t, "", "serve", "--dir", data, "--witness-policy", noURL); r.code == 0 || !strings.Contains(r.stderr, "witness omni has no URL") {
		t.Errorf("serve with a witness without a URL: %+v", r)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runIO(ctx, []string{"custody", "serve", "--dir", data, "--addr", "127.0.0.1:0", "--log-format", "json",
			"--witness-policy", policy, "--witness-interval", "0"}, strings.NewReader(""), io.Discard, &stderr)
	}()
	addr := regexp.MustCompile(`"addr":"(127\.0\.0\.1:\d+)"`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			url = "http://" + m[1]
		}
	}
	if url == "" {
		t.Fatalf("the server did not start: %s", stderr.String())
	}
	defer func() {
		cancel()
		<-done
	}()

	// GET /checkpoint gathers the witnesses' cosignatures.
	p, err := witness.ParsePolicy([]byte(readFile(t, policy)))
	if err != nil {
		t.Fatal(err)
	}
	var cp []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cp = get(t, url+"/checkpoint")
		if p.Evaluate(cp).Satisfied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the checkpoint never met the policy:\n%s\nlogs:\n%s", cp, stderr.String())
		}
	}
	bundle := filepath.Join(dir, "genesis.bundle.json")
	writeFile(t, bundle, string(get(t, url+"/v1/bundle?index=0")))

	r = must(t, 0, "verify", bundle, "--log-key", vkeyFile, "--policy", policy)
	if !strings.Contains(r.stdout, "ok   witness quorum") || !strings.Contains(r.stdout, "witness omni: omni.test.example cosigned at") ||
		!strings.Contains(r.stdout, "witness lite: lite.test.example cosigned at") {
		t.Errorf("verify --policy:\n%s", r.stdout)
	}
	r = must(t, 4, "verify", bundle, "--log-key", vkeyFile, "--policy", strict)
	if !strings.Contains(r.stderr, "witness quorum: the checkpoint does not meet the witness policy") || !strings.Contains(r.stderr, "missing ghost") {
		t.Errorf("verify --policy strict: %s", r.stderr)
	}
	r = must(t, 0, "verify", bundle, "--log-key", vkeyFile, "--policy", policy, "--json")
	var v struct {
		Witnessed []witness.Cosignature `json:"witnessed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Witnessed) != 2 || v.Witnessed[0].Time.IsZero() {
		t.Errorf("verify --json: %v %s", err, r.stdout)
	}
	tlogProof := filepath.Join(dir, "genesis.tlog-proof")
	writeFile(t, tlogProof, string(get(t, url+"/v1/bundle?index=0&format=tlog-proof")))
	must(t, 0, "verify", tlogProof, "--log-key", vkeyFile, "--policy", policy)
	must(t, 4, "verify", tlogProof, "--log-key", vkeyFile, "--policy", strict)
	if r := custody(t, "", "verify", bundle, "--log-key", vkeyFile, "--policy", filepath.Join(dir, "missing.policy")); r.code != 1 {
		t.Errorf("verify with a missing policy file: %+v", r)
	}

	state := filepath.Join(dir, "watch.state")
	r = must(t, 0, "watch", "--ledger", url, "--log-key", vkeyFile, "--state", state, "--policy", policy)
	if !strings.Contains(r.stdout, "meets the quorum") {
		t.Errorf("watch --policy: %s", r.stdout)
	}
	r = must(t, 4, "watch", "--ledger", url, "--log-key", vkeyFile, "--state", state, "--policy", strict)
	if !strings.Contains(r.stdout, "NOT WITNESSED") || !strings.Contains(r.stdout, "missing ghost") {
		t.Errorf("watch --policy strict: %s", r.stdout)
	}
	// With a witness down, the log grows without meeting the quorum: watch
	// falls back to the newest witnessed checkpoint the server serves.
	lite.Stop()
	adminKey, err := sign.ReadPrivateKeyFile(filepath.Join(data, "keys", "admin.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(url, info.VerifierKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := sign.GenerateKey()
	if _, err := client.NewRuntime(cl, adminKey, "admin", nil).Append(ctx, &statement.PrincipalDoc{PrincipalID: "principal_bob",
		Op: statement.OpEnroll, Name: "user:bob", PublicKey: sign.EncodePublicKey(pub)}); err != nil {
		t.Fatal(err)
	}
	if p.Evaluate(get(t, url+"/checkpoint")).Satisfied {
		t.Fatal("the checkpoint met the quorum with a witness down")
	}
	r = must(t, 0, "watch", "--ledger", url, "--log-key", vkeyFile, "--state", filepath.Join(dir, "watch2.state"), "--policy", policy, "--json")
	var wr struct {
		Size             uint64 `json:"size"`
		ServedCheckpoint string `json:"served_checkpoint"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &wr); err != nil || !p.Evaluate([]byte(wr.ServedCheckpoint)).Satisfied {
		t.Errorf("watch --policy did not fall back to the witnessed checkpoint: %v %s", err, r.stdout)
	}
	lite.Start()

	r = must(t, 0, "audit", "--tiles", url, "--log-key", vkeyFile, "--policy", policy)
	if !strings.Contains(r.stdout, "witnesses") || !strings.Contains(r.stdout, "cosigned by omni") {
		t.Errorf("audit --policy: %s", r.stdout)
	}
	r = must(t, 4, "audit", "--tiles", url, "--log-key", vkeyFile, "--policy", strict)
	if !strings.Contains(r.stdout, "does not meet the witness policy") {
		t.Errorf("audit --policy strict: %s", r.stdout)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, b)
	}
	return b
}
