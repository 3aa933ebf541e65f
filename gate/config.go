package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/custodylog/custody/scope"
)

// Config maps MCP tool names and resource URIs to custody steps. It is
// read from a small JSON file:
//
//	{"tools": {
//	   "write_file": {"capability": "fs.write", "target": "fs/{path}",
//	                  "paths": {"path": "realpath"}, "inert": ["content"],
//	                  "reserve": {"writes": 1}, "pin": "sha256:..."},
//	   "move_file": {"capability": "fs.write",
//	                 "targets": ["fs/{source}", "fs/{destination}"]}},
//	 "resources": [{"uri": "file:///{path}", "capability": "fs.read",
//	                "target": "fs/{path}"}],
//	 "prompts": false, "completions": false,
//	 "passthrough": ["list_allowed_directories"],
//	 "filter_list": true}
//
// A tool in tools is gated: each call writes one pending RECEIPT per
// target (the capability as its action, the target and step the
// templates give for the call's arguments; the first carries the
// reserve) and is forwarded only when the ledger accepted every one. Each
// argument of the tool's input schema is named by a template or declared
// inert; a tool with an undeclared argument, or whose definition differs
// from its pin, is not offered. A resource URI is read or subscribed to
// only through a resources rule. A tool in passthrough is forwarded
// ungated (the gate says so when it starts). Any other tool, resource,
// prompt or completion is refused. filter_list (default true) hides from
// tools/list every tool the grant could never allow.
type Config struct {
	Tools       map[string]*ToolRule `json:"tools"`
	Resources   []*ResourceRule      `json:"resources,omitempty"`
	Prompts     bool                 `json:"prompts,omitempty"`
	Completions bool                 `json:"completions,omitempty"`
	Passthrough []string             `json:"passthrough,omitempty"`
	FilterList  *bool                `json:"filter_list,omitempty"`
}

// ToolRule is how one tool's calls become steps.
type ToolRule struct {
	// Capability is the RECEIPTs' action: an identifier.
	Capability string `json:"capability"`
	// Target is a template for the RECEIPT's target; Targets, instead,
	// several (one pending RECEIPT each: a tool that acts on two things
	// names both).
	Target  string   `json:"target,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// Step is a template for the step id; empty: the tool name, '/' and
	// a counter (write_file/7).
	Step string `json:"step,omitempty"`
	// Reserve is the first pending RECEIPT's reserve (the others reserve
	// 0). Limit keys in force on the grant's chain that it does not name
	// are reserved at 0.
	Reserve map[string]int64 `json:"reserve,omitempty"`
	// Inert names the arguments that designate nothing acted on (a file's
	// content, a flag): every argument of the tool's input schema is
	// either used by a template or inert.
	Inert []string `json:"inert,omitempty"`
	// Paths declares template arguments that are file paths: "absolute"
	// (a value without a leading '/' is refused) or "realpath" (absolute,
	// and resolved by the gate through symbolic links before the target
	// is made and the call forwarded; for a spawned upstream only).
	Paths map[string]string `json:"paths,omitempty"`
	// Pin is "sha256:<hex>" of the tool's definition (DefinitionHash); a
	// tool whose definition differs is not offered.
	Pin string `json:"pin,omitempty"`

	targets []*Template
	step    *Template
}

// ResourceRule is how reads of (and subscriptions to) resources whose
// URI matches a template become steps.
type ResourceRule struct {
	// URI is a template: literal text and {name} placeholders, each
	// matching one or more characters (slashes too). The placeholder's
	// value is percent-decoded.
	URI        string `json:"uri"`
	Capability string `json:"capability"`
	Target     string `json:"target"`

	uri    *regexp.Regexp
	names  []string
	target *Template
}

// Path modes of ToolRule.Paths.
const (
	PathAbsolute = "absolute"
	PathRealpath = "realpath"
)

// MaxTargets bounds a tool's targets.
const MaxTargets = 16

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
	if len(c.Tools) == 0 && len(c.Passthrough) == 0 && len(c.Resources) == 0 {
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
		srcs := r.Targets
		switch {
		case r.Target != "" && len(r.Targets) > 0:
			return nil, fmt.Errorf("gate config: tool %q: give target or targets, not both", name)
		case r.Target != "":
			srcs = []string{r.Target}
		case len(r.Targets) == 0:
			return nil, fmt.Errorf("gate config: tool %q: no target (give target, or targets for a tool that acts on several things)", name)
		case len(r.Targets) > MaxTargets:
			return nil, fmt.Errorf("gate config: tool %q: %d targets, over the limit of %d", name, len(r.Targets), MaxTargets)
		}
		used := map[string]bool{}
		for i, src := range srcs {
			if slices.Contains(srcs[:i], src) {
				return nil, fmt.Errorf("gate config: tool %q: target %q twice", name, src)
			}
			tm, err := ParseTemplate(src)
			if err != nil {
				return nil, fmt.Errorf("gate config: tool %q: target: %v", name, err)
			}
			r.targets = append(r.targets, tm)
			for _, a := range tm.Args() {
				used[a] = true
			}
		}
		var err error
		if r.Step != "" {
			if r.step, err = ParseTemplate(r.Step); err != nil {
				return nil, fmt.Errorf("gate config: tool %q: step: %v", name, err)
			}
			for _, a := range r.step.Args() {
				used[a] = true
			}
		}
		for i, a := range r.Inert {
			switch {
			case a == "":
				return nil, fmt.Errorf("gate config: tool %q: inert: an empty argument name", name)
			case used[a]:
				return nil, fmt.Errorf("gate config: tool %q: argument %q is both in a template and inert", name, a)
			case slices.Contains(r.Inert[:i], a):
				return nil, fmt.Errorf("gate config: tool %q: inert names %q twice", name, a)
			}
		}
		for a, mode := range r.Paths {
			if mode != PathAbsolute && mode != PathRealpath {
				return nil, fmt.Errorf("gate config: tool %q: paths.%s = %q: want %q or %q", name, a, mode, PathAbsolute, PathRealpath)
			}
			if !used[a] {
				return nil, fmt.Errorf("gate config: tool %q: paths.%s: no target or step template uses argument %q", name, a, a)
			}
		}
		if r.Pin != "" && !validPin(r.Pin) {
			return nil, fmt.Errorf("gate config: tool %q: pin %q: want sha256: and 64 lowercase hex digits (custody gate pin writes it)", name, r.Pin)
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
	for i, r := range c.Resources {
		if r == nil {
			return nil, fmt.Errorf("gate config: resources[%d]: null rule", i)
		}
		if err := scope.CheckIdentifier(r.Capability); err != nil {
			return nil, fmt.Errorf("gate config: resources[%d] (%s): capability: %v", i, r.URI, err)
		}
		var err error
		if r.uri, r.names, err = parseURITemplate(r.URI); err != nil {
			return nil, fmt.Errorf("gate config: resources[%d]: uri: %v", i, err)
		}
		if r.target, err = ParseTemplate(r.Target); err != nil {
			return nil, fmt.Errorf("gate config: resources[%d] (%s): target: %v", i, r.URI, err)
		}
		for _, a := range r.target.Args() {
			if !slices.Contains(r.names, a) {
				return nil, fmt.Errorf("gate config: resources[%d] (%s): target %s uses {%s}, which the uri does not have", i, r.URI, r.Target, a)
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
// argument must be present and a string or an integer (within
// ±(2^53-1), no fraction or exponent); the result must be an identifier.
// The error names the argument and the rule.
func (t *Template) Render(args map[string]json.RawMessage) (string, error) {
	return t.render(func(name string) (string, error) {
		raw, ok := args[name]
		if !ok {
			return "", fmt.Errorf("argument %q is missing", name)
		}
		return argValue(name, raw)
	})
}

// RenderValues fills the template from argument values already read.
func (t *Template) RenderValues(vals map[string]string) (string, error) {
	return t.render(func(name string) (string, error) {
		v, ok := vals[name]
		if !ok {
			return "", fmt.Errorf("argument %q is missing", name)
		}
		return v, nil
	})
}

// ArgValue is an argument's text for a template: a JSON string's value,
// or an integer's decimal digits (within ±(2^53-1)).
func ArgValue(name string, raw json.RawMessage) (string, error) { return argValue(name, raw) }

// Declared reports whether a tool's argument is named by a template or
// declared inert.
func (r *ToolRule) Declared(arg string) bool {
	if slices.Contains(r.Inert, arg) {
		return true
	}
	for _, t := range r.templates() {
		if slices.Contains(t.Args(), arg) {
			return true
		}
	}
	return false
}

func (r *ToolRule) templates() []*Template {
	out := slices.Clone(r.targets)
	if r.step != nil {
		out = append(out, r.step)
	}
	return out
}

// TemplateArgs are the arguments the rule's templates use, each once.
func (r *ToolRule) TemplateArgs() []string {
	var out []string
	for _, t := range r.templates() {
		for _, a := range t.Args() {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

func validPin(p string) bool {
	h, ok := strings.CutPrefix(p, "sha256:")
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == ""
}

// DefinitionHash is the pin of a tool's definition: "sha256:" and the
// SHA-256 of the JSON object {"description","inputSchema","name"} with
// every object's keys sorted and no insignificant whitespace (numbers as
// the shortest form of their double). The title, annotations and output
// schema are not part of it.
func DefinitionHash(name, description string, inputSchema any) (string, error) {
	raw, err := json.Marshal(inputSchema)
	if err != nil {
		return "", err
	}
	var schema any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"name": name, "description": description, "inputSchema": schema}); err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// parseURITemplate compiles a resource URI template: literal text and
// {name} placeholders ([A-Za-z0-9_.-]+), each matching one or more
// characters.
func parseURITemplate(s string) (*regexp.Regexp, []string, error) {
	if s == "" {
		return nil, nil, errors.New("empty template")
	}
	var re strings.Builder
	var names []string
	re.WriteString("^")
	rest := s
	for rest != "" {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		if rest[i] == '}' {
			return nil, nil, fmt.Errorf("template %q: '}' without '{'", s)
		}
		re.WriteString(regexp.QuoteMeta(rest[:i]))
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, nil, fmt.Errorf("template %q: '{' without '}'", s)
		}
		name := rest[i+1 : i+j]
		if name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != "" {
			return nil, nil, fmt.Errorf("template %q: placeholder {%s}: a name is [A-Za-z0-9_.-]+", s, name)
		}
		if slices.Contains(names, name) {
			return nil, nil, fmt.Errorf("template %q: {%s} twice", s, name)
		}
		names = append(names, name)
		re.WriteString("(.+)")
		rest = rest[i+j+1:]
	}
	re.WriteString("$")
	rx, err := regexp.Compile(re.String())
	if err != nil {
		return nil, nil, fmt.Errorf("template %q: %v", s, err)
	}
	return rx, names, nil
}

// Match reports whether uri matches the rule and, if so, the target it
// makes (an error when the values make no identifier).
func (r *ResourceRule) Match(uri string) (target string, ok bool, err error) {
	m := r.uri.FindStringSubmatch(uri)
	if m == nil {
		return "", false, nil
	}
	vals := map[string]string{}
	for i, n := range r.names {
		v, err := url.PathUnescape(m[i+1])
		if err != nil {
			return "", true, fmt.Errorf("uri %s: {%s}: %v", uri, n, err)
		}
		vals[n] = v
	}
	target, err = r.target.RenderValues(vals)
	if err != nil {
		return "", true, fmt.Errorf("uri %s: target %s: %v", uri, r.target, err)
	}
	return target, true, nil
}

// Resource finds the first rule whose URI template matches uri.
func (c *Config) Resource(uri string) (rule *ResourceRule, target string, err error) {
	for _, r := range c.Resources {
		t, ok, err := r.Match(uri)
		if ok {
			return r, t, err
		}
	}
	return nil, "", nil
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

// MaxSafeInteger is 2^53-1, the largest integer every JSON reader
// (a double) holds exactly.
const MaxSafeInteger = 1<<53 - 1

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
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		// A number means one thing only as an integer a double holds
		// exactly: a JavaScript server reads 9007199254740993 as ...992.
		if bytes.ContainsAny(raw, ".eE") {
			return "", fmt.Errorf("argument %q is %s: a fraction or an exponent; a template takes a string or an integer", name, raw)
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > MaxSafeInteger || n < -MaxSafeInteger {
			return "", fmt.Errorf("argument %q is %.40s: outside ±(2^53-1), where a JSON number is not read the same by every server", name, raw)
		}
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
		}
	}
	return "", fmt.Errorf("argument %q is %s; a template takes a string or an integer", name, what)
}
