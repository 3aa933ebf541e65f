// Command canonhelper reads hex-encoded inputs, one a line, from standard
// input and writes, for each, what Go's canon package says of them: the
// strict reading (canon.Parse: the bytes must be canonical) and the relaxed
// one (canon.Canonicalize: any spelling, canonical bytes out). Each answer
// is "ok <hex of the canonical bytes>" or "err <code>". The Python SDK's
// differential test (sdk/python/tests/test_differential.py) compares the
// Python and TypeScript SDKs' answers with these.
package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/custodylog/custody/canon"
)

func answer(out []byte, err error) string {
	if err != nil {
		var ce *canon.Error
		if errors.As(err, &ce) {
			return "err " + ce.Code
		}
		return "err other"
	}
	return "ok " + hex.EncodeToString(out)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for in.Scan() {
		data, err := hex.DecodeString(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, "canonhelper: a line is not hex:", err)
			os.Exit(2)
		}
		var strict string
		if _, err := canon.Parse(data); err != nil {
			strict = answer(nil, err)
		} else {
			strict = answer(data, nil)
		}
		relaxed := answer(canon.Canonicalize(data))
		fmt.Fprintf(w, "%s\t%s\n", strict, relaxed)
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "canonhelper:", err)
		os.Exit(2)
	}
}
