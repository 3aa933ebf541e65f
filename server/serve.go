package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServeOptions configure Serve.
type ServeOptions struct {
	// TLSCert and TLSKey, when both set, are PEM files: Serve speaks HTTPS.
	TLSCert, TLSKey string
	// ShutdownTimeout bounds the graceful shutdown (default 30s): after it,
	// remaining connections are closed. Appends already acknowledged are
	// durable either way; those not yet answered were never acknowledged.
	ShutdownTimeout time.Duration
	// ReadTimeout and WriteTimeout bound reading a request and writing its
	// answer (defaults 15s and 30s); event streams set their own deadlines.
	ReadTimeout, WriteTimeout time.Duration
}

// NewHTTPServer returns an http.Server for s with the limits a public
// server needs: header size, read, write and idle timeouts (opts may
// override the read and write ones). Event streams manage their own
// deadlines.
func (s *Server) NewHTTPServer(opts ServeOptions) *http.Server {
	return newHTTPServer([]*Server{s}, s.Handler(), opts)
}

func newHTTPServer(servers []*Server, h http.Handler, opts ServeOptions) *http.Server {
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 15 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	for _, s := range servers {
		if s.cos != nil && s.opts.WitnessFinality {
			// A pending RECEIPT may wait this long for its witnesses.
			opts.WriteTimeout = max(opts.WriteTimeout, s.opts.WitnessTimeout+10*time.Second)
		}
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(5*time.Second, opts.ReadTimeout),
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(servers[0].log.Handler(), slog.LevelWarn),
		// Event streams size their connection's send buffer (events.go).
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections and new appends, ends event streams, and waits for
// every append in flight to be answered (up to opts.ShutdownTimeout). It
// returns nil after a graceful shutdown. It does not close the ledger.
func (s *Server) Serve(ctx context.Context, ln net.Listener, opts ServeOptions) error {
	return serveAll(ctx, ln, []*Server{s}, s.Handler(), opts)
}

// stopStreams makes appends answer 503 and ends event streams.
func (s *Server) stopStreams() {
	s.mu.Lock()
	if !s.draining {
		s.draining = true
		close(s.stopping)
	}
	s.mu.Unlock()
}

// serveAll is Serve for the servers of one or more logs behind one
// handler.
func serveAll(ctx context.Context, ln net.Listener, servers []*Server, h http.Handler, opts ServeOptions) error {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	for _, s := range servers {
		if s.witnessErr != nil {
			return s.witnessErr
		}
	}
	// The witness clients outlive ctx until the appends in flight are
	// answered: in finality mode they wait for their cosignatures.
	wctx, wstop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.RunWitnesses(wctx) }()
	}
	defer func() { wstop(); wg.Wait() }()
	hs := newHTTPServer(servers, h, opts)
	// A client at its body budget has its new connections held unread
	// (conns.go).
	gate := newGateListener(ln, servers[0].cl, servers[0].opts.MaxReadingPerAddr, hs.ReadHeaderTimeout, servers[0].opts.MaxReading)
	hs.ConnState = gate.connState
	ln = gate
	hs.RegisterOnShutdown(func() {
		// Streams never go idle by themselves: end them.
		for _, s := range servers {
			s.stopStreams()
		}
	})
	errc := make(chan error, 1)
	go func() {
		var err error
		if opts.TLSCert != "" || opts.TLSKey != "" {
			err = hs.ServeTLS(ln, opts.TLSCert, opts.TLSKey)
		} else {
			err = hs.Serve(ln)
		}
		errc <- err
	}()
	for _, s := range servers {
		s.log.Info("serving", "addr", ln.Addr().String(), "origin", s.l.Origin(), "size", s.l.Head().Size, "tls", opts.TLSCert != "")
	}
	log := servers[0].log
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining appends in flight")
	sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	done := make(chan struct{})
	go func() {
		var dw sync.WaitGroup
		for _, s := range servers {
			dw.Add(1)
			go func() { defer dw.Done(); s.Drain() }()
		}
		dw.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-sctx.Done():
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if err != nil {
		hs.Close()
		return err
	}
	log.Info("shut down")
	return nil
}
