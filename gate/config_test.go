package gate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/custodylog/custody/internal/fuzzseed"
	"github.com/custodylog/custody/scope"
)

func TestTemplateRender(t *testing.T) {
	for _, c := range []struct {
		tmpl, args, want, err string
	}{
		{"fs/{path}", `{"path":"/a/b.txt"}`, "fs/a/b.txt", ""},
		{"fs/{path}", `{"path":"a/b.txt"}`, "fs/a/b.txt", ""},
		{"fs/{path}", `{"path":"///a"}`, "fs/a", ""},
		{"db/{table}/{id}", `{"table":"users","id":42}`, "db/users/42", ""},
		{"static", `{}`, "static", ""},
		{"fs/{path}", `{}`, "", `argument "path" is missing`},
		{"fs/{path}", `{"path":"/a/../etc"}`, "", "only of dots"},
		{"fs/{path}", `{"path":"/a b"}`, "", "byte 0x20"},
		{"fs/{path}", `{"path":"/a//b"}`, "", "empty segment"},
		{"fs/{path}", `{"path":"/"}`, "", "empty segment"},
		{"fs/{path}", `{"path":1.5}`, "", "a fraction or an exponent"},
		{"num/{n}", `{"n":9007199254740991}`, "num/9007199254740991", ""},
		{"num/{n}", `{"n":-9007199254740991}`, "num/-9007199254740991", ""},
		{"num/{n}", `{"n":9007199254740992}`, "", "outside ±(2^53-1)"},
		{"num/{n}", `{"n":9007199254740993}`, "", "outside ±(2^53-1)"},
		{"num/{n}", `{"n":-9007199254740992}`, "", "outside ±(2^53-1)"},
		{"num/{n}", `{"n":99999999999999999999}`, "", "outside ±(2^53-1)"},
		{"num/{n}", `{"n":1e3}`, "", "a fraction or an exponent"},
		{"num/{n}", `{"n":10E0}`, "", "a fraction or an exponent"},
		{"num/{n}", `{"n":2.0}`, "", "a fraction or an exponent"},
		{"fs/{path}", `{"path":null}`, "", "null"},
		{"fs/{path}", `{"path":["a"]}`, "", "an array"},
		{"fs/{path}", `{"path":true}`, "", "a boolean"},
		{"fs/{path}", `{"path":"` + strings.Repeat("a", 300) + `"}`, "", "over the 256-byte limit"},
	} {
		tm, err := ParseTemplate(c.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", c.tmpl, err)
		}
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.args), &args); err != nil {
			t.Fatal(err)
		}
		got, err := tm.Render(args)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s %s: %q %v, want %q", c.tmpl, c.args, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %s: %q %v, want an error with %q", c.tmpl, c.args, got, err, c.err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{`{}`, "no tools"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/{path}"}},"extra":1}`, "unknown field"},
		{`{"tools":{"w":{"capability":"fs write","target":"fs/{path}"}}}`, "capability"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/{path"}}}`, "'{' without '}'"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/path}"}}}`, "'}' without '{'"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/{}"}}}`, "argument name"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs//{p}"}}}`, "never make an identifier"},
		{`{"tools":{"w":{"capability":"fs.write","target":""}}}`, "no target"},
		{`{"tools":{"w":{"capability":"fs.write","targets":["a",""]}}}`, "empty template"},
		{`{"tools":{"w":{"capability":"fs.write","target":"a","targets":["b"]}}}`, "not both"},
		{`{"tools":{"w":{"capability":"fs.write","targets":["a","a"]}}}`, "twice"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/{p}","inert":["p"]}}}`, "both in a template and inert"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/{p}","paths":{"q":"absolute"}}}}`, "no target or step template uses"},
		{`{"tools":{"w":{"capability":"fs.write","target":"fs/{p}","paths":{"p":"relative"}}}}`, "want \"absolute\""},
		{`{"tools":{"w":{"capability":"fs.write","target":"t","pin":"sha256:AB"}}}`, "pin"},
		{`{"resources":[{"uri":"file:///{p}","capability":"fs.read","target":"fs/{q}"}]}`, "does not have"},
		{`{"resources":[{"uri":"file:///{p","capability":"fs.read","target":"fs/x"}]}`, "without"},
		{`{"tools":{"w":{"capability":"fs.write","target":"t","step":"a b"}}}`, "step"},
		{`{"tools":{"w":{"capability":"fs.write","target":"t","reserve":{"usd":-1}}}}`, "want 0..2^53-1"},
		{`{"tools":{"w":{"capability":"fs.write","target":"t"}},"passthrough":["w"]}`, "both gated"},
		{`{"tools":{"w":{"capability":"fs.write","target":"t"}},"passthrough":["x","x"]}`, "twice"},
		{`{"tools":{"w":null}}`, "null rule"},
		{`{"tools":{"w":{"capability":"a","target":"t"}}} {}`, "trailing data"},
	} {
		_, err := ParseConfig([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error with %q", c.in, err, c.err)
		}
	}
	cfg, err := ParseConfig([]byte(`{"tools":{"w":{"capability":"fs.write","target":"fs/{path}","step":"w/{path}","reserve":{"writes":1}}},"passthrough":["ls"],"filter_list":false}`))
	if err != nil || cfg.Filter() || !cfg.Passes("ls") || cfg.Passes("w") {
		t.Fatalf("a good config: %v", err)
	}
}

// FuzzParseConfig feeds arbitrary bytes to the configuration parser and,
// when it accepts them, arbitrary arguments to every template. It never
// panics; a template never renders something that is not an identifier.
func FuzzParseConfig(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		args := map[string]json.RawMessage{}
		_ = json.Unmarshal(data, &args)
		for name, r := range cfg.Tools {
			if scope.CheckIdentifier(r.Capability) != nil {
				t.Fatalf("tool %q: capability %q accepted", name, r.Capability)
			}
			for _, tm := range r.templates() {
				if tm == nil {
					continue
				}
				if out, err := tm.Render(args); err == nil && scope.CheckIdentifier(out) != nil {
					t.Fatalf("template %s rendered %q", tm, out)
				}
				for _, a := range tm.Args() {
					args[a] = json.RawMessage(`"/x/y"`)
				}
				if out, err := tm.Render(args); err != nil || scope.CheckIdentifier(out) != nil {
					t.Fatalf("template %s with plain arguments: %q %v", tm, out, err)
				}
			}
		}
	})
}
