package storage

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestScheme(t *testing.T) {
	for loc, want := range map[string]string{
		"postgres://u@h/db":       "postgres",
		"PostgreSQL://u@h/db":     "postgresql",
		"s3+x://b/p":              "s3+x",
		"/var/lib/custody":        "",
		"custody-data":            "",
		"./a://b":                 "",
		"://nothing":              "",
		"C:/data":                 "",
		"dir with space://x":      "",
		"file:///var/lib/custody": "file",
	} {
		if got := Scheme(loc); got != want {
			t.Errorf("Scheme(%q) = %q, want %q", loc, got, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	errOpen := errors.New("opened")
	var got OpenOptions
	Register("testdrv", Driver{Open: func(_ context.Context, loc string, o OpenOptions) (Store, error) {
		got = o
		return nil, errOpen
	}})
	if _, err := Open(context.Background(), "testdrv://x", OpenOptions{Create: true, Origin: "o.example/log", Driver: 7}); err != errOpen {
		t.Fatalf("Open through the registered driver: %v", err)
	}
	if !got.Create || got.Origin != "o.example/log" || got.Driver != 7 {
		t.Fatalf("the driver was given %+v", got)
	}
	_, err := Lookup("nosuch://u:secret@host/db")
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) || !strings.Contains(err.Error(), "testdrv://") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Lookup of an unknown scheme: %v (want the scheme, the known ones, and no password)", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a scheme twice did not panic")
		}
	}()
	Register("testdrv", Driver{Open: func(context.Context, string, OpenOptions) (Store, error) { return nil, nil }})
}

func TestRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://custody:pw@127.0.0.1:5432/db": "postgres://custody:xxxxx@127.0.0.1:5432/db",
		"postgres://custody@127.0.0.1/db":         "postgres://custody@127.0.0.1/db",
		"postgres://h/db?x=a@b":                   "postgres://h/db?x=a@b",
		"/data/dir":                               "/data/dir",
	} {
		if got := Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}
