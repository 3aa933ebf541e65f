package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/custodylog/custody/internal/textsafe"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/custodylog/custody/sign"
)

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON document instead of text"}
}

// readPrivateKey reads a PKCS#8 private key file, asking for its
// passphrase only if it is encrypted.
func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, fmt.Errorf("no key file given")
	}
	return sign.ReadPrivateKeyFile(path, sign.Passphrase("passphrase for "+path+": "))
}

func publicOf(priv ed25519.PrivateKey) ed25519.PublicKey { return priv.Public().(ed25519.PublicKey) }

// writeJSON prints v as one indented JSON document, with every character
// a terminal would act on escaped (see jsonSafe).
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(jsonSafe(b.Bytes()))
	return err
}

// prettyJSON indents canonical JSON for people, escaping as writeJSON does.
func prettyJSON(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return []byte(safeText(string(raw)))
	}
	return jsonSafe(b.Bytes())
}

// dangerous reports whether r would be interpreted rather than shown by a
// terminal: control characters and format characters, which include the
// bidirectional overrides (DESIGN §1: free text is printed with control
// and bidirectional-override characters escaped).
func dangerous(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// jsonSafe rewrites dangerous runes of a JSON text as \uXXXX escapes. They
// can occur only inside strings, where the escape means the same thing, so
// the result is equivalent JSON. Newlines between tokens are kept.
func jsonSafe(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r != '\n' && dangerous(r) }) {
		return b
	}
	var out bytes.Buffer
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != '\n' && dangerous(r) {
			writeEscape(&out, r)
		} else {
			out.Write(b[:n])
		}
		b = b[n:]
	}
	return out.Bytes()
}

func writeEscape(out *bytes.Buffer, r rune) {
	if r > 0xffff {
		r1, r2 := utf16Surrogates(r)
		fmt.Fprintf(out, `\u%04x\u%04x`, r1, r2)
		return
	}
	fmt.Fprintf(out, `\u%04x`, r)
}

func utf16Surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

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
