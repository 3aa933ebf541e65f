package console_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"

	"github.com/custodylog/custody/console"
	"github.com/custodylog/custody/internal/softauthn"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// serveConsole serves lg's ledger with the console on at
// http://localhost:PORT, a port known before the server starts (the
// origin names it), and returns the origin and the server's URL.
func serveConsole(t *testing.T, lg *servertest.Log, opts server.Options) (origin, base string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	origin = "http://localhost:" + port
	opts.Console, opts.ConsoleOrigin = true, origin
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	inner := server.New(lg.Ledger, opts).Handler()
	t0 := time.Now()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := time.Now()
		inner.ServeHTTP(w, r)
		if os.Getenv("DEBUGREQ") != "" {
			fmt.Fprintf(os.Stderr, "REQ %7.3fs %s %s %v\n", s.Sub(t0).Seconds(), r.Method, r.URL, time.Since(s))
		}
	}))
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	// The page's long poll holds a connection: cut it, then close.
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return origin, "http://127.0.0.1:" + port
}

// consoleClient talks to a console as a same-origin browser page does:
// with the console's Origin on every POST and a cookie jar.
type consoleClient struct {
	t      *testing.T
	base   string // http://127.0.0.1:PORT, where the server listens
	origin string // what the page's Origin header says
	hc     *http.Client
}

func newConsoleClient(t *testing.T, base, origin string) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, base: base, origin: origin, hc: &http.Client{Jar: jar}}
}

func (c *consoleClient) do(method, path string, body any) (int, map[string]any, *http.Response) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if method == "POST" {
		req.Header.Set("Origin", c.origin)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		doc = map[string]any{"reason": string(raw)}
	}
	return resp.StatusCode, doc, resp
}

// assertion answers a sign-in's request options as a browser would, with
// the soft authenticator's key; o tunes what the client data says.
func assertion(t *testing.T, a *softauthn.Authenticator, options map[string]any, o softauthn.Options) map[string]any {
	t.Helper()
	pk := options["publicKey"].(map[string]any)
	if o.Challenge == "" {
		o.Challenge = pk["challenge"].(string)
	}
	env, err := a.Sign("approval", []byte("{}"), o)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	var m map[string]string
	json.Unmarshal(raw, &m)
	id := base64.RawURLEncoding.EncodeToString(a.CredentialID)
	return map[string]any{"id": id, "rawId": id, "type": "public-key", "clientExtensionResults": map[string]any{},
		"response": map[string]any{"authenticatorData": m["authenticator_data"], "clientDataJSON": m["client_data_json"], "signature": m["signature"]}}
}

func enrollPasskey(t *testing.T, lg *servertest.Log, id, op, name string, a *softauthn.Authenticator) {
	t.Helper()
	e := a.Enrollment()
	if _, err := lg.Admin.Append(context.Background(), &statement.PrincipalDoc{PrincipalID: id, Op: op, Name: name,
		KeyType: e.KeyType, PublicKey: e.PublicKey, CredentialID: e.CredentialID, RPID: e.RPID, Origins: e.Origins}); err != nil {
		t.Fatalf("enrolling %s's passkey: %v", name, err)
	}
}

// TestSignInCeremony runs the console's sign-in as a browser would, with
// a soft authenticator: the request options allow exactly the name's
// passkeys that may sign in here, with user verification required; the
// answer opens a session (an HttpOnly, SameSite=Strict cookie with an
// expiry) that GET /console/session reports, and sign-out ends it. A
// challenge is used once; an answer from another origin, without user
// verification or by a retired passkey signs nobody in; a name without a
// passkey for this origin is told why before any prompt.
func TestSignInCeremony(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	origin, base := serveConsole(t, lg, server.Options{ConsoleSession: time.Hour})

	dana, _ := softauthn.New(sign.KeyTypeWebAuthnES256, "localhost", origin)
	phone, _ := softauthn.New(sign.KeyTypeWebAuthnEd25519, "localhost", origin)
	elsewhere, _ := softauthn.New(sign.KeyTypeWebAuthnES256, "localhost", "https://localhost")
	enrollPasskey(t, lg, "p_dana", statement.OpEnroll, "user:dana", dana)
	enrollPasskey(t, lg, "p_dana_phone", statement.OpAddKey, "user:dana", phone)
	enrollPasskey(t, lg, "p_erin", statement.OpEnroll, "user:erin", elsewhere)
	lg.Principal("user:frank") // an Ed25519 key only

	c := newConsoleClient(t, base, origin)
	if code, doc, _ := c.do("GET", "/console/session", nil); code != 200 || doc["signed_in"] != false {
		t.Fatalf("before sign-in: %d %v", code, doc)
	}
	for name, want := range map[string]string{
		"user:nobody": `no principal "user:nobody" is enrolled`,
		"user:frank":  "has no passkey enrolled, only Ed25519 keys",
		"user:erin":   "is enrolled for origins https://localhost, not this console's " + origin,
		"agent:x":     "agents never hold passkeys",
	} {
		code, doc, _ := c.do("POST", "/console/session/begin", map[string]string{"name": name})
		if code < 400 || !strings.Contains(doc["reason"].(string), want) {
			t.Errorf("sign-in of %s: %d %v; want %q", name, code, doc, want)
		}
	}

	begin := func() map[string]any {
		t.Helper()
		code, doc, _ := c.do("POST", "/console/session/begin", map[string]string{"name": "user:dana"})
		if code != 200 {
			t.Fatalf("begin: %d %v", code, doc)
		}
		return doc
	}
	opts := begin()
	pk := opts["publicKey"].(map[string]any)
	if pk["userVerification"] != "required" || pk["rpId"] != "localhost" {
		t.Errorf("request options: %v", pk)
	}
	var allowed []string
	for _, d := range pk["allowCredentials"].([]any) {
		allowed = append(allowed, d.(map[string]any)["id"].(string))
	}
	if len(allowed) != 2 || allowed[0] != base64.RawURLEncoding.EncodeToString(dana.CredentialID) ||
		allowed[1] != base64.RawURLEncoding.EncodeToString(phone.CredentialID) {
		t.Errorf("allowCredentials %v, want dana's two passkeys", allowed)
	}

	// Refused answers, each to a ceremony of its own.
	noUV := byte(0x01)
	for what, o := range map[string]softauthn.Options{
		"another origin":       {Origin: "https://localhost"},
		"no user verification": {Flags: &noUV},
		"another rp_id":        {RPID: "example.com"},
		"a bad signature":      {Corrupt: true},
	} {
		code, doc, _ := c.do("POST", "/console/session/finish", assertion(t, dana, begin(), o))
		if code != http.StatusForbidden || !strings.Contains(doc["reason"].(string), "does not sign") {
			t.Errorf("an answer with %s: %d %v", what, code, doc)
		}
	}
	if code, doc, _ := c.do("GET", "/console/session", nil); doc["signed_in"] != false {
		t.Fatalf("a refused answer opened a session: %d %v", code, doc)
	}

	answer := assertion(t, phone, opts, softauthn.Options{})
	code, doc, resp := c.do("POST", "/console/session/finish", answer)
	if code != 200 || doc["name"] != "user:dana" || doc["keyid"] != phone.KeyID() {
		t.Fatalf("sign-in: %d %v", code, doc)
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == console.CookieName {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/console/" ||
		cookie.MaxAge != 3600 || cookie.Secure || len(cookie.Value) < 40 {
		t.Fatalf("the session cookie: %+v", cookie)
	}
	if code, doc, _ := c.do("POST", "/console/session/finish", answer); code != 400 || !strings.Contains(doc["reason"].(string), "unknown here") {
		t.Errorf("the same answer again: %d %v", code, doc)
	}
	code, doc, _ = c.do("GET", "/console/session", nil)
	if doc["signed_in"] != true || doc["name"] != "user:dana" {
		t.Fatalf("session: %d %v", code, doc)
	}
	if p := doc["passkey"].(map[string]any); p["credential_id"] != base64.StdEncoding.EncodeToString(phone.CredentialID) || p["public_key"] != phone.PublicKey() {
		t.Errorf("the session's passkey: %v", p)
	}

	// A session from another site's page is refused at the door (Guard).
	other := newConsoleClient(t, base, "https://evil.example")
	other.hc.Jar = c.hc.Jar
	if code, _, _ := other.do("POST", "/console/session/logout", nil); code != http.StatusForbidden {
		t.Errorf("a cross-site sign-out: %d", code)
	}
	if _, doc, _ := c.do("GET", "/console/session", nil); doc["signed_in"] != true {
		t.Errorf("a cross-site sign-out ended the session: %v", doc)
	}

	// The passkey is retired: its session ends.
	if _, err := lg.Admin.Append(context.Background(), &statement.PrincipalDoc{PrincipalID: "p_dana_phone_r", Op: statement.OpRetire,
		Name: "user:dana", KeyType: phone.KeyType, PublicKey: phone.PublicKey(), CredentialID: base64.StdEncoding.EncodeToString(phone.CredentialID),
		RPID: "localhost", Origins: []string{origin}}); err != nil {
		t.Fatalf("retiring dana's phone: %v", err)
	}
	if _, doc, _ := c.do("GET", "/console/session", nil); doc["signed_in"] != false || !strings.Contains(doc["reason"].(string), "is retired") {
		t.Fatalf("a retired passkey's session: %v", doc)
	}
	opts = begin()
	if n := len(opts["publicKey"].(map[string]any)["allowCredentials"].([]any)); n != 1 {
		t.Errorf("allowCredentials after the retirement: %d, want 1", n)
	}
	if code, doc, _ := c.do("POST", "/console/session/finish", assertion(t, phone, opts, softauthn.Options{})); code != 403 {
		t.Errorf("the retired passkey signs in: %d %v", code, doc)
	}

	// Signed in with the other, then out.
	if code, doc, _ := c.do("POST", "/console/session/finish", assertion(t, dana, begin(), softauthn.Options{})); code != 200 {
		t.Fatalf("sign-in: %d %v", code, doc)
	}
	if code, doc, _ := c.do("POST", "/console/session/logout", nil); code != 200 || doc["signed_in"] != false {
		t.Fatalf("sign-out: %d %v", code, doc)
	}
	if _, doc, _ := c.do("GET", "/console/session", nil); doc["signed_in"] != false {
		t.Fatalf("after sign-out: %v", doc)
	}
}

// A console whose origin cannot be a relying party's answers why.
func TestSignInNeedsAHostName(t *testing.T) {
	lg := servertest.Start(t, server.Options{Console: true, ConsoleOrigin: "http://127.0.0.1"})
	c := newConsoleClient(t, lg.URL, "http://127.0.0.1")
	code, doc, _ := c.do("POST", "/console/session/begin", map[string]string{"name": "user:bob"})
	if code != http.StatusNotImplemented || !strings.Contains(doc["reason"].(string), "http:// only for localhost") {
		t.Fatalf("sign-in at http://127.0.0.1: %d %v", code, doc)
	}
}

// registration answers creation options as an authenticator with a
// "none" attestation would: a fresh ES256 key, its COSE form in the
// attested credential data. flags and origin tune what it says.
func registration(t *testing.T, options map[string]any, origin string, flags byte) (answer map[string]any, spki []byte, credID []byte) {
	t.Helper()
	pk := options["publicKey"].(map[string]any)
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spki, _ = x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pt, _ := priv.PublicKey.Bytes()
	cose, _ := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: pt[1:33], -3: pt[33:]})
	credID = make([]byte, 16)
	rand.Read(credID)
	rp := sha256.Sum256([]byte(pk["rp"].(map[string]any)["id"].(string)))
	authData := append(append(rp[:], flags, 0, 0, 0, 0), make([]byte, 16)...) // AAGUID zero
	authData = append(authData, byte(len(credID)>>8), byte(len(credID)))
	authData = append(append(authData, credID...), cose...)
	att, _ := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": authData})
	cd, _ := json.Marshal(map[string]any{"type": "webauthn.create", "challenge": pk["challenge"], "origin": origin, "crossOrigin": false})
	id := base64.RawURLEncoding.EncodeToString(credID)
	return map[string]any{"id": id, "rawId": id, "type": "public-key", "clientExtensionResults": map[string]any{},
		"response": map[string]any{"clientDataJSON": base64.RawURLEncoding.EncodeToString(cd),
			"attestationObject": base64.RawURLEncoding.EncodeToString(att)}}, spki, credID
}

// TestRegistrationCeremony: /console/enroll's ceremony asks for user
// verification and ES256 or EdDSA, and answers the passkey file custody
// principal enroll --passkey takes (this rp_id, this origin) with its key
// id; an answer without user verification, from another origin, or
// repeated is refused, and nothing is enrolled by it.
func TestRegistrationCeremony(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	origin, base := serveConsole(t, lg, server.Options{})
	c := newConsoleClient(t, base, origin)
	begin := func() map[string]any {
		t.Helper()
		code, doc, _ := c.do("POST", "/console/enroll/begin", map[string]string{"name": "user:gus"})
		if code != 200 {
			t.Fatalf("begin: %d %v", code, doc)
		}
		return doc
	}
	opts := begin()
	pk := opts["publicKey"].(map[string]any)
	sel := pk["authenticatorSelection"].(map[string]any)
	if sel["userVerification"] != "required" || pk["rp"].(map[string]any)["id"] != "localhost" || pk["attestation"] != "none" {
		t.Errorf("creation options: %v", pk)
	}
	var algs []float64
	for _, p := range pk["pubKeyCredParams"].([]any) {
		algs = append(algs, p.(map[string]any)["alg"].(float64))
	}
	if len(algs) != 2 || algs[0] != -7 || algs[1] != -8 {
		t.Errorf("pubKeyCredParams algs %v, want ES256 and EdDSA", algs)
	}

	for what, o := range map[string]struct {
		origin string
		flags  byte
	}{
		"no user verification": {origin, 0x41},
		"another origin":       {"http://localhost:1", 0x45},
	} {
		answer, _, _ := registration(t, begin(), o.origin, o.flags)
		if code, doc, _ := c.do("POST", "/console/enroll/finish", answer); code != 400 || !strings.Contains(doc["reason"].(string), "does not verify") {
			t.Errorf("a registration with %s: %d %v", what, code, doc)
		}
	}

	answer, spki, credID := registration(t, opts, origin, 0x45) // UP, UV, AT
	code, doc, _ := c.do("POST", "/console/enroll/finish", answer)
	if code != 200 {
		t.Fatalf("finish: %d %v", code, doc)
	}
	var file console.PasskeyFile
	if err := json.Unmarshal([]byte(doc["file"].(string)), &file); err != nil {
		t.Fatalf("the passkey file %q: %v", doc["file"], err)
	}
	want := console.PasskeyFile{KeyType: sign.KeyTypeWebAuthnES256, PublicKey: base64.StdEncoding.EncodeToString(spki),
		CredentialID: base64.StdEncoding.EncodeToString(credID), RPID: "localhost", Origins: []string{origin}}
	if !reflect.DeepEqual(file, want) {
		t.Errorf("the passkey file %+v, want %+v", file, want)
	}
	k, err := sign.NewPasskey(file.KeyType, file.PublicKey, file.RPID, file.Origins)
	if err != nil || doc["keyid"] != k.KeyID() || doc["name"] != "user:gus" {
		t.Errorf("the answer %v: key id %v (%v)", doc, k, err)
	}
	if code, _, _ := c.do("POST", "/console/enroll/finish", answer); code != 400 {
		t.Errorf("the same registration again: %d", code)
	}
	if code, doc, _ := c.do("POST", "/console/session/begin", map[string]string{"name": "user:gus"}); code != 403 || !strings.Contains(doc["reason"].(string), "no principal") {
		t.Errorf("a registered, not enrolled name signs in: %d %v", code, doc)
	}
}

// On an https origin the session cookie is Secure too.
func TestSessionCookieSecureOnHTTPS(t *testing.T) {
	lg := servertest.Start(t, server.Options{})
	const origin = "https://localhost" // TLS is a proxy's in front; the cookie says Secure either way
	hs := httptest.NewServer(server.New(lg.Ledger, server.Options{Console: true, ConsoleOrigin: origin,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	t.Cleanup(hs.Close)
	a, _ := softauthn.New(sign.KeyTypeWebAuthnES256, "localhost", origin)
	enrollPasskey(t, lg, "p_hal", statement.OpEnroll, "user:hal", a)
	c := newConsoleClient(t, hs.URL, origin)
	code, opts, _ := c.do("POST", "/console/session/begin", map[string]string{"name": "user:hal"})
	if code != 200 {
		t.Fatalf("begin: %d %v", code, opts)
	}
	code, doc, resp := c.do("POST", "/console/session/finish", assertion(t, a, opts, softauthn.Options{}))
	if code != 200 {
		t.Fatalf("finish: %d %v", code, doc)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == console.CookieName && (!ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.MaxAge != int(console.DefaultSession/time.Second)) {
			t.Fatalf("the session cookie on %s: %+v", origin, ck)
		}
	}
	if len(resp.Cookies()) != 1 {
		t.Fatalf("cookies: %v", resp.Cookies())
	}
}
