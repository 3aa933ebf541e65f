package server

import (
	"net/http"

	"github.com/custodylog/custody/console"
)

// consoleAuth adds the console's passkey registration, sign-in and
// session endpoints (console.Auth) to m.
func (s *Server) consoleAuth(m *http.ServeMux) {
	a := console.NewAuth(s.l, s.opts.ConsoleOrigin, console.AuthOptions{RPID: s.opts.ConsoleRPID, Session: s.opts.ConsoleSession,
		ClientKey: clientKey, RetryAfter: s.opts.RetryAfter})
	if err := a.Err(); err != nil {
		s.log.Warn("console: passkey registration and sign-in are off", "err", err)
	}
	a.Register(m)
}
