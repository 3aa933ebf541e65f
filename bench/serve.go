package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// ServeResult is what `custody bench serve` measures of a running server
// (and prints with --json).
type ServeResult struct {
	Ledger        string  `json:"ledger"`
	Clients       int     `json:"clients"`
	Seconds       float64 `json:"seconds"`
	Appends       int64   `json:"appends"`
	Denied        int64   `json:"denied"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	AppendsPerSec float64 `json:"appends_per_second"`
	P50ms         float64 `json:"p50_ms"`
	P90ms         float64 `json:"p90_ms"`
	P99ms         float64 `json:"p99_ms"`
	Maxms         float64 `json:"max_ms"`
	Verified      bool    `json:"verified"` // every answer's checkpoint, proof and leaf were checked
}

// Serve drives a running custody server the way runtimes do: it enrolls
// a fresh principal with the admin key, confirms one agent per client in
// its own workflow, then appends pending receipts from n clients, one
// after another each, for d. Every answer is verified by the client
// (checkpoint signature, inclusion proof, the leaf holds the envelope).
// An append cut short by the deadline is neither counted nor timed.
func Serve(ctx context.Context, cl *client.Client, adminKey []byte, n int, d time.Duration) (*ServeResult, error) {
	var tag [4]byte
	rand.Read(tag[:])
	run := hex.EncodeToString(tag[:])
	admin := client.NewRuntime(cl, adminKey, "", nil)
	ppub, ppriv, err := sign.GenerateKey()
	if err != nil {
		return nil, err
	}
	pname := "user:bench-" + run
	if _, err := admin.Append(ctx, &statement.PrincipalDoc{PrincipalID: "bench_" + run, Op: statement.OpEnroll,
		Name: pname, PublicKey: sign.EncodePublicKey(ppub)}); err != nil {
		return nil, fmt.Errorf("enrolling %s: %w", pname, err)
	}
	principal := client.NewRuntime(cl, ppriv, pname, nil)
	agents := make([]*client.Runtime, n)
	steps := make([]client.Step, n)
	for i := range agents {
		apub, apriv, err := sign.GenerateKey()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("agent:bench-%s/%d", run, i)
		wf := fmt.Sprintf("wf_bench_%s_%d", run, i)
		r, err := principal.Confirm(ctx, client.Grant{ID: fmt.Sprintf("bench_%s_%d", run, i), Workflow: wf, Grantee: name, GranteeKey: apub,
			Targets: []string{"bench/*"}, Capabilities: []string{"act"}, TTL: time.Hour, Revocable: true})
		if err != nil {
			return nil, fmt.Errorf("confirming %s: %w", name, err)
		}
		agents[i] = client.NewRuntime(cl, apriv, name, nil)
		steps[i] = client.Step{Workflow: wf, Action: "act", Target: "bench/x", Auth: r.Statement.ID(),
			ScopeHash: r.Statement.(*statement.ConfirmDoc).ScopeHash}
	}

	var appends, denied, errs atomic.Int64
	var errOnce sync.Once
	var firstErr error
	lat := make([][]time.Duration, n)
	// Each client starts appends until the deadline and lets the last one
	// finish: an append cut short would be neither acknowledged nor timed.
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := steps[i]
			for j := 0; time.Now().Before(deadline) && ctx.Err() == nil; j++ {
				t0 := time.Now()
				_, err := a.Receipt(ctx, &statement.ReceiptDoc{ReceiptID: fmt.Sprintf("r_%s_%d_%d", run, i, j), Workflow: s.Workflow,
					StepID: fmt.Sprintf("s%d", j), Action: s.Action, Target: s.Target, AuthorizationRef: s.Auth,
					Result: statement.ResultPending, ScopeHash: s.ScopeHash})
				var de *client.DeniedError
				switch {
				case err == nil:
					appends.Add(1)
					lat[i] = append(lat[i], time.Since(t0))
				case errors.As(err, &de):
					denied.Add(1)
				case ctx.Err() != nil:
					return // interrupted
				default:
					errs.Add(1)
					errOnce.Do(func() { firstErr = err })
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	res := &ServeResult{Ledger: cl.URL(), Clients: n, Seconds: elapsed.Seconds(), Appends: appends.Load(), Denied: denied.Load(),
		Errors: errs.Load(), AppendsPerSec: float64(appends.Load()) / elapsed.Seconds(),
		P50ms: percentile(all, 0.50), P90ms: percentile(all, 0.90), P99ms: percentile(all, 0.99), Maxms: percentile(all, 1), Verified: true}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	return res, nil
}
