package gate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves MCP on newline-delimited JSON-RPC (the stdio
// transport) over r and w, and keeps the session going where the SDK's
// would end it: a JSON-RPC batch (an array; MCP 2025-06-18 has none) is
// answered with one error -32600 (Invalid Request), a line that is not
// JSON with -32700 (Parse error), a line over mcp.DefaultMaxLineLength
// with -32600; each with id null, as JSON-RPC 2.0 says, and the next line
// is read as usual.
type StdioTransport struct {
	Reader io.Reader
	Writer io.Writer
	// Rejected, when set, is told of each line answered with an error.
	Rejected func(code int64, msg string)
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	pr, pw := io.Pipe()
	lw := &lockedWriter{w: t.Writer}
	go func() {
		br := bufio.NewReaderSize(t.Reader, 64<<10)
		for {
			line, err := readLine(br, mcp.DefaultMaxLineLength)
			if errors.Is(err, errLineTooLong) {
				t.reject(lw, jsonrpc.CodeInvalidRequest, "custody gate: a message over 16 MiB; it was skipped")
				continue
			}
			if tl := bytes.TrimSpace(line); len(tl) > 0 {
				switch {
				case tl[0] == '[':
					t.reject(lw, jsonrpc.CodeInvalidRequest, "custody gate: a JSON-RPC batch (an array) is not a request in MCP 2025-06-18 and later; send each request on its own line. Nothing in the batch was run.")
				case !json.Valid(tl):
					t.reject(lw, jsonrpc.CodeParseError, "custody gate: a line that is not JSON; it was skipped")
				default:
					if _, werr := pw.Write(append(tl, '\n')); werr != nil {
						return
					}
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return (&mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{lw}}).Connect(ctx)
}

func (t *StdioTransport) reject(w io.Writer, code int64, msg string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	w.Write(append(b, '\n'))
	if t.Rejected != nil {
		t.Rejected(code, msg)
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (without its newline); a line over max bytes is
// read to its end and dropped (errLineTooLong).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	over := false
	for {
		frag, err := br.ReadSlice('\n')
		if !over {
			if len(line)+len(frag) > max {
				over, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if over {
			if err == nil {
				return nil, errLineTooLong
			}
			return nil, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// lockedWriter writes each message whole: the SDK's answers and the
// transport's own error lines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Unavailable is the MCP server of a gate that could not start: it
// completes the handshake (so the host shows the server and its
// instructions) and answers every request after it with problem, an
// error that says what is wrong and how to fix it: a tools/call with a
// tool result whose text starts with gate_unavailable (the model and the
// person see it), every other request with a JSON-RPC error.
func Unavailable(problem, version string) *mcp.Server {
	msg := "custody gate could not start: " + problem
	s := mcp.NewServer(&mcp.Implementation{Name: "custody-gate", Version: version}, &mcp.ServerOptions{
		Instructions: msg,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize", "ping", "notifications/initialized", "notifications/cancelled", "notifications/roots/list_changed":
				return next(ctx, method, req)
			case "tools/call":
				return Refusal(CodeUnavailableGate, "%s", msg), nil
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
		}
	})
	return s
}

// CodeUnavailableGate answers every call of a gate that could not start.
const CodeUnavailableGate = "gate_unavailable"

// Fix is a hint for an error of New: how to fix it ("" when there is
// none to give), with a leading "; ".
func Fix(err error, ledger string) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "is not the grantee of"):
		return "; give --key the grantee's key, or --grant a CONFIRM or DELEGATE whose grantee is this key (custody confirm/delegate --grantee-key)"
	case strings.Contains(msg, "reading grant"):
		return fmt.Sprintf("; check that the custody server at %s is running (custody serve) and reachable, and that --grant names a CONFIRM or DELEGATE in its log", ledger)
	case strings.Contains(msg, "reaching the ledger"):
		return fmt.Sprintf("; start the custody server at %s (custody serve) or fix --ledger", ledger)
	case strings.Contains(msg, "connecting to upstream"):
		return "; check the upstream command after -- (a missing folder, a package not installed: its standard error is above) or --upstream-url"
	case strings.Contains(msg, "gate config"):
		return "; fix the gate's configuration file"
	}
	return ""
}
