package clikit

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/custodylog/custody/internal/durable"
	"github.com/custodylog/custody/internal/textsafe"
	buildversion "github.com/custodylog/custody/internal/version"
)

// JSONFlag is --json.
func JSONFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON document instead of text"}
}

// WriteJSON prints v as one indented JSON document, with every character
// a terminal would act on escaped (textsafe.WriteJSON).
func WriteJSON(w io.Writer, v any) error { return textsafe.WriteJSON(w, v) }

// SafeText returns s for a line of human output: dangerous runes and
// invalid UTF-8 are escaped (\n, \u202e, \xff), everything else is kept.
func SafeText(s string) string { return textsafe.Text(s) }

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress draws a one-line progress indicator on a terminal, at most ten
// times a second. A nil *progress draws nothing.
type Progress struct {
	W     io.Writer
	last  time.Time
	drawn bool
}

func (p *Progress) Show(force bool, format string, args ...any) {
	if p == nil || (!force && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	p.drawn = true
	fmt.Fprintf(p.W, "\r\033[K"+format, args...)
}

// clear erases the progress line.
func (p *Progress) Clear() {
	if p != nil && p.drawn {
		fmt.Fprint(p.W, "\r\033[K")
	}
}

// Args returns the command's positional arguments, requiring between min
// and max of them.
func Args(c *cli.Command, min, max int, what string) ([]string, error) {
	a := c.Args().Slice()
	if len(a) < min || len(a) > max {
		if len(a) < min {
			return nil, Usage(c, "missing %s", what)
		}
		return nil, Usage(c, "unexpected argument %q", a[max])
	}
	return a, nil
}

// ReadInput reads a file, or standard input for "-".
func ReadInput(c *cli.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(c.Root().Reader)
	}
	return os.ReadFile(name)
}

// Version is the one version string (internal/version).
func Version() string { return buildversion.String() }

// WriteFileAtomic replaces path with data atomically and durably
// (internal/durable), so path never holds a torn file.
func WriteFileAtomic(path string, data []byte) error { return durable.Replace(path, data, 0o644) }
