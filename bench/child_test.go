package bench

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestInChildHelper is the child process of TestInChild, not a test.
func TestInChildHelper(t *testing.T) {
	switch os.Getenv("CUSTODY_BENCH_CHILD") {
	case "ok":
		json.NewEncoder(os.Stdout).Encode(BigResult{Size: 42})
		os.Exit(0)
	case "fail":
		os.Stderr.WriteString("no log in that folder\n")
		os.Exit(3)
	}
}

func TestInChild(t *testing.T) {
	var gotDir string
	args := func(dir string, d time.Duration) []string {
		gotDir = dir
		return []string{"-test.run=^TestInChildHelper$"}
	}
	t.Setenv("CUSTODY_BENCH_CHILD", "ok")
	r, err := InChild(args)(context.Background(), "/big", time.Second)
	if err != nil || r.Size != 42 || gotDir != "/big" {
		t.Fatalf("child: %+v, %v", r, err)
	}
	t.Setenv("CUSTODY_BENCH_CHILD", "fail")
	if _, err := InChild(args)(context.Background(), "/big", time.Second); err == nil || !strings.Contains(err.Error(), "no log in that folder") {
		t.Fatalf("a failing child: %v", err)
	}
}
