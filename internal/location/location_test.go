package location

import (
	"errors"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolve(t *testing.T) {
	all := []Kind{Dir, Store, Ledger}
	for _, tc := range []struct {
		name  string
		r     Request
		want  Location
		error string // a *UsageError containing this
	}{
		{"default", Request{Kinds: all}, Location{Kind: Dir, Value: DefaultDir, From: "default"}, ""},
		{"no default without a folder", Request{Kinds: []Kind{Ledger}}, Location{}, "say where to read from: give --ledger"},
		{"typed wins over env", Request{Kinds: all, Typed: map[Kind]string{Dir: "d"}, Getenv: env(map[string]string{"CUSTODY_LEDGER": "http://x"})},
			Location{Kind: Dir, Value: "d", From: "--dir"}, ""},
		{"two typed", Request{Kinds: all, Typed: map[Kind]string{Dir: "d", Ledger: "http://x"}}, Location{}, `--dir "d" and --ledger "http://x": give one place to read from, not 2`},
		{"empty typed", Request{Kinds: all, Typed: map[Kind]string{Dir: " "}}, Location{}, "--dir is empty: give a folder"},
		{"env order", Request{Kinds: all, Getenv: env(map[string]string{"CUSTODY_DIR": "d", "CUSTODY_STORE": "postgres://h/db"})},
			Location{Kind: Store, Value: "postgres://h/db", From: "$CUSTODY_STORE"}, ""},
		{"env the command does not take", Request{Kinds: []Kind{Dir}, Getenv: env(map[string]string{"CUSTODY_LEDGER": "http://x"})},
			Location{Kind: Dir, Value: DefaultDir, From: "default"}, ""},
		{"store not a URL", Request{Kinds: all, Getenv: env(map[string]string{"CUSTODY_STORE": "./folder"})}, Location{}, `$CUSTODY_STORE "./folder": want a postgres:// URL`},
		{"named log on a server", Request{Kinds: all, Typed: map[Kind]string{Ledger: "http://a/, http://b"}, Log: "pay", LogFrom: "--log"},
			Location{Kind: Ledger, Value: "http://a/logs/pay,http://b/logs/pay", From: "--ledger", Log: "pay"}, ""},
		{"named log in a folder", Request{Kinds: all, Log: "pay", LogFrom: "$CUSTODY_LOG"}, Location{},
			"$CUSTODY_LOG pay: a folder (--dir (--dir defaults to ./custody-data)) holds one log"},
		{"default log by name", Request{Kinds: all, Log: "default", LogFrom: "--log"}, Location{Kind: Dir, Value: DefaultDir, From: "default"}, ""},
		{"two log names", Request{Kinds: all, Typed: map[Kind]string{Store: "postgres://h/db?custody_log=a"}, Log: "b", LogFrom: "--log"}, Location{},
			"--log b, but the store URL names log a"},
	} {
		if tc.r.Getenv == nil {
			tc.r.Getenv = env(nil)
		}
		got, err := Resolve(tc.r)
		var ue *UsageError
		switch {
		case tc.error != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.error)):
			t.Errorf("%s: %v, want a usage error with %q", tc.name, err, tc.error)
		case tc.error == "" && (err != nil || got.Kind != tc.want.Kind || got.Value != tc.want.Value || got.From != tc.want.From || got.Log != tc.want.Log):
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestWhy(t *testing.T) {
	for l, want := range map[Location]string{
		{Kind: Dir, Value: "d", From: "--dir"}:            "",
		{Kind: Dir, Value: "d", From: "default"}:          " (--dir defaults to d)",
		{Kind: Store, Value: "u", From: "$CUSTODY_STORE"}: " (--store from $CUSTODY_STORE)",
	} {
		if got := l.Why(); got != want {
			t.Errorf("%+v.Why() = %q, want %q", l, got, want)
		}
	}
}

func TestArgs(t *testing.T) {
	e := env(map[string]string{LogEnv: "a", LogKeyEnv: "k"})
	if n, from := LogArg("b", true, e); n != "b" || from != "--log" {
		t.Errorf("typed --log: %q %q", n, from)
	}
	if n, from := LogArg("", false, e); n != "a" || from != "$CUSTODY_LOG" {
		t.Errorf("$CUSTODY_LOG: %q %q", n, from)
	}
	if v, from := LogKeyArg("", false, env(nil)); v != "" || from != "" {
		t.Errorf("neither: %q %q", v, from)
	}
	if v, from := LogKeyArg("", false, e); v != "k" || from != "$CUSTODY_LOG_KEY" {
		t.Errorf("$CUSTODY_LOG_KEY: %q %q", v, from)
	}
}
