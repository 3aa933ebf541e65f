package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/clikit"
)

// helpExamples returns the custody command lines of a help text's
// Example section, with continuation lines joined.
func helpExamples(description string) []string {
	_, ex, ok := strings.Cut(description, "Example:\n")
	if !ok {
		return nil
	}
	var out []string
	var cur string
	for _, line := range strings.Split(ex, "\n") {
		line = strings.TrimSpace(line)
		if cur != "" {
			cur += " " + strings.TrimSuffix(line, `\`)
		} else if strings.HasPrefix(line, "custody ") {
			cur = strings.TrimSuffix(line, `\`)
		} else {
			continue
		}
		if !strings.HasSuffix(line, `\`) {
			out = append(out, cur)
			cur = ""
		}
	}
	return out
}

// shellWords splits a command line as a shell would, for the examples:
// quotes, and $(...) kept as one word; it stops at an unquoted |, >, &,
// ; or #.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	inWord, quote, depth := false, rune(0), 0
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case depth > 0:
			w.WriteRune(r)
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '$' && i+1 < len(rs) && rs[i+1] == '(' && quote == '"' {
				w.WriteString("$(")
				i++
				depth = 1
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			w.WriteString("$(")
			i++
			depth, inWord = 1, true
		case r == ' ' || r == '\t':
			flush()
		case strings.ContainsRune("|>&;#", r):
			flush()
			return words
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

// TestHelpExamplesParse runs every example of every command's --help, as
// printed, through the real command tree: the command must exist, every
// flag must be one it has with a value it parses, its required flags must
// be there, and a command that reads a log must find one place to read it.
// Each command's action is replaced by a probe, so nothing needs the
// files the examples name; TestReadmeRunsInOneShell runs the README's for
// real.
func TestHelpExamplesParse(t *testing.T) {
	root := newApp(nil, nil, nil)
	n := 0
	for _, p := range append(commandPaths(root, nil), nil) {
		c := findCommand(root, p)
		if c == nil {
			c = root
		}
		for _, ex := range helpExamples(c.Description) {
			words := shellWords(ex)
			var stderr strings.Builder
			app := newApp(strings.NewReader(""), &strings.Builder{}, &stderr)
			reached := false
			probeAll(app, func(c *cli.Command) error {
				reached = true
				if c.Name == "verify" && c.NArg() != 1 {
					// verify's own action takes one evidence file; a
					// second word is a subcommand it does not have.
					return clikit.Usage(c, "want one BUNDLE or TLOG-PROOF argument, got %q", c.Args().Slice())
				}
				if len(clikit.LocationKinds(c)) > 0 {
					if _, err := clikit.ResolveLocation(c); err != nil {
						return err
					}
				}
				return nil
			})
			code := runApp(context.Background(), app, words)
			n++
			if code != 0 || !reached {
				t.Errorf("%s --help: the example\n    %s\ndoes not parse (exit %d): %s", strings.Join(append([]string{"custody"}, p...), " "), ex, code, stderr.String())
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d examples found", n)
	}
	t.Logf("%d examples", n)
}

// TestDeployCommandsParse: the commands deploy/custody.service and
// deploy/Dockerfile run (and the ones their comments tell an operator to
// run) parse with the real command tree, so that a renamed flag cannot
// leave them behind.
func TestDeployCommandsParse(t *testing.T) {
	var lines []string
	unit, err := os.ReadFile("../../deploy/custody.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(unit), "\n") {
		if cmd, ok := strings.CutPrefix(l, "ExecStart=/usr/local/bin/"); ok {
			lines = append(lines, cmd)
		}
		if _, cmd, ok := strings.Cut(l, "sudo -u custody "); ok {
			lines = append(lines, cmd)
		}
	}
	docker, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(docker), "\n") {
		if rest, ok := strings.CutPrefix(l, "CMD "); ok {
			var words []string
			if err := json.Unmarshal([]byte(rest), &words); err != nil {
				t.Fatalf("Dockerfile CMD: %v", err)
			}
			lines = append(lines, "custody "+strings.Join(words, " "))
		}
		if _, cmd, ok := strings.Cut(l, " custody init "); ok {
			lines = append(lines, "custody init "+cmd)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("found %d commands in deploy/, want 4: %q", len(lines), lines)
	}
	for _, l := range lines {
		var stderr strings.Builder
		app := newApp(strings.NewReader(""), &strings.Builder{}, &stderr)
		reached := false
		probeAll(app, func(c *cli.Command) error {
			reached = true
			_, err := clikit.ResolveLocation(c)
			return err
		})
		if code := runApp(context.Background(), app, shellWords(l)); code != 0 || !reached {
			t.Errorf("deploy/: %q does not parse (exit %d): %s", l, code, stderr.String())
		}
	}
}

// probeAll replaces the action of every command of the tree that has one
// of its own with probe.
func probeAll(c *cli.Command, probe func(*cli.Command) error) {
	for _, sub := range c.Commands {
		if sub.Action != nil && (len(sub.Commands) == 0 || sub.Name == "bench" || sub.Name == "verify" || sub.Name == "gate") {
			sub.Action = func(_ context.Context, c *cli.Command) error { return probe(c) }
		}
		probeAll(sub, probe)
	}
}
