package witness

import (
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

const testCheckpoint = "example.com/log\n42\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"

// policyOf writes a policy naming the signers as w1, w2, w3... with a
// group line and quorum given by the caller.
func policyOf(signers []*Signer, tail string) string {
	var b strings.Builder
	b.WriteString("log example.com/log+12345678+AQ== https://log.example\n")
	for i, s := range signers {
		b.WriteString("witness w" + string(rune('1'+i)) + " " + s.VerifierKey() + " http://127.0.0.1:" + string(rune('1'+i)) + "000\n")
	}
	b.WriteString(tail)
	return b.String()
}

func cosigned(t *testing.T, signers ...*Signer) []byte {
	t.Helper()
	ns := make([]note.Signer, len(signers))
	for i, s := range signers {
		ns[i] = s
	}
	msg, err := note.Sign(&note.Note{Text: testCheckpoint}, ns...)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestEvaluate(t *testing.T) {
	w := []*Signer{fixedSigner(t, "w1.example", 1, 1700000001), fixedSigner(t, "w2.example", 2, 1700000002), fixedSigner(t, "w3.example", 3, 1700000003)}
	stranger := fixedSigner(t, "w1.example", 9, 1700000009) // w1's name, another key
	for _, tc := range []struct {
		name   string
		tail   string
		sigs   []*Signer
		want   bool
		signed string
	}{
		{"2 of 3, two signed", "group g 2 w1 w2 w3\nquorum g\n", w[:2], true, "w1 w2"},
		{"2 of 3, one signed", "group g 2 w1 w2 w3\nquorum g\n", w[2:], false, "w3"},
		{"2 of 3, none", "group g 2 w1 w2 w3\nquorum g\n", nil, false, ""},
		{"2 of 3, a stranger with w1's name", "group g 2 w1 w2 w3\nquorum g\n", []*Signer{stranger, w[1]}, false, "w2"},
		{"all", "group g all w1 w2 w3\nquorum g\n", w[:2], false, "w1 w2"},
		{"all, all signed", "group g all w1 w2 w3\nquorum g\n", w, true, "w1 w2 w3"},
		{"any", "group g any w1 w2 w3\nquorum g\n", w[2:], true, "w3"},
		{"one witness", "quorum w2\n", w[1:2], true, "w2"},
		{"one witness, another signed", "quorum w2\n", w[:1], false, "w1"},
		{"nested", "group a any w1 w2\ngroup b all a w3\nquorum b\n", []*Signer{w[1], w[2]}, true, "w2 w3"},
		{"nested, unmet", "group a any w1 w2\ngroup b all a w3\nquorum b\n", []*Signer{w[0], w[1]}, false, "w1 w2"},
		{"none", "quorum none\n", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(policyOf(w, tc.tail)))
			if err != nil {
				t.Fatal(err)
			}
			// The log's own signature is there too; Evaluate ignores it.
			logKey := fixedSigner(t, "example.com/log", 5, 0)
			ev := p.Evaluate(cosigned(t, append([]*Signer{logKey}, tc.sigs...)...))
			if ev.Satisfied != tc.want {
				t.Errorf("Satisfied = %v, want %v (%s)", ev.Satisfied, tc.want, ev.Describe())
			}
			var names []string
			for _, s := range ev.Signed {
				names = append(names, s.Witness)
				if s.Time.Unix() < 1700000000 {
					t.Errorf("%s: time %v", s.Witness, s.Time)
				}
			}
			if got := strings.Join(names, " "); got != tc.signed {
				t.Errorf("signed %q, want %q", got, tc.signed)
			}
		})
	}
}

func TestEvaluateInvalidCosignature(t *testing.T) {
	w := []*Signer{fixedSigner(t, "w1.example", 1, 1700000001), fixedSigner(t, "w2.example", 2, 1700000002)}
	p, err := ParsePolicy([]byte(policyOf(w, "group g all w1 w2\nquorum g\n")))
	if err != nil {
		t.Fatal(err)
	}
	good := cosigned(t, w...)
	// Move w1's cosignature onto a checkpoint of another size.
	_, sigs, _ := strings.Cut(string(good), "\n\n")
	forged := strings.Replace(testCheckpoint, "\n42\n", "\n43\n", 1) + "\n" + sigs
	ev := p.Evaluate([]byte(forged))
	if ev.Satisfied || len(ev.Signed) != 0 || len(ev.Invalid) != 2 {
		t.Errorf("cosignatures of another checkpoint counted: %+v", ev)
	}
	if !strings.Contains(ev.Describe(), "invalid cosignature from w1, w2") {
		t.Errorf("Describe: %s", ev.Describe())
	}
}

func TestParsePolicyErrors(t *testing.T) {
	w := fixedSigner(t, "w1.example", 1, 0).VerifierKey()
	w2 := fixedSigner(t, "w2.example", 2, 0).VerifierKey()
	alias := fixedSigner(t, "w1-alias.example", 1, 0).VerifierKey()
	for _, tc := range []struct{ text, want string }{
		{"", "no `quorum` line"},
		{"witness a " + w + "\n", "no `quorum` line"},
		{"witness a " + w + "\nquorum b\n", `quorum "b" is not a witness or group`},
		{"witness a " + w + "\nquorum a\nquorum a\n", "a second quorum"},
		{"witness group " + w + "\nquorum group\n", "is a keyword"},
		{"witness a " + w + "\nwitness a " + w2 + "\nquorum a\n", "defined twice"},
		{"witness a " + w + "\nwitness b " + w + "\nquorum a\n", "same public key as witness a"},
		// One public key under two key names (so two key hashes): it
		// would count twice toward the quorum (DESIGN §5).
		{"witness a " + w + "\nwitness b " + alias + "\ngroup g 2 a b\nquorum g\n", "same public key as witness a"},
		{"witness a notakey\nquorum a\n", "witness a:"},
		{"witness a " + w + " ftp://x\nquorum a\n", "not an http:// or https:// base URL"},
		{"witness a " + w + " http://x\nwitness b " + w2 + " http://x\nquorum a\n", "also the URL of witness key"},
		{"witness a " + w + "\ngroup g 2 a\nquorum g\n", "threshold 2 is more than its 1 members"},
		{"witness a " + w + "\ngroup g 0 a\nquorum g\n", "a threshold of 0"},
		{"witness a " + w + "\ngroup g 256 a\nquorum g\n", "not a number from 1 to 255"},
		{"witness a " + w + "\ngroup g 01 a\nquorum g\n", "not a number from 1 to 255"},
		{"witness a " + w + "\ngroup g any b\nquorum g\n", `member "b" is not a witness or group defined above`},
		{"witness a " + w + "\ngroup g any a a\nquorum g\n", "listed twice"},
		{"witness a " + w + "\ngroup g any\nquorum g\n", "want `group NAME N|any|all MEMBER...`"},
		{"witnesses a " + w + "\nquorum a\n", `unknown keyword "witnesses"`},
		{"witness a\u0007 " + w + "\nquorum a\u0007\n", "control character"},
		{"witness a " + w + "\nquorum a\n\xff", "not valid UTF-8"},
		{"log\nquorum none\n", "want `log VKEY [URL]`"},
	} {
		_, err := ParsePolicy([]byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePolicy(%q) = %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}

// A policy as Tessera's tests and documentation write it: comments,
// blank lines, a log line, URLs, nested groups.
func TestParsePolicyTessera(t *testing.T) {
	w := []*Signer{fixedSigner(t, "w1.example", 1, 0), fixedSigner(t, "w2.example", 2, 0), fixedSigner(t, "w3.example", 3, 0)}
	text := `# A policy file
log example.com/log+12345678+AQ==   # the log

witness w1 ` + w[0].VerifierKey() + ` https://w1.example/witness/
witness w2 ` + w[1].VerifierKey() + ` https://w2.example
witness w3 ` + w[2].VerifierKey() + ` https://w3.example
group g1 any w1 w2
group g2 2 g1 w3
quorum g2
`
	p, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "group g2: 2 of [(group g1: 1 of [w1 w2]) w3]" {
		t.Errorf("String() = %q", got)
	}
	if len(p.Required()) != 3 || p.Required()[0].URL != "https://w1.example/witness" {
		t.Errorf("Required: %+v", p.Required()[0])
	}
	if len(p.Logs()) != 1 {
		t.Errorf("Logs: %q", p.Logs())
	}
	// A plain Ed25519 key (type 0x01) is read as its cosignature key.
	plain, err := note.NewEd25519VerifierKey("w1.example", w[0].PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	p2, err := ParsePolicy([]byte("witness w1 " + plain + "\nquorum w1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := p2.Evaluate(cosigned(t, w[0])); !ev.Satisfied {
		t.Errorf("a type 0x01 key does not check its cosignature: %s", ev.Describe())
	}
}
