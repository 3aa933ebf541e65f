package main

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

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

func init() { registerBench(benchServeCommand) }

// benchServeResult is what bench serve prints with --json.
type benchServeResult struct {
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

func benchServeCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "drive a running custody server with concurrent clients",
		UsageText: "custody bench serve --ledger URL --admin-key K [--log-key VKEY] [--clients 64] [--duration 10s] [--json]",
		Description: `Measures a running server (custody serve) over HTTP. It enrolls a fresh
principal with the admin key, confirms one agent per client in its own
workflow, then for --duration every client appends pending receipts one
after another, each answered only once durable under a signed checkpoint,
and each answer verified by the client (checkpoint signature, inclusion
proof, the leaf holds the submitted envelope), as a runtime does. It prints
the throughput and the latency percentiles of the appends. Run it against
a scratch ledger: it adds about clients+1 grants and every receipt to it.
Client and server share the machine when both run on it.

Example:

   custody serve --dir ./scratch &
   custody bench serve --ledger http://127.0.0.1:8080 --admin-key ./scratch/keys/admin.key --clients 64 --duration 10s`,
		Flags: []cli.Flag{
			locFlag(locLedger, "the server's `URL` ($CUSTODY_LEDGER)"),
			&cli.StringFlag{Name: "admin-key", Usage: "the log's admin private key file (to enroll the bench's principal)", Required: true, TakesFile: true},
			logKeyFlag("the checkpoint verifier key (default: ask the server, trust on first use)"),
			&cli.IntFlag{Name: "clients", Value: 64, Usage: "concurrent clients, each an agent with one append in flight"},
			&cli.DurationFlag{Name: "duration", Value: 10 * time.Second, Usage: "how long to append"},
			jsonFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			n, d := int(c.Int("clients")), c.Duration("duration")
			if n < 1 || n > 4096 {
				return usage(c, "--clients %d: want 1..4096", n)
			}
			if d <= 0 || d > time.Hour {
				return usage(c, "--duration %s: want more than 0 and at most 1h", d)
			}
			admin, err := readPrivateKey(c.String("admin-key"))
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			loc, err := resolveLocation(c)
			if err != nil {
				return err
			}
			vkey, err := optionalLogKey(c)
			if err != nil {
				return err
			}
			cl, err := remoteClient(ctx, loc.value, vkey, n)
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			res, err := benchServe(ctx, cl, admin, n, d)
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				return writeJSON(w, res)
			}
			fmt.Fprintf(w, "custody bench serve: %d clients for %.1fs against %s\n", res.Clients, res.Seconds, res.Ledger)
			fmt.Fprintf(w, "appends      %d verified (denied %d, errors %d)\n", res.Appends, res.Denied, res.Errors)
			fmt.Fprintf(w, "throughput   %.0f appends/s\n", res.AppendsPerSec)
			fmt.Fprintf(w, "latency      p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", res.P50ms, res.P90ms, res.P99ms, res.Maxms)
			if res.FirstError != "" {
				fmt.Fprintf(w, "first error  %s\n", safeText(res.FirstError))
			}
			return nil
		},
	}
}

// benchServe sets up a principal and n agents, then appends pending
// receipts from n goroutines for d.
func benchServe(ctx context.Context, cl *client.Client, adminKey []byte, n int, d time.Duration) (*benchServeResult, error) {
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
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	res := &benchServeResult{Ledger: cl.URL(), Clients: n, Seconds: elapsed.Seconds(), Appends: appends.Load(), Denied: denied.Load(),
		Errors: errs.Load(), AppendsPerSec: float64(appends.Load()) / elapsed.Seconds(),
		P50ms: pct(0.50), P90ms: pct(0.90), P99ms: pct(0.99), Verified: true}
	if len(all) > 0 {
		res.Maxms = float64(all[len(all)-1].Microseconds()) / 1000
	}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	return res, nil
}
