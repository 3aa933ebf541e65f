package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/statement"
)

// stepSpec is one gated call: a tool call or a resource read, made into
// one pending RECEIPT per target.
type stepSpec struct {
	what       string // "tool" or "resource", for messages
	name       string // the tool name or the URI
	up         *upstream
	capability string
	targets    []string
	step       string
	reserve    map[string]int64 // the rule's reserve, carried by the first target
	// params is params_sha256 of every pending receipt: the SHA-256 of
	// the canonical JSON of the arguments forwarded ("" when they are not
	// in the strict profile: a null, a fraction).
	params string
	// notify tells the agent something while the call waits (a log
	// message, and progress when the call asked for it); nil: nobody.
	notify func(msg string)
}

// paramsSHA256 is the lowercase hex SHA-256 of the canonical JSON (the
// strict profile, as every custody SDK computes it: client.ParamsSHA256)
// of a call's arguments, or "" when they are outside that profile.
func paramsSHA256(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	h, err := client.ParamsSHA256(args)
	if err != nil {
		return ""
	}
	return h
}

// ran is what became of a forwarded call, for its outcome receipts.
type ran struct {
	result   string // side_effects.result
	err      string // "" on success
	evidence []byte // the result's JSON, hashed into evidence_refs
}

// refusal is a call the gate answers without running it.
type refusal struct {
	code, msg string
}

func (r *refusal) Error() string { return r.code + ": " + r.msg }

// reserveFor is the reserve of the i-th pending receipt of a call: every
// limit in force at 0, and the rule's amounts on the first.
func (g *Gate) reserveFor(rule map[string]int64, i int) map[string]int64 {
	out := map[string]int64{}
	for k := range g.inForce {
		out[k] = 0
	}
	if i == 0 {
		for k, v := range rule {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// runStep writes the pending receipts of s, one per target, and runs fn
// only when the ledger accepted every one and the workflow's event stream
// is connected; then it writes one outcome per pending receipt. The
// refusal says why fn did not run, or that a STOP ended it. fn's context
// is cancelled by a STOP that covers the step.
func (g *Gate) runStep(ctx context.Context, s *stepSpec, fn func(context.Context) ran) *refusal {
	// No event stream, no call: a STOP could not reach it. Checked before
	// the pending receipts (nothing is written while the stream is down)
	// and again after them.
	if err := g.awaitStream(ctx); err != nil {
		return &refusal{CodeUnavailable, err.Error() + "; nothing was written and the call was not forwarded"}
	}
	// Register before the pending receipts are written: every STOP logged
	// after them reaches this call.
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &call{workflow: g.workflow, step: s.step, cancel: cancel}
	g.mu.Lock()
	g.inflight[c] = struct{}{}
	g.mu.Unlock()
	defer func() { g.mu.Lock(); delete(g.inflight, c); g.mu.Unlock() }()

	// One pending receipt per target, sent together (the runtime puts
	// them in one batch unless one is likely denied).
	pend := make([]*statement.ReceiptDoc, len(s.targets))
	errs := make([]error, len(s.targets))
	var wg sync.WaitGroup
	for i, target := range s.targets {
		reserve := g.reserveFor(s.reserve, i)
		pend[i] = &statement.ReceiptDoc{ReceiptID: client.NewID("receipt"), Workflow: g.workflow, StepID: s.step, Action: s.capability,
			Target: target, AuthorizationRef: g.grantID, Result: statement.ResultPending, ScopeHash: g.scopeHash, Reserve: reserve,
			ParamsSHA256: s.params}
		wctx := ctx
		if g.doubtful(c, s.capability, target, reserve) {
			wctx = client.Alone(ctx)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = g.rt.Receipt(wctx, pend[i])
		}()
	}
	wg.Wait()

	outcomes := func(r ran) {
		var owg sync.WaitGroup
		for i, p := range pend {
			if errs[i] != nil {
				continue
			}
			o := &outcome{doc: &statement.ReceiptDoc{Workflow: g.workflow, StepID: s.step, Action: s.capability, Target: p.Target,
				AuthorizationRef: g.grantID, ScopeHash: g.scopeHash, PendingRef: p.ReceiptID},
				side: map[string]string{s.what: s.name, "server": s.up.name, "result": r.result}}
			if i == 0 {
				o.doc.Consumed = s.reserve
			}
			if len(s.targets) > 1 {
				o.side["targets"] = strconv.Itoa(len(s.targets))
			}
			if r.err != "" {
				o.fail(r.err)
			} else {
				o.doc.Result = statement.ResultSuccess
			}
			if r.evidence != nil {
				o.evidence(r.evidence)
			}
			owg.Add(1)
			go func() {
				defer owg.Done()
				if err := g.writeOutcome(ctx, o); err != nil {
					g.log.Error("the outcome receipt was not logged", s.what, s.name, "pending", p.ReceiptID, "err", err)
				}
			}()
		}
		owg.Wait()
	}

	// Every target must be accepted (or held, then approved); the first
	// one refused decides the answer, and the logged ones record that the
	// call did not run.
	var held []*client.Receipt
	var heldDocs []*statement.ReceiptDoc
	for i, err := range errs {
		var he *client.HeldError
		if errors.As(err, &he) {
			held, heldDocs = append(held, he.Receipt), append(heldDocs, pend[i])
			errs[i] = nil // logged: it gets an outcome
			continue
		}
		if err == nil {
			continue
		}
		var rf *refusal
		var de *client.DeniedError
		var re *client.RefusedError
		switch {
		case errors.As(err, &de):
			g.denied(de.Receipt.ReasonCode, pend[i].Reserve)
			rf = &refusal{de.Receipt.ReasonCode, fmt.Sprintf("%s (DENIAL at index %d; the call was not forwarded)", de.Receipt.Reason, de.Receipt.Index)}
		case errors.As(err, &re):
			rf = &refusal{re.ReasonCode, re.Reason + " (nothing was logged; the call was not forwarded)"}
		default:
			rf = &refusal{CodeUnavailable, fmt.Sprintf("the pending receipt was not durably accepted, so the call was not forwarded: %v", err)}
		}
		if len(s.targets) > 1 {
			rf.msg = fmt.Sprintf("target %s: %s", s.targets[i], rf.msg)
		}
		for j := i + 1; j < len(errs); j++ {
			var he *client.HeldError
			if errors.As(errs[j], &he) {
				errs[j] = nil
			}
		}
		outcomes(ran{result: "not executed", err: "not executed: target " + s.targets[i] + " was refused: " + rf.code})
		return rf
	}
	if len(held) > 0 {
		if rf := g.awaitHeld(fctx, s, held, heldDocs); rf != nil {
			outcomes(ran{result: "not executed", err: rf.Error()})
			return rf
		}
	}
	if err := g.awaitStream(ctx); err != nil {
		outcomes(ran{result: "not executed", err: "not executed: " + err.Error()})
		return &refusal{CodeUnavailable, err.Error() + "; the call was not forwarded"}
	}

	g.metrics.calls.WithLabelValues(s.what).Inc()
	r := fn(fctx)
	var stopped *client.StoppedError
	errors.As(context.Cause(fctx), &stopped)
	if stopped != nil {
		r = ran{result: "cancelled by STOP " + stopped.Stop.RequestID, err: stopped.Error()}
	}
	outcomes(r)
	if stopped != nil {
		code := "workflow_stopped"
		if stopped.Stop.StopScope == statement.StopStep {
			code = "step_stopped"
		}
		return &refusal{code, stopped.Error() + " (the call was cancelled upstream)"}
	}
	return nil
}

// defaultStep is the step id of a call with no step template.
func (g *Gate) defaultStep(name string) string {
	return safeSegment(name) + "/" + strconv.FormatUint(g.stepN.Add(1), 10)
}

// safeSegment makes an identifier segment of a name: bytes outside
// A-Z a-z 0-9 . _ - become '_'.
func safeSegment(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	s := string(b)
	if len(s) > 64 {
		s = s[:64]
	}
	if strings.Trim(s, ".") == "" {
		s = "_" + s
	}
	return s
}

// record makes a refusal visible to an incident responder: one
// structured line on standard error and the refusals metric always, and,
// where a statement can be formed and the ledger is reachable, a pending
// RECEIPT that says what was refused (the ledger denies it, or accepts it
// and the gate writes its failure outcome at once): replay shows either.
func (g *Gate) record(ctx context.Context, rf *refusal, what, name, server, capability string, logIt bool) {
	g.log.Warn("refused", "code", rf.code, what, name, "server", server, "reason", rf.msg)
	g.metrics.refusals.WithLabelValues(rf.code).Inc()
	if !logIt {
		return
	}
	if capability == "" {
		capability = "mcp.call"
	}
	reason := rf.Error()
	if len(reason) > 1024 {
		reason = reason[:1024] + "…"
	}
	reason = strings.ToValidUTF8(reason, "?")
	side := map[string]string{what: strings.ToValidUTF8(name, "?"), "refused_by": "custody gate", "reason": reason}
	if server != "" {
		side["server"] = server
	}
	step := g.defaultStep("refused")
	target := "mcp/" + safeSegment(name)
	if what == "resource" {
		target = "mcp/resource"
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p := &statement.ReceiptDoc{ReceiptID: client.NewID("receipt"), Workflow: g.workflow, StepID: step, Action: capability,
		Target: target, AuthorizationRef: g.grantID, Result: statement.ResultPending, ScopeHash: g.scopeHash,
		Reserve: g.reserveFor(nil, 1), SideEffects: side}
	if _, err := g.rt.Receipt(client.Alone(rctx), p); err != nil {
		var de *client.DeniedError
		if !errors.As(err, &de) {
			g.log.Warn("the refusal could not be recorded in the log", "code", rf.code, what, name, "err", err)
		}
		return
	}
	o := &outcome{doc: &statement.ReceiptDoc{Workflow: g.workflow, StepID: step, Action: capability, Target: target,
		AuthorizationRef: g.grantID, ScopeHash: g.scopeHash, PendingRef: p.ReceiptID}, side: side}
	o.fail("not executed: " + reason)
	if err := g.writeOutcome(rctx, o); err != nil {
		g.log.Warn("the refusal's outcome could not be recorded in the log", "code", rf.code, what, name, "err", err)
	}
}

// resolvePath resolves an absolute path through symbolic links: the
// longest part that exists is resolved (filepath.EvalSymlinks) and the
// rest, which does not exist yet, appended. A symbolic link that leads
// nowhere is an error: a server writing through it would create its
// target, wherever that is.
func resolvePath(p string) (string, error) {
	dir, rest := filepath.Clean(p), ""
	for {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			if rest == "" {
				return r, nil
			}
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(dir); lerr == nil {
			return "", fmt.Errorf("%s is a symbolic link to something that does not exist", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", err
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// gateMetrics are the gate's Prometheus metrics.
type gateMetrics struct {
	reg      *prometheus.Registry
	refusals *prometheus.CounterVec // by code
	hidden   prometheus.Gauge
	calls    *prometheus.CounterVec // gated calls forwarded, by kind
}

func newGateMetrics() *gateMetrics {
	m := &gateMetrics{reg: prometheus.NewRegistry(),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_gate_refusals_total",
			Help: "Calls the gate answered without running them, by reason code (its own and the ledger's)."}, []string{"code"}),
		hidden: prometheus.NewGauge(prometheus.GaugeOpts{Name: "custody_gate_hidden_tools",
			Help: "Mapped tools the gate does not offer: an undeclared argument, a definition that drifted from its pin."}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "custody_gate_forwarded_total",
			Help: "Gated calls forwarded upstream after the ledger accepted every target, by kind (tool, resource)."}, []string{"kind"}),
	}
	m.reg.MustRegister(m.refusals, m.hidden, m.calls)
	return m
}

// Metrics is the gate's Prometheus registry: custody_gate_refusals_total
// by code, custody_gate_hidden_tools, custody_gate_forwarded_total.
func (g *Gate) Metrics() prometheus.Gatherer { return g.metrics.reg }
