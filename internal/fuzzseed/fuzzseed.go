// Package fuzzseed feeds a fuzz target the seed corpus kept in the
// repository's top-level testdata/fuzz/<FuzzName>/ folder, so that every
// package's seeds live in one place and run as ordinary test cases.
//
// A seed file is either in the `go test fuzz v1` format that `go test -fuzz`
// writes (one Go literal per line: []byte("..."), string("..."), or integer
// and boolean literals) or, for convenience, raw bytes given to a target
// that takes a single []byte.
package fuzzseed

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const header = "go test fuzz v1\n"

// Dir is the top-level testdata/fuzz folder.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "fuzz")
}

// Add reads testdata/fuzz/<f's name>/ and adds every seed in it to f. It
// fails the test if the folder is missing or a file cannot be read, so a
// corpus cannot silently vanish.
func Add(f *testing.F) {
	f.Helper()
	dir := filepath.Join(Dir(), f.Name())
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatalf("seed corpus for %s: %v", f.Name(), err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		f.Fatalf("seed corpus for %s is empty", f.Name())
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			f.Fatal(err)
		}
		args, err := Decode(data)
		if err != nil {
			f.Fatalf("seed %s/%s: %v", f.Name(), n, err)
		}
		f.Add(args...)
	}
}

// Decode reads one seed file.
func Decode(data []byte) ([]any, error) {
	if !bytes.HasPrefix(data, []byte(header)) {
		return []any{data}, nil
	}
	var args []any
	for _, line := range strings.Split(string(data[len(header):]), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		open := strings.IndexByte(line, '(')
		if open < 0 || !strings.HasSuffix(line, ")") {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		typ, lit := line[:open], line[open+1:len(line)-1]
		switch typ {
		case "[]byte", "string":
			s, err := strconv.Unquote(lit)
			if err != nil {
				return nil, fmt.Errorf("line %q: %v", line, err)
			}
			if typ == "string" {
				args = append(args, s)
			} else {
				args = append(args, []byte(s))
			}
		case "int", "int64", "uint64", "uint", "uint8", "byte", "bool":
			switch typ {
			case "bool":
				b, err := strconv.ParseBool(lit)
				if err != nil {
					return nil, err
				}
				args = append(args, b)
			case "int":
				n, err := strconv.Atoi(lit)
				if err != nil {
					return nil, err
				}
				args = append(args, n)
			case "int64":
				n, err := strconv.ParseInt(lit, 0, 64)
				if err != nil {
					return nil, err
				}
				args = append(args, n)
			case "uint64", "uint", "uint8", "byte":
				n, err := strconv.ParseUint(lit, 0, 64)
				if err != nil {
					return nil, err
				}
				switch typ {
				case "uint":
					args = append(args, uint(n))
				case "uint8", "byte":
					if n > 255 {
						return nil, fmt.Errorf("line %q: %d does not fit a byte", line, n)
					}
					args = append(args, uint8(n))
				default:
					args = append(args, n)
				}
			}
		default:
			return nil, fmt.Errorf("unsupported type %q", typ)
		}
	}
	return args, nil
}
