package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestAuditDemo audits the demo ledger and its export: clean, exit 0.
func TestAuditDemo(t *testing.T) {
	dir := demoLedger(t)
	r := must(t, 0, "audit", "--dir", dir)
	for _, want := range []string{"at size 12: CLEAN", "12 re-decided from GENESIS", "stored records compared"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit lacks %q:\n%s", want, r.stdout)
		}
	}
	tiles := filepath.Join(t.TempDir(), "tiles")
	must(t, 0, "export", "--dir", dir, "--tiles", tiles)
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", dir, "--verifier-key").stdout)
	must(t, 0, "audit", "--tiles", tiles, "--log-key", vkey)
	must(t, 2, "audit", "--tiles", tiles)
	must(t, 2, "audit", "--tiles", tiles, "--dir", dir, "--log-key", vkey)

	// Served over HTTP, as any static web server would.
	srv := httptest.NewServer(http.FileServer(http.Dir(tiles)))
	defer srv.Close()
	must(t, 0, "audit", "--tiles", srv.URL, "--log-key", vkey, "--json")

	// One byte of one stored leaf.
	bundle := filepath.Join(tiles, "tile", "entries", "000.p", "12")
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"logged_at"`))
	for n := 0; n < 4; n++ { // the fifth leaf: entry 4
		i += 1 + bytes.Index(data[i+1:], []byte(`"logged_at"`))
	}
	data[i+2] ^= 0x20
	if err := os.WriteFile(bundle, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r = must(t, 4, "audit", "--tiles", tiles, "--log-key", vkey)
	for _, want := range []string{"FINDING(S)", "tile at entry 4 (tile/0/000.p/12)", "leaf at entry 4", "root:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit of a corrupted leaf lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestAuditDerivedState rewrites one authority state record in the
// ledger's Badger folder: the audit names the record and exits 4.
func TestAuditDerivedState(t *testing.T) {
	dir := demoLedger(t)
	opts := badger.DefaultOptions(filepath.Join(dir, "db")).WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("agrant/del_booker") // ledger/keys.go: 'a' + state key
	err = db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		w := bytes.Replace(v, []byte(`"budget_usd":742`), []byte(`"budget_usd":42`), 1)
		if bytes.Equal(v, w) {
			t.Fatalf("record %s has no spent budget_usd 742: %s", key, v)
		}
		return txn.Set(key, w)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	r := must(t, 4, "audit", "--dir", dir)
	if !strings.Contains(r.stdout, "state at entry 3 (grant/del_booker): stored") {
		t.Errorf("audit lacks the state finding:\n%s", r.stdout)
	}
}

// TestWatchCommand keeps a checkpoint in --state, accepts the same one,
// and alerts (exit 4, --state unchanged) on a checkpoint the key did not
// sign.
func TestWatchCommand(t *testing.T) {
	dir := demoLedger(t)
	tiles := filepath.Join(t.TempDir(), "tiles")
	must(t, 0, "export", "--dir", dir, "--tiles", tiles)
	vkey := strings.TrimSpace(must(t, 0, "checkpoint", "--dir", dir, "--verifier-key").stdout)
	srv := httptest.NewServer(http.FileServer(http.Dir(tiles)))
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "monitor.checkpoint")

	r := must(t, 0, "watch", "--ledger", srv.URL, "--log-key", vkey, "--state", state)
	if !strings.Contains(r.stdout, "ok: first checkpoint kept: size 12") {
		t.Errorf("first watch:\n%s", r.stdout)
	}
	kept, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	r = must(t, 0, "watch", "--ledger", srv.URL, "--log-key", vkey, "--state", state)
	if !strings.Contains(r.stdout, "ok: unchanged: size 12") {
		t.Errorf("second watch:\n%s", r.stdout)
	}

	// Another log's export at the same URL: its checkpoint does not verify.
	other := demoLedger(t)
	if err := os.RemoveAll(tiles); err != nil {
		t.Fatal(err)
	}
	must(t, 0, "export", "--dir", other, "--tiles", tiles)
	r = must(t, 4, "watch", "--ledger", srv.URL, "--log-key", vkey, "--state", state)
	if !strings.Contains(r.stdout, "ALERT bad_signature") {
		t.Errorf("alert:\n%s", r.stdout)
	}
	// Both checkpoints are printed as the signed notes they are: the
	// origin, size and root on lines of their own, the signature line
	// starting with an em dash.
	if !strings.Contains(r.stdout, "kept checkpoint ("+state+"):\ndemo.custody.example/log\n12\n") ||
		!strings.Contains(r.stdout, "\n\u2014 demo.custody.example/log ") || strings.Contains(r.stdout, `\n`) {
		t.Errorf("alert checkpoints are not multi-line notes:\n%s", r.stdout)
	}
	if now, _ := os.ReadFile(state); !bytes.Equal(now, kept) {
		t.Error("--state changed after an alert")
	}
	must(t, 2, "watch", "--ledger", srv.URL, "--log-key", vkey)

	// With --interval it says so at start, on standard error.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	runIO(ctx, []string{"custody", "watch", "--ledger", srv.URL, "--log-key", vkey, "--state", state + ".2", "--interval", "1h"}, strings.NewReader(""), &out, &errb)
	if !strings.Contains(errb.String(), "custody watch: watching "+srv.URL+" every 1h0m0s (state "+state+".2)") {
		t.Errorf("no start-up line: %q", errb.String())
	}
}
