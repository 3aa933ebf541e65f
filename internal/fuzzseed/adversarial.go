package fuzzseed

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// AdversarialCases returns the contents of every case file of the
// repository's testdata/adversarial corpus, for decoders' tests that turn
// its payloads and envelopes into inputs. It fails the test if the corpus
// is missing.
func AdversarialCases(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(), "..", "adversarial", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("adversarial corpus: %v (%d files)", err, len(files))
	}
	out := make([][]byte, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

var placeholder = regexp.MustCompile(`\{\{([a-zA-Z]+)(?::([^:}]*))?(?::([^}]*))?\}\}`)

// ExpandPlaceholders fills in the corpus's {{name:arg:arg}} placeholders
// with fixed values, for tests that need inputs, not verifying statements:
// {{rep:N:s}} repeats s N times (at most 70,000), {{byte:hh}} is that byte,
// and every other placeholder is value(name).
func ExpandPlaceholders(s string, value func(name string) string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		p := placeholder.FindStringSubmatch(m)
		switch p[1] {
		case "rep":
			n, _ := strconv.Atoi(p[2])
			return strings.Repeat(p[3], min(n, 70000))
		case "byte":
			b, _ := strconv.ParseUint(p[2], 16, 8)
			return string([]byte{byte(b)})
		}
		return value(p[1])
	})
}
