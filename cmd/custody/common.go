package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/custodylog/custody/internal/textsafe"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"
)

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON document instead of text"}
}

// writeJSON prints v as one indented JSON document, with every character
// a terminal would act on escaped (textsafe.WriteJSON).
func writeJSON(w io.Writer, v any) error { return textsafe.WriteJSON(w, v) }

// safeText returns s for a line of human output: dangerous runes and
// invalid UTF-8 are escaped (\n, \u202e, \xff), everything else is kept.
func safeText(s string) string { return textsafe.Text(s) }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress draws a one-line progress indicator on a terminal, at most ten
// times a second. A nil *progress draws nothing.
type progress struct {
	w     io.Writer
	last  time.Time
	drawn bool
}

func (p *progress) show(force bool, format string, args ...any) {
	if p == nil || (!force && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	p.drawn = true
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// clear erases the progress line.
func (p *progress) clear() {
	if p != nil && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// args returns the command's positional arguments, requiring between min
// and max of them.
func args(c *cli.Command, min, max int, what string) ([]string, error) {
	a := c.Args().Slice()
	if len(a) < min || len(a) > max {
		if len(a) < min {
			return nil, usage(c, "missing %s", what)
		}
		return nil, usage(c, "unexpected argument %q", a[max])
	}
	return a, nil
}

// readInput reads a file, or standard input for "-".
func readInput(c *cli.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(c.Root().Reader)
	}
	return os.ReadFile(name)
}
