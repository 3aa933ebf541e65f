package workflowbundle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/custodylog/custody/replay"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// TestSources: the same workflow from the server, from its ledger and
// from a bundle file replays verified; the file's key is the one given.
func TestSources(t *testing.T) {
	s := servertest.Start(t, server.Options{})
	alice := s.Principal("user:alice")
	s.Agent(alice, "agent:a", "wf_1", nil) // the CONFIRM opens workflow wf_1
	ctx := context.Background()
	var file string
	for name, src := range map[string]Source{"server": Server(s.NewClient()), "ledger": ledgerSource{s.Ledger}} {
		b, vkey, err := src.Bundle(ctx, "wf_1")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if vkey != s.VKey {
			t.Errorf("%s: key %q, want the log's", name, vkey)
		}
		rep, err := replay.Build(b, vkey, replay.Options{})
		if err != nil || !rep.Verified || rep.Workflow != "wf_1" {
			t.Fatalf("%s: replay %v, %v", name, rep, err)
		}
		if file == "" {
			data, err := b.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			file = filepath.Join(t.TempDir(), "wf.bundle.json")
			os.WriteFile(file, data, 0o644)
		}
	}
	f := File(file, "given+key")
	if !IsFile(f) || IsFile(Server(s.NewClient())) {
		t.Error("IsFile")
	}
	if b, vkey, err := f.Bundle(ctx, "ignored"); err != nil || vkey != "given+key" || b == nil {
		t.Fatalf("file: %v %q %v", b, vkey, err)
	}
	if _, _, err := Server(s.NewClient()).Bundle(ctx, "wf_none"); err == nil || !strings.Contains(err.Error(), `"wf_none"`) {
		t.Errorf("unknown workflow on the server: %v", err)
	}
	if _, _, err := File(filepath.Join(t.TempDir(), "none"), "k").Bundle(ctx, ""); err == nil {
		t.Error("a missing file")
	}
}
