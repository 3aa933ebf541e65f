package console

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/sign"
)

// # Passkeys on the console
//
// Auth runs the two WebAuthn ceremonies of the console through
// github.com/go-webauthn/webauthn, with user verification required and
// the console's relying party id and origin:
//
//   - Registration (/console/enroll): a person registers a passkey and
//     the page hands back the passkey file `custody principal enroll
//     --passkey FILE` takes. Nothing is stored: the admin enrolls the
//     file with the admin key, offline from the console.
//   - Sign-in (Sign in on /console/): an assertion by one of the passkeys
//     the log binds to the name typed (allowCredentials from the ledger),
//     not retired, whose enrolled origins list the console's. It opens a
//     session: an HttpOnly, SameSite=Strict cookie (Secure on https) that
//     names a random token the server keeps, with an expiry.
//
// A session authorises nothing. Every state change is still a statement
// the person's passkey signs in the browser and the ledger judges; the
// session only says whose held receipts the page lists and which passkey
// it asks to sign. The ceremonies in progress and the sessions are
// bounded (stores.go); nothing else is kept.

// Endpoints under Prefix, besides the page at Prefix+"enroll".
const (
	pathEnrollBegin  = Prefix + "enroll/begin"
	pathEnrollFinish = Prefix + "enroll/finish"
	pathSignInBegin  = Prefix + "session/begin"
	pathSignInFinish = Prefix + "session/finish"
	pathSession      = Prefix + "session"
	pathSignOut      = Prefix + "session/logout"
)

// CookieName is the session cookie's name.
const CookieName = "custody_console_session"

// Defaults of AuthOptions.
const (
	DefaultSession             = 8 * time.Hour
	DefaultCeremony            = 2 * time.Minute
	DefaultMaxCeremonies       = 1024
	DefaultCeremoniesPerClient = 16
	DefaultMaxSessions         = 4096
	DefaultSessionsPerName     = 16
)

// CodeSignIn is the reason code of a refused sign-in or registration.
const CodeSignIn = "sign_in_refused"

// maxCeremonyBody bounds a ceremony's request body.
const maxCeremonyBody = 64 << 10

// AuthOptions tune Auth. The zero value is sensible.
type AuthOptions struct {
	// RPID is the WebAuthn relying party id: the console origin's host
	// (the default) or a registrable name above it, as passkey files name
	// it in rp_id.
	RPID string
	// Session is how long a sign-in lasts (default DefaultSession).
	Session time.Duration
	// Ceremony is how long a registration or sign-in may take between its
	// two requests (default DefaultCeremony); it is also the timeout the
	// browser is given.
	Ceremony time.Duration
	// MaxCeremonies and CeremoniesPerClient bound the ceremonies in
	// progress, in all and per client address.
	MaxCeremonies, CeremoniesPerClient int
	// MaxSessions and SessionsPerName bound the sessions, in all and per
	// principal name.
	MaxSessions, SessionsPerName int
	// ClientKey names a request's client for CeremoniesPerClient (default:
	// its remote IP address).
	ClientKey func(*http.Request) string
	// RetryAfter is the Retry-After of a 503 (default 1s).
	RetryAfter time.Duration
}

// Auth serves the console's passkey registration, sign-in and session.
type Auth struct {
	err    error // why passkeys cannot be used at this origin, or nil
	origin string
	rpID   string
	secure bool
	wa     *webauthn.WebAuthn
	dir    *directory
	cer    ceremonies
	ses    sessions
	opts   AuthOptions
	now    func() time.Time
}

// NewAuth returns the passkey ceremonies of the console at origin (as
// CheckOrigin returns it) over the ledger l. When passkeys cannot work
// there (an origin that is not a host name, an rp_id the origin is not
// under), Err says why and every ceremony answers it.
func NewAuth(l *ledger.Ledger, origin string, opts AuthOptions) *Auth {
	if opts.Session <= 0 {
		opts.Session = DefaultSession
	}
	if opts.Ceremony <= 0 {
		opts.Ceremony = DefaultCeremony
	}
	if opts.MaxCeremonies <= 0 {
		opts.MaxCeremonies = DefaultMaxCeremonies
	}
	if opts.CeremoniesPerClient <= 0 {
		opts.CeremoniesPerClient = DefaultCeremoniesPerClient
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.SessionsPerName <= 0 {
		opts.SessionsPerName = DefaultSessionsPerName
	}
	if opts.ClientKey == nil {
		opts.ClientKey = func(r *http.Request) string {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				return r.RemoteAddr
			}
			return host
		}
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	a := &Auth{origin: origin, secure: strings.HasPrefix(origin, "https://"), dir: &directory{l: l}, opts: opts, now: time.Now,
		cer: ceremonies{max: opts.MaxCeremonies, perClient: opts.CeremoniesPerClient, ttl: opts.Ceremony},
		ses: sessions{max: opts.MaxSessions, perName: opts.SessionsPerName, ttl: opts.Session}}
	a.rpID = opts.RPID
	if a.rpID == "" {
		if u, err := url.Parse(origin); err == nil {
			a.rpID = u.Hostname()
		}
	}
	if err := sign.CheckRPID(a.rpID); err != nil {
		a.err = fmt.Errorf("passkeys cannot be used at console origin %s: %w (use a host name, such as http://localhost:PORT)", origin, err)
		return a
	}
	if err := sign.CheckOrigins(a.rpID, []string{origin}); err != nil {
		a.err = fmt.Errorf("passkeys cannot be used at console origin %s with rp_id %s: %w", origin, a.rpID, err)
		return a
	}
	timeout := webauthn.TimeoutConfig{Enforce: true, Timeout: opts.Ceremony, TimeoutUVD: opts.Ceremony}
	wa, err := webauthn.New(&webauthn.Config{RPID: a.rpID, RPDisplayName: "custody " + l.Origin(), RPOrigins: []string{origin},
		Timeouts: webauthn.TimeoutsConfig{Login: timeout, Registration: timeout}})
	if err != nil {
		a.err = fmt.Errorf("passkeys at console origin %s: %w", origin, err)
		return a
	}
	a.wa = wa
	return a
}

// Err says why passkeys cannot be used on this console, or is nil.
func (a *Auth) Err() error { return a.err }

// RPID is the relying party id the console registers and signs in with.
func (a *Auth) RPID() string { return a.rpID }

// Register adds the ceremonies' endpoints to mux, next to Handler at
// Prefix.
func (a *Auth) Register(mux *http.ServeMux) {
	for pattern, h := range map[string]http.HandlerFunc{
		"POST " + pathEnrollBegin:  a.enrollBegin,
		"POST " + pathEnrollFinish: a.enrollFinish,
		"POST " + pathSignInBegin:  a.signInBegin,
		"POST " + pathSignInFinish: a.signInFinish,
		"GET " + pathSession:       a.getSession,
		"POST " + pathSignOut:      a.signOut,
	} {
		mux.Handle(pattern, a.wrap(h))
	}
}

func (a *Auth) wrap(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SecurityHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-store")
		if a.err != nil {
			writeError(w, http.StatusNotImplemented, CodeSignIn, a.err.Error())
			return
		}
		h(w, r)
	})
}

// user is a WebAuthn user account as go-webauthn sees one.
type user struct {
	id    []byte
	name  string
	creds []webauthn.Credential
}

func (u *user) WebAuthnID() []byte                         { return u.id }
func (u *user) WebAuthnName() string                       { return u.name }
func (u *user) WebAuthnDisplayName() string                { return u.name }
func (u *user) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// readName reads the {"name": ...} of a begin request: a principal name.
func readName(w http.ResponseWriter, r *http.Request) (string, bool) {
	var req struct {
		Name string `json:"name"`
	}
	body, ok := readBody(w, r)
	if !ok {
		return "", false
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "want {\"name\": \"user:...\"}: "+err.Error())
		return "", false
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "type your principal name (such as user:alice)")
		return "", false
	}
	if err := scope.CheckIdentifier(name); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "the name: "+err.Error())
		return "", false
	}
	if strings.HasPrefix(name, "agent:") {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("%q is an agent's name: agents never hold passkeys; a principal's name does not start with agent:", name))
		return "", false
	}
	return name, true
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCeremonyBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("a ceremony's request is at most %d bytes: %v", maxCeremonyBody, err))
		return nil, false
	}
	return body, true
}

// descriptors are the allowCredentials (or excludeCredentials) of keys.
func descriptors(keys []enrolled) []protocol.CredentialDescriptor {
	var out []protocol.CredentialDescriptor
	for _, k := range keys {
		out = append(out, protocol.CredentialDescriptor{Type: protocol.PublicKeyCredentialType, CredentialID: k.id})
	}
	return out
}

// enrollBegin starts a registration: {"name"} → the creation options.
func (a *Auth) enrollBegin(w http.ResponseWriter, r *http.Request) {
	name, ok := readName(w, r)
	if !ok {
		return
	}
	// The authenticator should not make a second passkey of this name
	// where it holds one the log binds already.
	keys, _, err := a.dir.passkeys(name)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "reading the log's passkeys: "+err.Error())
		return
	}
	u := &user{id: make([]byte, 16), name: name}
	rand.Read(u.id) // a random user handle: the name is the admin's to bind
	creation, sess, err := a.wa.BeginRegistration(u,
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{ResidentKey: protocol.ResidentKeyRequirementPreferred,
			RequireResidentKey: protocol.ResidentKeyNotRequired(), UserVerification: protocol.VerificationRequired}),
		webauthn.WithConveyancePreference(protocol.PreferNoAttestation),
		webauthn.WithCredentialParameters([]protocol.CredentialParameter{
			{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgES256},
			{Type: protocol.PublicKeyCredentialType, Algorithm: webauthncose.AlgEdDSA}}),
		webauthn.WithExclusions(descriptors(keys)))
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "beginning the registration: "+err.Error())
		return
	}
	if !a.cer.put(&ceremony{kind: ceremonyEnroll, name: name, client: a.opts.ClientKey(r), session: *sess}, a.now()) {
		a.busy(w)
		return
	}
	writeJSON(w, http.StatusOK, creation)
}

// PasskeyFile is the file `custody principal enroll --passkey FILE`
// takes, as the registration page hands it back.
type PasskeyFile struct {
	KeyType      string   `json:"key_type"`
	PublicKey    string   `json:"public_key"`
	CredentialID string   `json:"credential_id"`
	RPID         string   `json:"rp_id"`
	Origins      []string `json:"origins"`
}

// Registered is the answer to a finished registration.
type Registered struct {
	Name    string      `json:"name"`
	KeyID   string      `json:"keyid"`
	Passkey PasskeyFile `json:"passkey"`
	// File is the passkey file's text, to save or copy.
	File string `json:"file"`
}

// enrollFinish checks the authenticator's answer to a registration and
// answers the passkey file.
func (a *Auth) enrollFinish(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, "the authenticator's answer is not a WebAuthn registration: "+protocolError(err))
		return
	}
	c := a.cer.take(parsed.Response.CollectedClientData.Challenge, ceremonyEnroll, a.now())
	if c == nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, fmt.Sprintf("this registration is unknown here or took longer than %s: register again", a.opts.Ceremony))
		return
	}
	cred, err := a.wa.CreateCredential(&user{id: c.session.UserID, name: c.name}, c.session, parsed)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, "the registration does not verify: "+protocolError(err))
		return
	}
	keyType, spki, err := spkiFromCOSE(cred.PublicKey)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, err.Error())
		return
	}
	pf := PasskeyFile{KeyType: keyType, PublicKey: base64.StdEncoding.EncodeToString(spki), CredentialID: base64.StdEncoding.EncodeToString(cred.ID),
		RPID: a.rpID, Origins: []string{a.origin}}
	k, err := sign.NewPasskey(pf.KeyType, pf.PublicKey, pf.RPID, pf.Origins)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, "the registered passkey cannot be enrolled: "+err.Error())
		return
	}
	text, _ := json.MarshalIndent(pf, "", "  ")
	writeJSON(w, http.StatusOK, Registered{Name: c.name, KeyID: k.KeyID(), Passkey: pf, File: string(text) + "\n"})
}

// usable reports why k cannot sign in on this console, or "".
func (a *Auth) unusable(k enrolled) string {
	switch {
	case k.retired:
		return "retired"
	case k.key.RPID != a.rpID:
		return fmt.Sprintf("rp_id %s, not this console's %s", k.key.RPID, a.rpID)
	case !slices.Contains(k.key.Origins, a.origin):
		return fmt.Sprintf("enrolled for origins %s, not this console's %s", strings.Join(k.key.Origins, ", "), a.origin)
	}
	return ""
}

// signInBegin starts a sign-in: {"name"} → the request options, whose
// allowCredentials are the name's passkeys that may sign in here.
func (a *Auth) signInBegin(w http.ResponseWriter, r *http.Request) {
	name, ok := readName(w, r)
	if !ok {
		return
	}
	keys, principal, err := a.dir.passkeys(name)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "reading the log's passkeys: "+err.Error())
		return
	}
	if !principal {
		writeError(w, http.StatusForbidden, CodeSignIn, fmt.Sprintf("no principal %q is enrolled on this log", name))
		return
	}
	if len(keys) == 0 {
		writeError(w, http.StatusForbidden, CodeSignIn, fmt.Sprintf("%q has no passkey enrolled, only Ed25519 keys: register one at %senroll and have the admin add it (custody principal add-key --passkey FILE), or approve with the CLI", name, Prefix))
		return
	}
	var allow []enrolled
	var why []string
	for _, k := range keys {
		if reason := a.unusable(k); reason != "" {
			why = append(why, "passkey "+k.keyID[:16]+" is "+reason)
			continue
		}
		allow = append(allow, k)
	}
	if len(allow) == 0 {
		writeError(w, http.StatusForbidden, CodeSignIn, fmt.Sprintf("no passkey of %q may sign in at %s: %s. Register a passkey here (%senroll) and have the admin add it (custody principal add-key --passkey FILE)",
			name, a.origin, strings.Join(why, "; "), Prefix))
		return
	}
	u, err := a.user(name, allow, nil, false)
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	assertion, sess, err := a.wa.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "beginning the sign-in: "+err.Error())
		return
	}
	if !a.cer.put(&ceremony{kind: ceremonySignIn, name: name, client: a.opts.ClientKey(r), session: *sess}, a.now()) {
		a.busy(w)
		return
	}
	writeJSON(w, http.StatusOK, assertion)
}

// user is the account go-webauthn checks a sign-in against: the passkeys
// keys with their enrolled public keys, and the backup-eligible flag the
// answer carries (custody does not use BE, DESIGN §1; go-webauthn wants
// it unchanged since registration, which the log does not record).
func (a *Auth) user(name string, keys []enrolled, handle []byte, backupEligible bool) (*user, error) {
	u := &user{id: handle, name: name}
	for _, k := range keys {
		cose, err := coseFromPasskey(k.key)
		if err != nil {
			return nil, err
		}
		u.creds = append(u.creds, webauthn.Credential{ID: k.id, PublicKey: cose,
			Flags: webauthn.CredentialFlags{UserPresent: true, UserVerified: true, BackupEligible: backupEligible}})
	}
	return u, nil
}

// Session is what GET /console/session answers.
type Session struct {
	SignedIn bool   `json:"signed_in"`
	Name     string `json:"name,omitempty"`
	KeyID    string `json:"keyid,omitempty"`
	Expires  string `json:"expires,omitempty"`
	// Passkey is the signed-in passkey's public file, which the page asks
	// to sign statements.
	Passkey *PasskeyFile `json:"passkey,omitempty"`
	// AllowedTypes are the statement kinds the passkey may sign, as the
	// log binds it (DESIGN §1): the workflow page shows Revoke only when
	// REVOKE is among them.
	AllowedTypes []string `json:"allowed_types,omitempty"`
	// Reason says why there is no session, when there was one.
	Reason string `json:"reason,omitempty"`
}

// signInFinish checks the assertion against the name's enrolled passkeys
// and opens a session.
func (a *Auth) signInFinish(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, "the authenticator's answer is not a WebAuthn assertion: "+protocolError(err))
		return
	}
	c := a.cer.take(parsed.Response.CollectedClientData.Challenge, ceremonySignIn, a.now())
	if c == nil {
		writeError(w, http.StatusBadRequest, CodeSignIn, fmt.Sprintf("this sign-in is unknown here or took longer than %s: press Sign in again", a.opts.Ceremony))
		return
	}
	// Every passkey of the name as the ledger holds it now: go-webauthn
	// checks the answer is by one of those the ceremony allowed, under
	// its enrolled key; then it must still be live and list this origin.
	keys, _, err := a.dir.passkeys(c.name)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "reading the log's passkeys: "+err.Error())
		return
	}
	handle := parsed.Response.UserHandle
	u, err := a.user(c.name, keys, handle, parsed.Response.AuthenticatorData.Flags.HasBackupEligible())
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	// The user handle is the label the registering page gave the passkey;
	// who signs in is decided by the credential and its key, as the log
	// binds them.
	c.session.UserID = handle
	cred, err := a.wa.ValidateLogin(u, c.session, parsed)
	if err != nil {
		writeError(w, http.StatusForbidden, CodeSignIn, fmt.Sprintf("the passkey's answer does not sign %q in: %s", c.name, protocolError(err)))
		return
	}
	var key *enrolled
	for i := range keys {
		if bytes.Equal(keys[i].id, cred.ID) {
			key = &keys[i]
		}
	}
	if key == nil {
		writeError(w, http.StatusForbidden, CodeSignIn, "the passkey that answered is not one of "+strconv.Quote(c.name)+"'s")
		return
	}
	if reason := a.unusable(*key); reason != "" {
		writeError(w, http.StatusForbidden, CodeSignIn, fmt.Sprintf("passkey %s of %q is %s", key.keyID[:16], c.name, reason))
		return
	}
	if o := parsed.Response.CollectedClientData.Origin; !slices.Contains(key.key.Origins, o) {
		writeError(w, http.StatusForbidden, CodeSignIn, fmt.Sprintf("the assertion's origin %q is not one of the passkey's enrolled origins %q", o, key.key.Origins))
		return
	}
	token, sess := a.ses.open(c.name, key.credential, a.now())
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: cookiePath(r), Expires: sess.expires,
		MaxAge: int(a.opts.Session / time.Second), HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, a.describe(sess, key))
}

func (a *Auth) describe(s *session, k *enrolled) Session {
	return Session{SignedIn: true, Name: s.name, KeyID: k.keyID, Expires: s.expires.UTC().Format(time.RFC3339),
		Passkey: &PasskeyFile{KeyType: k.key.KeyType, PublicKey: k.rec.PublicKey, CredentialID: base64.StdEncoding.EncodeToString(k.id),
			RPID: k.key.RPID, Origins: k.key.Origins}, AllowedTypes: k.rec.AllowedTypes}
}

// getSession answers who is signed in, re-reading the passkey: a retired
// passkey's sessions end.
func (a *Auth) getSession(w http.ResponseWriter, r *http.Request) {
	token := sessionToken(r)
	s := a.ses.get(token, a.now())
	if s == nil {
		writeJSON(w, http.StatusOK, Session{})
		return
	}
	keys, _, err := a.dir.passkeys(s.name)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "reading the log's passkeys: "+err.Error())
		return
	}
	for i := range keys {
		if keys[i].keyID != s.cred.keyID {
			continue
		}
		if reason := a.unusable(keys[i]); reason != "" {
			a.ses.end(token)
			a.clearCookie(w, r)
			writeJSON(w, http.StatusOK, Session{Reason: fmt.Sprintf("signed out: passkey %s of %q is %s", s.cred.keyID[:16], s.name, reason)})
			return
		}
		writeJSON(w, http.StatusOK, a.describe(s, &keys[i]))
		return
	}
	a.ses.end(token)
	a.clearCookie(w, r)
	writeJSON(w, http.StatusOK, Session{Reason: "signed out: the log no longer binds the passkey to " + strconv.Quote(s.name)})
}

// signOut ends the session.
func (a *Auth) signOut(w http.ResponseWriter, r *http.Request) {
	if token := sessionToken(r); token != "" {
		a.ses.end(token)
	}
	a.clearCookie(w, r)
	writeJSON(w, http.StatusOK, Session{Reason: "signed out"})
}

func (a *Auth) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: cookiePath(r), MaxAge: -1,
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteStrictMode})
}

func (a *Auth) busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(a.opts.RetryAfter/time.Second))))
	writeError(w, http.StatusServiceUnavailable, api.CodeOverloaded,
		fmt.Sprintf("too many registrations and sign-ins in progress (at most %d, %d per client, each for up to %s): retry shortly",
			a.opts.MaxCeremonies, a.opts.CeremoniesPerClient, a.opts.Ceremony))
}

func sessionToken(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// cookiePath is the console's path as the browser sees it: Prefix, or
// /logs/NAME/console/ when the log's server is mounted under a prefix
// (http.StripPrefix keeps the RequestURI the browser sent).
func cookiePath(r *http.Request) string {
	raw := r.RequestURI
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if mount, ok := strings.CutSuffix(raw, r.URL.EscapedPath()); ok && strings.HasPrefix(mount, "/") && !strings.ContainsAny(mount, ";,") {
		return mount + Prefix
	}
	return Prefix
}

// protocolError says what go-webauthn found, with its detail.
func protocolError(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg := pe.Details
		if pe.DevInfo != "" {
			msg += " (" + pe.DevInfo + ")"
		}
		if msg != "" {
			return msg
		}
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, reason string) {
	b, _ := json.Marshal(api.Error{ReasonCode: code, Reason: reason})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
