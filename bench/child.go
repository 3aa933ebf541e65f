package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// InChild is a Config.MeasureBig that measures the big log in a child
// process, so that its peak RSS is the reader's alone, not the builder's:
// this executable run with args(dir, d), which must print the BigResult
// as JSON on standard output (custody bench --measure-big DIR).
func InChild(args func(dir string, d time.Duration) []string) func(context.Context, string, time.Duration) (BigResult, error) {
	return func(ctx context.Context, dir string, d time.Duration) (BigResult, error) {
		return RunChild[BigResult](ctx, args(dir, d))
	}
}

// RunChild runs this executable with argv, which must print a T as JSON
// on standard output, and returns it.
func RunChild[T any](ctx context.Context, argv []string) (T, error) {
	var r T
	exe, err := os.Executable()
	if err != nil {
		return r, err
	}
	cmd := exec.CommandContext(ctx, exe, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("measuring in a child process: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("reading the child's figures: %w", err)
	}
	return r, nil
}
