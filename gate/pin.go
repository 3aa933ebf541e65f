package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// PinResult is what Pin did for one mapped tool.
type PinResult struct {
	Tool     string
	Upstream string // the server's name ("" when no upstream offers it)
	Old, New string // pins before and after ("" for none)
	// Unfit says why the gate would still not offer the tool (an
	// undeclared argument), "" when it would.
	Unfit string
}

// Pin connects to the upstreams, reads the definitions of the tools the
// configuration maps, and returns the configuration with each such tool's
// pin set to its definition's hash (DefinitionHash). The other fields are
// kept as they are (the file is re-indented, keys in order). A mapped
// tool no upstream offers keeps its pin and is reported with no upstream.
func Pin(ctx context.Context, data []byte, ups []Upstream, stderr io.Writer) ([]byte, []PinResult, error) {
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, nil, err
	}
	if len(ups) == 0 {
		return nil, nil, errors.New("gate pin: no upstream")
	}
	seen := map[string]*PinResult{}
	for _, u := range ups {
		cl := mcp.NewClient(&mcp.Implementation{Name: "custody-gate-pin", Version: "1"}, nil)
		var t mcp.Transport
		local := false
		switch {
		case u.URL != "":
			t = &mcp.StreamableClientTransport{Endpoint: u.URL}
		case len(u.Command) > 0:
			cmd := exec.Command(u.Command[0], u.Command[1:]...)
			cmd.Stderr = stderr
			t, local = &mcp.CommandTransport{Command: cmd}, true
		default:
			return nil, nil, errors.New("gate pin: an upstream needs a command or a URL")
		}
		cs, err := cl.Connect(ctx, t, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("gate pin: connecting to upstream %s: %w", u.label(), err)
		}
		name := u.label()
		if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil && ir.ServerInfo.Name != "" && u.Name == "" {
			name = ir.ServerInfo.Name
		}
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				cs.Close()
				return nil, nil, fmt.Errorf("gate pin: listing the tools of %s: %w", name, err)
			}
			rule := cfg.Tools[tool.Name]
			if rule == nil || seen[tool.Name] != nil {
				continue
			}
			h, err := DefinitionHash(tool.Name, tool.Description, tool.InputSchema)
			if err != nil {
				cs.Close()
				return nil, nil, fmt.Errorf("gate pin: tool %q of %s: %w", tool.Name, name, err)
			}
			r := &PinResult{Tool: tool.Name, Upstream: name, Old: rule.Pin, New: h}
			// Would the gate offer it, once pinned?
			pinned := *rule
			pinned.Pin = h
			g := &Gate{cfg: &Config{Tools: map[string]*ToolRule{tool.Name: &pinned}}}
			r.Unfit = g.unfit(&upstream{name: name, local: local}, tool)
			seen[tool.Name] = r
		}
		cs.Close()
	}
	var results []PinResult
	for name, rule := range cfg.Tools {
		if r := seen[name]; r != nil {
			results = append(results, *r)
		} else {
			results = append(results, PinResult{Tool: name, Old: rule.Pin, New: rule.Pin})
		}
	}
	slices.SortFunc(results, func(a, b PinResult) int { return cmpString(a.Tool, b.Tool) })

	// Rewrite the file: every field kept, each pinned tool's pin set.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, nil, err
	}
	var tools map[string]map[string]json.RawMessage
	if err := json.Unmarshal(top["tools"], &tools); err != nil {
		return nil, nil, err
	}
	for _, r := range results {
		if r.Upstream == "" {
			continue
		}
		b, _ := json.Marshal(r.New)
		tools[r.Tool]["pin"] = b
	}
	tb, err := json.Marshal(tools)
	if err != nil {
		return nil, nil, err
	}
	top["tools"] = tb
	out, err := json.Marshal(top)
	if err != nil {
		return nil, nil, err
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, out, "", "  "); err != nil {
		return nil, nil, err
	}
	ind.WriteByte('\n')
	if _, err := ParseConfig(ind.Bytes()); err != nil {
		return nil, nil, fmt.Errorf("gate pin: the pinned configuration does not parse: %w", err)
	}
	return ind.Bytes(), results, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
