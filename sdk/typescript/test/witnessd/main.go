// Command witnessd runs two real omniwitness witnesses on loopback for the
// TypeScript SDK's witness test (sdk/typescript/test/witness.test.mjs):
// it starts them knowing one log, prints a witness policy naming both (a
// quorum of 2) on one JSON line, and stops them when its standard input
// closes. The witnesses are built by scripts/witness.sh into .cache/bin
// ($CUSTODY_WITNESS_BIN); internal/witnessproc runs them.
//
//	witnessd -origin ORIGIN -vkey VERIFIER_KEY -dir DIR [-policy-out FILE]
//
// With -policy-out it also writes the policy, as text, to FILE (what
// scripts/local-witness.sh hands to custody serve --witness-policy).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/custodylog/custody/internal/witnessproc"
)

func main() {
	origin := flag.String("origin", "", "the log's origin")
	vkey := flag.String("vkey", "", "the log's checkpoint verifier key")
	dir := flag.String("dir", "", "a folder for the witnesses' keys and databases")
	bin := flag.String("bin", "", "the folder holding omniwitness (default: $CUSTODY_WITNESS_BIN or .cache/bin)")
	policyOut := flag.String("policy-out", "", "also write the policy text to this file")
	flag.Parse()
	if *origin == "" || *vkey == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: witnessd -origin ORIGIN -vkey VERIFIER_KEY -dir DIR")
		os.Exit(2)
	}
	b := *bin
	if b == "" {
		root, _ := filepath.Abs(filepath.Join(filepath.Dir(os.Args[0]), "..", ".."))
		b = witnessproc.DefaultBin(root)
	}
	if _, err := os.Stat(filepath.Join(b, "omniwitness")); err != nil {
		fmt.Fprintf(os.Stderr, "witnessd: omniwitness missing in %s: run scripts/witness.sh\n", b)
		os.Exit(3)
	}
	if err := run(b, *dir, *policyOut, witnessproc.Log{Origin: *origin, VKey: *vkey}); err != nil {
		fmt.Fprintln(os.Stderr, "witnessd:", err)
		os.Exit(1)
	}
}

// run starts the witnesses, prints the policy, waits for standard input
// to close, and stops them (also when one fails to start).
func run(bin, dir, policyOut string, lg witnessproc.Log) error {
	var lines []string
	var ws []*witnessproc.Witness
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	for i, name := range []string{"witness1.test", "witness2.test"} {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		w, err := witnessproc.StartOmniwitness(bin, d, name, lg)
		if err != nil {
			return err
		}
		ws = append(ws, w)
		lines = append(lines, w.PolicyLine(fmt.Sprintf("w%d", i+1)))
	}
	policy := strings.Join(lines, "\n") + "\ngroup both all w1 w2\nquorum both\n"
	if policyOut != "" {
		if err := os.WriteFile(policyOut, []byte(policy), 0o644); err != nil {
			return err
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]string{"policy": policy}); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, os.Stdin) // until the test closes it
	return err
}
