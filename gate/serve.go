package gate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// # Serving the agent
//
// A gate serves its agent on standard input and output (ServeStdio), the
// way an MCP host starts a server, or on a loopback HTTP address
// (ServeHTTP, MCP's streamable HTTP). Either returns nil when the agent
// hangs up or ctx ends: that is how a session finishes.

// ServeStdio serves the agent on r and w until it hangs up or ctx ends;
// each line refused as JSON-RPC is logged at warning.
func (g *Gate) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, logger *slog.Logger) error {
	t := &StdioTransport{Reader: r, Writer: w, Rejected: func(code int64, msg string) {
		logger.Warn("refused a message from the agent", "jsonrpc_code", code, "reason", msg)
	}}
	return sessionEnd(g.Server().Run(ctx, t))
}

// ServeHTTP serves the agent MCP's streamable HTTP on addr (which must be
// a loopback address, see LoopbackAddr) until ctx ends.
func (g *Gate) ServeHTTP(ctx context.Context, addr string, logger *slog.Logger) error {
	if err := LoopbackAddr(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.Server() }, nil)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/")
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeUnavailable answers the agent on r and w, until it hangs up, with
// what stopped the gate from starting (Unavailable): a gate started by an
// MCP host that exits shows the host only "connection closed".
func ServeUnavailable(ctx context.Context, problem, version string, r io.Reader, w io.Writer, logger *slog.Logger) {
	srv := Unavailable(problem, version)
	if err := sessionEnd(srv.Run(ctx, &StdioTransport{Reader: r, Writer: w})); err != nil {
		logger.Error("serving the error", "err", err)
	}
}

// sessionEnd is nil for the ways a session ends (the agent hung up, ctx
// ended), else err.
func sessionEnd(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// ServeMetrics serves reg's metrics at http://addr/metrics (a loopback
// address, see LoopbackAddr) until the returned stop is called.
func ServeMetrics(addr string, reg prometheus.Gatherer, logger *slog.Logger) (stop func(), err error) {
	if err := LoopbackAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go msrv.Serve(ln)
	logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { msrv.Close() }, nil
}

// LoopbackAddr checks that addr listens on a loopback address only: the
// gate's HTTP (the agent's session, its metrics) is for this machine.
func LoopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New("the gate serves HTTP on a loopback address only (127.0.0.1, [::1], localhost)")
	}
	return nil
}
