package serving

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/location"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/storage/pgstore"
	"github.com/custodylog/custody/storage/storagetest"
)

func TestSelectionNames(t *testing.T) {
	store := location.Location{Kind: location.Store, Value: "postgres://h/db", From: "--store"}
	dir := location.Location{Kind: location.Dir, Value: "./custody-data", From: "default"}
	env := func(v string) func(string) string { return func(string) string { return v } }
	for _, tc := range []struct {
		name   string
		s      Selection
		loc    location.Location
		names  string
		prefer string
		usage  string
	}{
		{"one log", Selection{}, store, "", "", ""},
		{"typed", Selection{Typed: []string{"a", "b"}, Prefer: []string{"b"}}, store, "a,b", "b", ""},
		{"from the environment", Selection{Getenv: env("pay")}, store, "pay", "", ""},
		{"the default log in the environment is one log", Selection{Getenv: env("default")}, store, "", "", ""},
		{"prefer alone", Selection{Prefer: []string{"a"}}, store, "", "", "--prefer is for a server of several logs"},
		{"all and typed", Selection{All: true, Typed: []string{"a"}}, store, "", "", "--all-logs and --log a: give one"},
		{"a folder", Selection{Typed: []string{"a"}}, dir, "", "", "--log a: a data folder (default (--dir defaults to ./custody-data)) holds one log"},
		{"a folder, from the environment", Selection{Getenv: env("pay")}, dir, "", "", "$CUSTODY_LOG=pay: a data folder"},
		{"witnesses", Selection{Typed: []string{"a"}, Witnessed: true}, store, "", "", "--witness-policy serves one log's witnesses"},
		{"twice", Selection{Typed: []string{"a", "a"}}, store, "", "", "--log a is given twice"},
		{"bad name", Selection{Typed: []string{"A B"}}, store, "", "", "--log: "},
		{"prefer one not served", Selection{Typed: []string{"a"}, Prefer: []string{"b"}}, store, "", "", "--prefer b: this server does not serve log b (it serves a)"},
	} {
		if tc.s.Getenv == nil {
			tc.s.Getenv = env("")
		}
		names, prefer, err := tc.s.Names(context.Background(), tc.loc)
		var ue *UsageError
		switch {
		case tc.usage != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.usage)):
			t.Errorf("%s: %v, want a usage error with %q", tc.name, err, tc.usage)
		case tc.usage == "" && (err != nil || strings.Join(names, ",") != tc.names || strings.Join(prefer, ",") != tc.prefer):
			t.Errorf("%s: %v %v %v; want %q %q", tc.name, names, prefer, err, tc.names, tc.prefer)
		}
	}
}

// TestSelectionAllLogs: --all-logs serves the logs the database holds,
// and refuses an empty database.
func TestSelectionAllLogs(t *testing.T) {
	u := storagetest.PostgresURL(t)
	loc := location.Location{Kind: location.Store, Value: u, From: "--store"}
	if _, _, err := (Selection{All: true}).Names(context.Background(), loc); err == nil || !strings.Contains(err.Error(), "holds no log") {
		t.Fatalf("an empty database: %v", err)
	}
	nu, _ := pgstore.WithLog(u, "pay")
	_, admin, _ := sign.GenerateKey()
	l, err := ledger.Init(nu, "example.com/pay", ledger.InitOptions{AdminKey: admin})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if names, _, err := (Selection{All: true}).Names(context.Background(), loc); err != nil || strings.Join(names, ",") != "pay" {
		t.Fatalf("all logs: %v %v", names, err)
	}
}
