package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// The workflow pages and their modules are served with the console's
// headers, modules as JavaScript (a browser runs a module script only
// with a JavaScript MIME type), and every script a page loads is one of
// the embedded modules.
func TestWorkflowPagesServed(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	srcs := regexp.MustCompile(`(?:src|href)="([^"]+)"`)
	for _, page := range []string{"workflows.html", "workflow.html"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", Prefix+page, nil))
		if rec.Code != 200 || rec.Header().Get("Content-Security-Policy") != CSP || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %v", page, rec.Code, rec.Header())
		}
		for _, m := range srcs.FindAllStringSubmatch(rec.Body.String(), -1) {
			ref := m[1]
			if strings.HasPrefix(ref, "#") || ref == "./" || strings.HasSuffix(ref, ".html") {
				continue
			}
			r := httptest.NewRecorder()
			mux.ServeHTTP(r, httptest.NewRequest("GET", Prefix+ref, nil))
			if r.Code != 200 {
				t.Errorf("%s loads %s: %d", page, ref, r.Code)
			}
			if strings.HasSuffix(ref, ".js") && !strings.HasPrefix(r.Header().Get("Content-Type"), "text/javascript") {
				t.Errorf("%s: Content-Type %q", ref, r.Header().Get("Content-Type"))
			}
		}
	}
	for _, js := range []string{"sdk.js", "sign.js", "api.js", "principal.js", "workflow.js", "workflows.js"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", Prefix+js, nil))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/javascript") {
			t.Errorf("GET %s: %d %q", js, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}
