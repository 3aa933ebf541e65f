package server

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/custodylog/custody/server/api"
)

// TestAppendAnswerMatchesJSON checks that appendAnswer writes
// json.Marshal's bytes for any answer it writes (checkpoints with their
// newlines and the signature lines' em dash, strings json.Marshal
// escapes, nil and empty lists), and leaves held receipts' rules to
// json.Marshal.
func TestAppendAnswerMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "accepted", "denied", "scope_exceeded", "the grant's scope does not cover \"prod\"",
		"example.com/log\n42\nq1w2e3r4t5y6u7i8o9p0+/==\n\n\u2014 example.com/log AbCdEf+/==\n",
		"a<b>&c", "tab\there", "cr\r", "\x00", "é ü 日本", "\u2028", "\u2029", "\xff\xfe", "back\\slash", "\x7f"}
	str := func() string {
		if rng.IntN(20) > 0 {
			return strs[rng.IntN(6)] // those appendAnswer writes itself
		}
		return strs[rng.IntN(len(strs))]
	}
	list := func() []string {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		l := make([]string, 1+rng.IntN(4))
		for i := range l {
			l[i] = str()
		}
		return l
	}
	written := 0
	for range 20000 {
		out := api.AppendResponse{Verdict: str(), Index: []uint64{0, 7, math.MaxUint64}[rng.IntN(3)], ReasonCode: str(), Reason: str(),
			Duplicate: rng.IntN(2) == 0, Notes: list(), ExpiresAt: str(), Checkpoint: str(), InclusionProof: list()}
		if rng.IntN(2) == 0 {
			idx := uint64(rng.IntN(1000))
			out.DenialIndex = &idx
		}
		switch rng.IntN(3) {
		case 0:
			out.Leaf = nil
		case 1:
			out.Leaf = []byte{}
		default:
			out.Leaf = make([]byte, rng.IntN(600))
			for i := range out.Leaf {
				out.Leaf[i] = byte(rng.IntN(256))
			}
		}
		if rng.IntN(8) == 0 {
			out.Rules = []api.HoldRule{{}}
		}
		want, err := json.Marshal(&out)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendAnswer([]byte("x"), &out)
		if !ok {
			plain := strings.NewReplacer(`\u003c`, "", `\u003e`, "", `\u0026`, "").Replace(string(want))
			if len(out.Rules) == 0 && !strings.Contains(plain, `\u`) {
				t.Fatalf("appendAnswer left %s to json.Marshal", want)
			}
			continue
		}
		written++
		if got[0] != 'x' || !bytes.Equal(got[1:], want) {
			t.Fatalf("appendAnswer(%#v)\n got %s\nwant x%s", out, got, want)
		}
	}
	if written < 2000 {
		t.Fatalf("appendAnswer wrote only %d answers itself", written)
	}
}
