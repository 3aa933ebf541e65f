package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// PeerDir is where the Tessera peer's module lives, from the repository root.
const PeerDir = "bench/peers/tessera"

// PeerResult is what the Tessera peer prints (bench/peers/tessera).
type PeerResult struct {
	Peer                    string  `json:"peer"`
	Version                 string  `json:"version"`
	Entries                 int     `json:"entries"`
	EntryBytes              int     `json:"entry_bytes"`
	Inflight                int     `json:"inflight"`
	BatchMaxSize            int     `json:"batch_max_size"`
	BatchMaxAge             string  `json:"batch_max_age"`
	CheckpointInterval      string  `json:"checkpoint_interval"`
	Ack                     string  `json:"ack"`
	Seconds                 float64 `json:"seconds"`
	AppendsPerSec           float64 `json:"appends_per_sec"`
	P50Ms                   float64 `json:"p50_ms"`
	P99Ms                   float64 `json:"p99_ms"`
	IntegratedAppendsPerSec float64 `json:"integrated_appends_per_sec"`
	IntegratedP50Ms         float64 `json:"integrated_p50_ms"`
	IntegratedP99Ms         float64 `json:"integrated_p99_ms"`
	DiskBytesPerEntry       float64 `json:"disk_bytes_per_entry"`
	CPUUs                   float64 `json:"cpu_us_per_op"`
	GOMAXPROCS              int     `json:"gomaxprocs"`
}

// FindPeerDir looks for PeerDir in the working directory and its parents.
func FindPeerDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, PeerDir)
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s not found in %s or its parents: run from the custody repository, or give its folder", PeerDir, wd)
		}
	}
}

// RunPeer builds and runs the Tessera peer module in moduleDir (`go run .`,
// with the module's own go.mod, so Go fetches Tessera from the module
// proxy if it is not cached), appending n entries from inflight clients
// into a log under dir. A failure to build says why, with the go command's
// output.
func RunPeer(ctx context.Context, moduleDir, dir string, n, inflight int) (*PeerResult, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the Tessera peer is built with the go command, which is not on PATH: %w", err)
	}
	bin := filepath.Join(dir, "tessera-peer")
	build := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".")
	build.Dir = moduleDir
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the Tessera peer in %s failed: %v\n%s", moduleDir, err, strings.TrimSpace(string(out)))
	}
	cmd := exec.CommandContext(ctx, bin, "--entries", strconv.Itoa(n), "--inflight", strconv.Itoa(inflight),
		"--entry-bytes", strconv.Itoa(LeafBytes), "--dir", filepath.Join(dir, "tessera-log"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the Tessera peer failed: %v\n%s", err, tail(stderr.String(), 20))
	}
	var r PeerResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return nil, errors.Join(fmt.Errorf("reading the Tessera peer's report: %w", err), errors.New(tail(stdout.String(), 20)))
	}
	return &r, nil
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
