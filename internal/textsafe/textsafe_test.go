package textsafe

import "testing"

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, café", "plain text, café"},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"\x1b[31mred", `\u001b[31mred`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"iso\u2066late\u2069", `iso\u2066late\u2069`},
		{"bad \xff byte", `bad \xff byte`},
		{"line\u2028sep", `line\u2028sep`},
		{"tag \U000E0041", `tag \U000e0041`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestHTML(t *testing.T) {
	if got, want := HTML(`<script>"x"&'y'</script>`+"\u202e"), `&lt;script&gt;&#34;x&#34;&amp;&#39;y&#39;&lt;/script&gt;\u202e`; got != want {
		t.Errorf("HTML = %q, want %q", got, want)
	}
}

func TestClip(t *testing.T) {
	if got := Clip("abcdef", 4); got != "abc…" {
		t.Errorf("Clip = %q", got)
	}
	if got := Clip("abc", 4); got != "abc" {
		t.Errorf("Clip = %q", got)
	}
}
