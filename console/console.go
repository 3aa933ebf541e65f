// Package console serves the custody console: a web page, embedded in the
// binary, that is a view over the server's own HTTP API (the one the CLI
// and the SDKs use). The console holds no key and signs nothing: every
// state change is a statement the person's passkey signs in the browser
// and the page appends with POST /v1/entries.
//
// # Safety
//
// Every answer of the console carries a strict Content-Security-Policy
// (default-src 'self', no inline script or style, no third-party origin,
// frame-ancestors 'none'), X-Content-Type-Options: nosniff, no Referer and
// no caching of the page. The page writes everything an agent wrote with
// textContent, never as markup. [Guard] refuses a state-changing request
// (any method but GET, HEAD and OPTIONS) that a browser sent from another
// origin than the console's.
package console

import (
	"embed"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is served, under the server's root and
// under each /logs/NAME/.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console answer.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the console's embedded assets under Prefix. Mount it at
// Prefix; it answers only GET and HEAD.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SecurityHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console's pages are read with GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == Prefix+"enroll" {
			// The registration page (auth.go) has a path of its own.
			r = r.Clone(r.Context())
			r.URL.Path, r.URL.RawPath = Prefix+"enroll.html", ""
		}
		files.ServeHTTP(w, r)
	})
}

// SecurityHeaders sets the console's security headers on h.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// Guard wraps next so that a state-changing request a browser sent from
// another site is refused with 403: one whose Origin header is present and
// is not origin, or (without Origin) whose Sec-Fetch-Site says cross-site.
// Requests without either header (the CLI, the SDKs, curl) pass: they are
// not a browser acting for someone, and every statement they append is
// signed anyway.
func Guard(origin string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if o := r.Header.Get("Origin"); o != "" && o != origin {
				http.Error(w, fmt.Sprintf("origin %q may not change state here: only the console's origin %s may", o, origin), http.StatusForbidden)
				return
			}
			if r.Header.Get("Origin") == "" {
				if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
					http.Error(w, "a "+s+" request may not change state here", http.StatusForbidden)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// CheckOrigin checks the console's web origin as given with
// --console-origin: scheme://host[:port] and nothing else (no path, query,
// user or fragment), lower case. http is allowed only for a loopback host
// (localhost, 127.0.0.1, [::1]), as WebAuthn itself allows; any other
// origin is https and needs TLS, served (tls) or terminated by a proxy in
// front (proxied). It returns the origin in its canonical form.
func CheckOrigin(origin string, tls, proxied bool) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("console origin %q: want scheme://host[:port]", origin)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("console origin %q: an origin is scheme://host[:port], without user, path, query or fragment", origin)
	}
	host := strings.ToLower(u.Hostname())
	loopback := host == "localhost" || host == "127.0.0.1" || host == "::1"
	switch u.Scheme {
	case "http":
		if !loopback {
			return "", fmt.Errorf("console origin %q: http only for localhost, 127.0.0.1 or [::1]; serve https (--tls-cert/--tls-key, or a TLS proxy with --console-behind-proxy)", origin)
		}
	case "https":
		if !tls && !proxied && !loopback {
			return "", fmt.Errorf("console origin %q: https needs --tls-cert/--tls-key, or --console-behind-proxy when a proxy in front terminates TLS", origin)
		}
	default:
		return "", fmt.Errorf("console origin %q: the scheme must be https (or http for localhost)", origin)
	}
	h := host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p := u.Port(); p != "" {
		h = net.JoinHostPort(host, p)
	}
	return u.Scheme + "://" + h, nil
}
