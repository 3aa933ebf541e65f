package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/custodylog/custody/scope"
)

// Config maps MCP tool names to custody steps. It is read from a small
// JSON file:
//
//	{"tools": {
//	   "write_file": {"capability": "fs.write", "target": "fs/{path}",
//	                  "step": "write/{path}", "reserve": {"writes": 1}}},
//	 "passthrough": ["list_allowed_directories"],
//	 "filter_list": true}
//
// A tool in tools is gated: each call writes a pending RECEIPT with that
// capability (action), the target and step the templates give for the
// call's arguments, and that reserve. A tool in passthrough is forwarded
// ungated (the gate says so when it starts). Any other tool is refused.
// filter_list (default true) hides from tools/list every tool the grant
// could never allow.
type Config struct {
	Tools       map[string]*ToolRule `json:"tools"`
	Passthrough []string             `json:"passthrough,omitempty"`
	FilterList  *bool                `json:"filter_list,omitempty"`
}

// ToolRule is how one tool's calls become steps.
type ToolRule struct {
	// Capability is the RECEIPT's action: an identifier.
	Capability string `json:"capability"`
	// Target is a template for the RECEIPT's target.
	Target string `json:"target"`
	// Step is a template for the step id; empty: the tool name, '/' and
	// a counter (write_file/7).
	Step string `json:"step,omitempty"`
	// Reserve is the pending RECEIPT's reserve. Limit keys in force on
	// the grant's chain that it does not name are reserved at 0.
	Reserve map[string]int64 `json:"reserve,omitempty"`

	target, step *Template
}

// Filter reports whether tools/list hides tools the grant could never
// allow (the default).
func (c *Config) Filter() bool { return c.FilterList == nil || *c.FilterList }

// Passes reports whether tool is forwarded ungated.
func (c *Config) Passes(tool string) bool { return slices.Contains(c.Passthrough, tool) }

// MaxConfig bounds a configuration file.
const MaxConfig = 1 << 20

// ParseConfig reads and checks a configuration. Unknown fields, a
// capability that is not an identifier, a template that could never make
// an identifier, a negative reserve, or a tool both gated and passed
// through are errors that name the tool and the rule.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > MaxConfig {
		return nil, fmt.Errorf("gate config: %d bytes, over the %d-byte limit", len(data), MaxConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("gate config: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("gate config: trailing data after the JSON object")
	}
	if len(c.Tools) == 0 && len(c.Passthrough) == 0 {
		return nil, errors.New(`gate config: no tools and no passthrough: every call would be refused (give "tools")`)
	}
	for name, r := range c.Tools {
		if r == nil {
			return nil, fmt.Errorf("gate config: tool %q: null rule", name)
		}
		if name == "" {
			return nil, errors.New("gate config: a tool with an empty name")
		}
		if err := scope.CheckIdentifier(r.Capability); err != nil {
			return nil, fmt.Errorf("gate config: tool %q: capability: %v", name, err)
		}
		var err error
		if r.target, err = ParseTemplate(r.Target); err != nil {
			return nil, fmt.Errorf("gate config: tool %q: target: %v", name, err)
		}
		if r.Step != "" {
			if r.step, err = ParseTemplate(r.Step); err != nil {
				return nil, fmt.Errorf("gate config: tool %q: step: %v", name, err)
			}
		}
		for k, v := range r.Reserve {
			if err := scope.CheckIdentifier(k); err != nil {
				return nil, fmt.Errorf("gate config: tool %q: reserve key: %v", name, err)
			}
			if v < 0 || v > 1<<53-1 {
				return nil, fmt.Errorf("gate config: tool %q: reserve %s = %d: want 0..2^53-1", name, k, v)
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range c.Passthrough {
		if name == "" {
			return nil, errors.New("gate config: passthrough: an empty tool name")
		}
		if _, ok := c.Tools[name]; ok {
			return nil, fmt.Errorf("gate config: tool %q is both gated (tools) and passed through (passthrough)", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("gate config: passthrough names %q twice", name)
		}
		seen[name] = true
	}
	return &c, nil
}

// Template is a target or step template: literal identifier text with
// {arg} placeholders, each replaced by that argument's value with its
// leading '/'s dropped (fs/{path} with path /a/b.txt gives fs/a/b.txt).
type Template struct {
	src   string
	parts []part
}

type part struct {
	lit string
	arg string // a placeholder when not ""
}

// ParseTemplate parses a template. Placeholders name an argument
// ([A-Za-z0-9_.-]+); the literal text must be identifier text; and the
// template with every placeholder filled must be able to make an
// identifier.
func ParseTemplate(s string) (*Template, error) {
	if s == "" {
		return nil, errors.New("empty template")
	}
	t := &Template{src: s}
	rest := s
	for rest != "" {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			t.parts = append(t.parts, part{lit: rest})
			break
		}
		if rest[i] == '}' {
			return nil, fmt.Errorf("template %q: '}' without '{'", s)
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("template %q: '{' without '}'", s)
		}
		name := rest[i+1 : i+j]
		if name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != "" {
			return nil, fmt.Errorf("template %q: placeholder {%s}: an argument name is [A-Za-z0-9_.-]+", s, name)
		}
		t.parts = append(t.parts, part{arg: name})
		rest = rest[i+j+1:]
	}
	// Filled with a plain value, the template must make an identifier;
	// otherwise no call could ever pass.
	if _, err := t.render(func(string) (string, error) { return "x", nil }); err != nil {
		return nil, fmt.Errorf("template %q can never make an identifier: %v", s, err)
	}
	return t, nil
}

// String is the template's source.
func (t *Template) String() string { return t.src }

// Args are the argument names the template uses, in order.
func (t *Template) Args() []string {
	var out []string
	for _, p := range t.parts {
		if p.arg != "" {
			out = append(out, p.arg)
		}
	}
	return out
}

// Prefix is the literal text before the first placeholder (the whole
// template when it has none).
func (t *Template) Prefix() (prefix string, whole bool) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.arg != "" {
			return b.String(), false
		}
		b.WriteString(p.lit)
	}
	return b.String(), true
}

// Render fills the template from a call's arguments (a JSON object). An
// argument must be present and a string or an integer; the result must be
// an identifier. The error names the argument and the rule.
func (t *Template) Render(args map[string]json.RawMessage) (string, error) {
	return t.render(func(name string) (string, error) {
		raw, ok := args[name]
		if !ok {
			return "", fmt.Errorf("argument %q is missing", name)
		}
		return argValue(name, raw)
	})
}

func (t *Template) render(value func(string) (string, error)) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.arg == "" {
			b.WriteString(p.lit)
			continue
		}
		v, err := value(p.arg)
		if err != nil {
			return "", err
		}
		b.WriteString(strings.TrimLeft(v, "/"))
	}
	out := b.String()
	if err := scope.CheckIdentifier(out); err != nil {
		return "", err
	}
	return out, nil
}

// argValue is an argument's text: a JSON string's value, or an integer's
// decimal digits.
func argValue(name string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("argument %q: %v", name, err)
		}
		return s, nil
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return strconv.FormatInt(n, 10), nil
	}
	what := "a JSON value"
	if len(raw) > 0 {
		switch raw[0] {
		case '{':
			what = "an object"
		case '[':
			what = "an array"
		case 't', 'f':
			what = "a boolean"
		case 'n':
			what = "null"
		default:
			what = "a non-integer number"
		}
	}
	return "", fmt.Errorf("argument %q is %s; a template takes a string or an integer", name, what)
}
