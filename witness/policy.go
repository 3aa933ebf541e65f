package witness

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Bounds on a policy, so that a hostile file cannot make every checkpoint
// check slow.
const (
	MaxPolicyBytes = 64 << 10
	MaxComponents  = 256
)

// A Witness is one witness a policy names.
type Witness struct {
	Name string // its name in the policy
	Key  *Key
	URL  string // its base URL ("" if the policy gives none)
}

// component is a witness or a group; groups refer to earlier components
// only, so the components are in an order where each comes after its
// members.
type component struct {
	name     string
	witness  *Witness // a witness, or
	n        int      // a group: n of members
	members  []int
	required bool // reachable from the quorum
}

// A Policy says which witnesses must cosign a checkpoint; see the package
// comment for its text form.
type Policy struct {
	comps   []component
	byName  map[string]int
	quorum  int // index in comps, or -1 for "quorum none"
	logs    []string
	witness []*Witness // the witnesses, in the file's order
}

// keywords may not name a component.
var keywords = map[string]bool{"witness": true, "group": true, "any": true, "all": true, "none": true, "quorum": true, "log": true}

// ParsePolicy reads a policy in the grammar Tessera's
// NewWitnessGroupFromPolicy reads. Errors name the line and the rule.
func ParsePolicy(text []byte) (*Policy, error) {
	if len(text) > MaxPolicyBytes {
		return nil, fmt.Errorf("policy: %d bytes, more than the %d a policy may have", len(text), MaxPolicyBytes)
	}
	if !utf8.Valid(text) {
		return nil, errors.New("policy: not valid UTF-8")
	}
	p := &Policy{byName: map[string]int{}, quorum: -1}
	quorum := ""
	quorumLine := 0
	urls := map[string]string{} // URL -> witness key name
	for i, line := range strings.Split(string(text), "\n") {
		ln := i + 1
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("policy line %d: %s", ln, fmt.Sprintf(format, args...))
		}
		newName := func(name string) error {
			if keywords[name] {
				return fail("%q is a keyword and cannot name a witness or group", name)
			}
			if strings.IndexFunc(name, notPrintable) >= 0 {
				return fail("name %q holds a control character", name)
			}
			if _, dup := p.byName[name]; dup {
				return fail("%q is defined twice", name)
			}
			if len(p.comps) == MaxComponents {
				return fail("more than %d witnesses and groups", MaxComponents)
			}
			return nil
		}
		switch fields[0] {
		case "log":
			if len(fields) < 2 || len(fields) > 3 {
				return nil, fail("want `log VKEY [URL]`, got %d fields", len(fields))
			}
			p.logs = append(p.logs, strings.Join(fields[1:], " "))
		case "witness":
			if len(fields) < 3 || len(fields) > 4 {
				return nil, fail("want `witness NAME VKEY [URL]`, got %d fields", len(fields))
			}
			name := fields[1]
			if err := newName(name); err != nil {
				return nil, err
			}
			k, err := ParseKey(fields[2])
			if err != nil {
				return nil, fail("witness %s: %v", name, err)
			}
			w := &Witness{Name: name, Key: k}
			if len(fields) == 4 {
				u, err := url.Parse(fields[3])
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
					return nil, fail("witness %s: URL %q is not an http:// or https:// base URL", name, fields[3])
				}
				if other, ok := urls[fields[3]]; ok && other != k.Name() {
					return nil, fail("witness %s: URL %s is also the URL of witness key %s", name, fields[3], other)
				}
				urls[fields[3]] = k.Name()
				w.URL = strings.TrimRight(fields[3], "/")
			}
			for _, o := range p.witness {
				// One public key is one witness, whatever its key names
				// (DESIGN §5): under two names it would count twice
				// toward a quorum.
				if o.Key.PublicKey().Equal(k.PublicKey()) {
					return nil, fail("witness %s has the same public key as witness %s (key names %q and %q): one key counts once", name, o.Name, k.Name(), o.Key.Name())
				}
			}
			p.byName[name] = len(p.comps)
			p.comps = append(p.comps, component{name: name, witness: w})
			p.witness = append(p.witness, w)
		case "group":
			if len(fields) < 4 {
				return nil, fail("want `group NAME N|any|all MEMBER...`, got %d fields", len(fields))
			}
			name, thr, members := fields[1], fields[2], fields[3:]
			if err := newName(name); err != nil {
				return nil, err
			}
			c := component{name: name}
			seen := map[string]bool{}
			for _, m := range members {
				j, ok := p.byName[m]
				if !ok {
					return nil, fail("group %s: member %q is not a witness or group defined above", name, m)
				}
				if seen[m] {
					return nil, fail("group %s: member %q is listed twice", name, m)
				}
				seen[m] = true
				c.members = append(c.members, j)
			}
			switch thr {
			case "any":
				c.n = 1
			case "all":
				c.n = len(members)
			default:
				n, err := strconv.ParseUint(thr, 10, 8)
				if err != nil || strconv.FormatUint(n, 10) != thr {
					return nil, fail("group %s: threshold %q is not a number from 1 to 255, any or all", name, thr)
				}
				if n == 0 {
					return nil, fail("group %s: a threshold of 0 is met by no witness at all; say `quorum none` if no witness is needed", name)
				}
				if int(n) > len(members) {
					return nil, fail("group %s: threshold %d is more than its %d members", name, n, len(members))
				}
				c.n = int(n)
			}
			p.byName[name] = len(p.comps)
			p.comps = append(p.comps, c)
		case "quorum":
			if len(fields) != 2 {
				return nil, fail("want `quorum NAME`, got %d fields", len(fields))
			}
			if quorum != "" {
				return nil, fail("a second quorum (the first is on line %d)", quorumLine)
			}
			quorum, quorumLine = fields[1], ln
		default:
			return nil, fail("unknown keyword %q (want log, witness, group or quorum)", fields[0])
		}
	}
	switch quorum {
	case "":
		return nil, errors.New("policy: no `quorum` line: say which witness or group must cosign (or `quorum none`)")
	case "none":
	default:
		j, ok := p.byName[quorum]
		if !ok {
			return nil, fmt.Errorf("policy line %d: quorum %q is not a witness or group defined in the policy", quorumLine, quorum)
		}
		p.quorum = j
		p.mark(j)
	}
	return p, nil
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

func (p *Policy) mark(j int) {
	if p.comps[j].required {
		return
	}
	p.comps[j].required = true
	for _, m := range p.comps[j].members {
		p.mark(m)
	}
}

// Witnesses are the policy's witnesses, in the order the file names them.
func (p *Policy) Witnesses() []*Witness { return p.witness }

// Required are the witnesses the quorum can count: those it reaches
// through its groups. A log sends its checkpoints to these.
func (p *Policy) Required() []*Witness {
	var out []*Witness
	for _, c := range p.comps {
		if c.witness != nil && c.required {
			out = append(out, c.witness)
		}
	}
	return out
}

// Logs are the policy's log lines, as written (custody does not use them).
func (p *Policy) Logs() []string { return p.logs }

// None reports whether the policy's quorum is "none": no witness needed.
func (p *Policy) None() bool { return p.quorum < 0 }

// String describes the quorum, like "group main: 2 of [w1 w2 w3]".
func (p *Policy) String() string {
	if p.quorum < 0 {
		return "no witnesses (quorum none)"
	}
	return p.describe(p.quorum)
}

func (p *Policy) describe(j int) string {
	c := p.comps[j]
	if c.witness != nil {
		return "witness " + c.name
	}
	parts := make([]string, len(c.members))
	for i, m := range c.members {
		if p.comps[m].witness != nil {
			parts[i] = p.comps[m].name
		} else {
			parts[i] = "(" + p.describe(m) + ")"
		}
	}
	return fmt.Sprintf("group %s: %d of [%s]", c.name, c.n, strings.Join(parts, " "))
}

// A Cosignature is one witness's valid cosignature on a checkpoint.
type Cosignature struct {
	Witness string    `json:"witness"`  // its name in the policy
	KeyName string    `json:"key_name"` // its key's name
	Time    time.Time `json:"time"`     // when it cosigned
	Line    string    `json:"-"`        // the signature line, without its newline
}

// An Evaluation is what a policy makes of one checkpoint's cosignatures.
type Evaluation struct {
	Satisfied bool          `json:"satisfied"`
	Quorum    string        `json:"quorum"`
	Signed    []Cosignature `json:"signed,omitempty"`
	// Invalid names witnesses whose line is there but does not verify
	// over this checkpoint.
	Invalid []string `json:"invalid,omitempty"`
	// Missing names the witnesses the quorum counts that did not cosign.
	Missing []string `json:"missing,omitempty"`
}

// Evaluate checks the cosignatures on a signed checkpoint (a signed note:
// body, blank line, signature lines) against the policy. It does not check
// the log's own signature: open the checkpoint with the log's key for that.
// A cosignature counts only if its key is the witness's and it verifies
// over this checkpoint's body.
func (p *Policy) Evaluate(checkpoint []byte) Evaluation {
	ev := Evaluation{Quorum: p.String()}
	signed := make([]bool, len(p.comps))
	for j, c := range p.comps {
		if c.witness == nil {
			continue
		}
		n, err := note.Open(checkpoint, note.VerifierList(c.witness.Key))
		var invalid *note.InvalidSignatureError
		switch {
		case err == nil && len(n.Sigs) == 1:
			t, terr := SignatureTime(n.Sigs[0].Base64)
			if terr != nil {
				ev.Invalid = append(ev.Invalid, c.name)
				continue
			}
			signed[j] = true
			ev.Signed = append(ev.Signed, Cosignature{Witness: c.name, KeyName: c.witness.Key.Name(), Time: t,
				Line: "— " + n.Sigs[0].Name + " " + n.Sigs[0].Base64})
		case errors.As(err, &invalid):
			ev.Invalid = append(ev.Invalid, c.name)
		default:
			if c.required {
				ev.Missing = append(ev.Missing, c.name)
			}
		}
	}
	if p.quorum < 0 {
		ev.Satisfied = true
		return ev
	}
	// Members come before their groups: one pass in order decides all.
	for j, c := range p.comps {
		if c.witness != nil {
			continue
		}
		k := 0
		for _, m := range c.members {
			if signed[m] {
				k++
			}
		}
		signed[j] = k >= c.n
	}
	ev.Satisfied = signed[p.quorum]
	return ev
}

// Describe is a sentence for people: who cosigned, when, and whether that
// meets the quorum.
func (ev Evaluation) Describe() string {
	var b strings.Builder
	if len(ev.Signed) == 0 {
		b.WriteString("no witness cosigned it")
	} else {
		b.WriteString("cosigned by ")
		for i, s := range ev.Signed {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%s) at %s", s.Witness, s.KeyName, s.Time.Format(time.RFC3339))
		}
	}
	if len(ev.Invalid) > 0 {
		fmt.Fprintf(&b, "; invalid cosignature from %s", strings.Join(ev.Invalid, ", "))
	}
	if ev.Satisfied {
		fmt.Fprintf(&b, "; meets the quorum (%s)", ev.Quorum)
	} else {
		fmt.Fprintf(&b, "; does not meet the quorum (%s)", ev.Quorum)
		if len(ev.Missing) > 0 {
			fmt.Fprintf(&b, ": missing %s", strings.Join(ev.Missing, ", "))
		}
	}
	return b.String()
}
