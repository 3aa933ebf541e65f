package textsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	in := "{\n  \"r\": \"x\u202ey\u0007\U000E0041<&>\"\n}"
	js := JSON([]byte(in))
	var v map[string]string
	if err := json.Unmarshal(js, &v); err != nil || v["r"] != "x\u202ey\u0007\U000E0041<&>" {
		t.Fatalf("JSON(%q) = %s, %v: not the same JSON", in, js, err)
	}
	if bytes.ContainsFunc(js, func(r rune) bool { return r != '\n' && Dangerous(r) }) || !bytes.Contains(js, []byte(`\udb40\udc41`)) {
		t.Fatalf("JSON(%q) = %s: a dangerous rune is left", in, js)
	}
	if safe := []byte("{\"a\": \"b\"}\n"); &JSON(safe)[0] != &safe[0] {
		t.Error("safe JSON is copied")
	}
}

func TestWriteAndPrettyJSON(t *testing.T) {
	var b strings.Builder
	if err := WriteJSON(&b, map[string]string{"k": "<\u202e>"}); err != nil || b.String() != "{\n  \"k\": \"<\\u202e>\"\n}\n" {
		t.Fatalf("WriteJSON: %q, %v", b.String(), err)
	}
	if got := string(PrettyJSON([]byte(`{"a":[1]}`))); got != "{\n  \"a\": [\n    1\n  ]\n}" {
		t.Errorf("PrettyJSON = %q", got)
	}
	if got := string(PrettyJSON([]byte("not json\u202e"))); got != `not json\u202e` {
		t.Errorf("PrettyJSON of text = %q", got)
	}
}
