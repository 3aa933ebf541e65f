package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerServesEmbeddedPageWithHeaders(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	for _, path := range []string{"/console/", "/console/console.js", "/console/console.css"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		h := rec.Header()
		if h.Get("Content-Security-Policy") != CSP || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v", path, h)
		}
	}
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(CSP, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if strings.Contains(CSP, "unsafe-inline") || strings.Contains(CSP, "unsafe-eval") || strings.Contains(CSP, "http") {
		t.Errorf("CSP allows inline, eval or another origin: %s", CSP)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/console/", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Content-Security-Policy") == "" {
		t.Errorf("POST /console/: %d %v", rec.Code, rec.Header())
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/console/nothing.js", nil))
	if rec.Code != 404 {
		t.Errorf("GET a missing asset: %d", rec.Code)
	}
}

// The assets never hold inline script, inline handlers, a third-party
// origin, or a way to turn ledger data into markup.
func TestAssetsAreInertByConstruction(t *testing.T) {
	inlineScript := regexp.MustCompile(`(?i)<script(?:[^>]*)>\s*[^<\s]`)
	handler := regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	markup := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`)
	thirdParty := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		if inlineScript.MatchString(s) || handler.MatchString(s) {
			t.Errorf("%s: inline script or event handler", path)
		}
		if markup.MatchString(s) {
			t.Errorf("%s: %q turns text into markup or code", path, markup.FindString(s))
		}
		if thirdParty.MatchString(s) {
			t.Errorf("%s: loads from another origin: %q", path, thirdParty.FindString(s))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGuard(t *testing.T) {
	const origin = "https://console.example"
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	g := Guard(origin, ok)
	for _, c := range []struct {
		method string
		header map[string]string
		want   int
	}{
		{"POST", nil, 204}, // the CLI and the SDKs
		{"POST", map[string]string{"Origin": origin}, 204},
		{"POST", map[string]string{"Origin": "https://evil.example"}, 403},
		{"POST", map[string]string{"Origin": "null"}, 403},
		{"PUT", map[string]string{"Origin": "http://console.example"}, 403},
		{"POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, 204},
		{"GET", map[string]string{"Origin": "https://evil.example"}, 204},
	} {
		r := httptest.NewRequest(c.method, "/v1/entries", nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, r)
		if rec.Code != c.want {
			t.Errorf("%s %v: %d, want %d (%s)", c.method, c.header, rec.Code, c.want, rec.Body)
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, c := range []struct {
		in           string
		tls, proxied bool
		want         string // "" for an error
	}{
		{"http://localhost:8080", false, false, "http://localhost:8080"},
		{"http://127.0.0.1:9", false, false, "http://127.0.0.1:9"},
		{"http://[::1]:9", false, false, "http://[::1]:9"},
		{"HTTP://LocalHost:8080/", false, false, "http://localhost:8080"},
		{"https://custody.example", true, false, "https://custody.example"},
		{"https://custody.example:8443", false, true, "https://custody.example:8443"},
		{"https://custody.example", false, false, ""},
		{"http://custody.example", true, false, ""},
		{"http://192.168.1.2:8080", false, false, ""},
		{"https://custody.example/console/", true, false, ""},
		{"https://user@custody.example", true, false, ""},
		{"https://custody.example?x=1", true, false, ""},
		{"ftp://localhost", false, false, ""},
		{"localhost:8080", false, false, ""},
		{"", false, false, ""},
	} {
		got, err := CheckOrigin(c.in, c.tls, c.proxied)
		if c.want == "" {
			if err == nil {
				t.Errorf("CheckOrigin(%q, %v, %v) = %q, want an error", c.in, c.tls, c.proxied, got)
			} else if !strings.Contains(err.Error(), "console origin") {
				t.Errorf("CheckOrigin(%q): error %q does not name the input", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("CheckOrigin(%q, %v, %v) = %q, %v; want %q", c.in, c.tls, c.proxied, got, err, c.want)
		}
	}
}
