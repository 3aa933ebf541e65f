package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/custodylog/custody/server/api"
)

// # Several logs behind one listener
//
// Logs serves the Servers of several logs (the logs of one PostgreSQL
// database) on one listener. Log NAME is under /logs/NAME/, with every
// path a server of one log has: /logs/NAME/v1/entries,
// /logs/NAME/checkpoint, /logs/NAME/tile/..., /logs/NAME/readyz, and so
// on, so that a client given http://HOST/logs/NAME as its base URL reads
// and appends as it would on a server of that log alone. The default log,
// when served, keeps the single-log paths at / (and is also at
// /logs/default/). At the root, /healthz answers for the process,
// /metrics serves every log's metrics (labelled log="NAME"), and, when no
// default log is served, /readyz sums up every log's role.

// LogsPrefix is the path under which a server of several logs serves
// log NAME: LogsPrefix + NAME + "/...".
const LogsPrefix = "/logs/"

// Logs is the servers of several logs behind one handler.
type Logs struct {
	names   []string // sorted
	servers map[string]*Server
	def     *Server // the default log's, or nil
	mux     *http.ServeMux
}

// NewLogs returns the handler of the logs' servers: named maps a log's
// name to its server; def, if not nil, is the default log's. reg is what
// /metrics serves when def does not.
func NewLogs(named map[string]*Server, def *Server, reg *prometheus.Registry) *Logs {
	g := &Logs{servers: named, def: def, mux: http.NewServeMux()}
	// One budget per client across the logs (clients.go).
	shared := &clients{}
	for _, s := range named {
		s.cl = shared
	}
	if def != nil {
		def.cl = shared
	}
	for name := range named {
		g.names = append(g.names, name)
	}
	slices.Sort(g.names)
	for _, name := range g.names {
		p := LogsPrefix + name
		g.mux.Handle(p+"/", http.StripPrefix(p, named[name].Handler()))
	}
	g.mux.HandleFunc(LogsPrefix, g.noLog)
	if def != nil {
		g.mux.Handle(LogsPrefix+"default/", http.StripPrefix(LogsPrefix+"default", def.Handler()))
		g.mux.Handle("/", def.Handler())
		return g
	}
	g.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeText(w, "ok\n") })
	g.mux.HandleFunc("GET /readyz", g.ready)
	g.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no such endpoint: %s %s (this server serves the logs %s, each under %sNAME/)",
			r.Method, r.URL.Path, strings.Join(g.names, ", "), LogsPrefix))
	})
	return g
}

// Handler is the handler of every log.
func (g *Logs) Handler() http.Handler { return g.mux }

func (g *Logs) all() []*Server {
	var out []*Server
	if g.def != nil {
		out = append(out, g.def)
	}
	for _, n := range g.names {
		out = append(out, g.servers[n])
	}
	return out
}

// Serve is Server.Serve for every log: one listener, one graceful
// shutdown that answers every log's appends in flight.
func (g *Logs) Serve(ctx context.Context, ln net.Listener, opts ServeOptions) error {
	return serveAll(ctx, ln, g.all(), g.mux, opts)
}

func (g *Logs) noLog(w http.ResponseWriter, r *http.Request) {
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, LogsPrefix), "/")
	served := strings.Join(g.names, ", ")
	if g.def != nil {
		served = "default, " + served
	}
	writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("this server serves no log named %q (it serves %s)", name, served))
}

// ready answers 200 once every log is ready, with one line per log: its
// name, role, epoch and leader.
func (g *Logs) ready(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	ok := true
	for _, n := range g.names {
		s := g.servers[n]
		s.mu.Lock()
		draining := s.draining
		s.mu.Unlock()
		role := s.l.Role()
		switch {
		case draining:
			ok = false
			fmt.Fprintf(&b, "log %s shutting down\n", n)
		case s.l.Head().Size == 0:
			ok = false
			fmt.Fprintf(&b, "log %s has no GENESIS\n", n)
		case role.Leader:
			fmt.Fprintf(&b, "log %s leader epoch %d\n", n, role.Epoch)
		case role.LeaderURL != "":
			fmt.Fprintf(&b, "log %s follower epoch %d leader %s\n", n, role.Epoch, role.LeaderURL)
		default:
			fmt.Fprintf(&b, "log %s follower epoch %d leader none\n", n, role.Epoch)
		}
	}
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready\n" + b.String()))
		return
	}
	writeText(w, "ready\n"+b.String())
}
