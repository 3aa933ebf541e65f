// testreport reads `go test -json` on standard input and prints what
// `go test` without -v would: each package's closing line, the output of
// every failed test, build errors, panics and timeouts. Then it lists
// every skipped test with its reason, and exits 1 when a test failed, a
// package did not build, or a test was skipped because a real component
// it needs was missing (its skip message starts with
// internal/testenv.Marker): under CI such a test must run.
//
//	go test -json ./... | go run .ci/testreport.go
//
// It has no dependencies, so CI can run it before anything else builds.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// marker is internal/testenv.Marker (kept here by value: this program
// builds alone).
const marker = "missing component: "

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type skip struct{ pkg, test, reason string }

func main() {
	failed, skips, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	fmt.Printf("\n== skipped tests: %d\n", len(skips))
	missing := 0
	for _, s := range skips {
		fmt.Printf("SKIP %s %s: %s\n", s.pkg, s.test, s.reason)
		if strings.Contains(s.reason, marker) {
			missing++
		}
	}
	if missing > 0 {
		fmt.Printf("FAIL: %d test(s) skipped for a missing component; CI must run them (set CI=true, and install and start what they name)\n", missing)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// report copies the stream's essentials to w and returns whether anything
// failed and which tests were skipped.
func report(r io.Reader, w io.Writer) (failed bool, skips []skip, err error) {
	out := map[string][]string{} // package + " " + test -> its output lines
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not an event (go vet or the linker wrote to stdout): keep it.
			fmt.Fprintln(w, string(line))
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				if o := e.Output; o != "PASS\n" && !strings.HasPrefix(o, "=== ") {
					fmt.Fprint(w, o)
				}
				continue
			}
			out[key] = append(out[key], e.Output)
		case "fail":
			if e.Test == "" {
				failed = true
				continue
			}
			failed = true
			for _, o := range out[key] {
				fmt.Fprint(w, o)
			}
			delete(out, key)
		case "skip":
			if e.Test != "" {
				skips = append(skips, skip{e.Package, e.Test, reason(out[key])})
			}
			delete(out, key)
		case "pass":
			delete(out, key)
		}
	}
	return failed, skips, sc.Err()
}

// reason is a skipped test's message: its output without the lines the
// test runner writes itself.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}
