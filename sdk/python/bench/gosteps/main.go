// Command gosteps runs N gated steps (client.Runtime.Execute, a step that
// does nothing) through the Go client, C at a time, against a custody
// server, and prints "steps N seconds S". The Python SDK's benchmark
// (sdk/python/bench/run.py) runs it beside the TypeScript and Python
// runtimes against the same server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/sign"
)

func main() {
	n := flag.Int("n", 600, "steps")
	conc := flag.Int("c", 32, "steps at once")
	flag.Parse()
	env := func(k string) string { return os.Getenv(k) }
	c, err := client.New(env("CUSTODY_URL"), env("CUSTODY_LOG_KEY"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	priv, err := sign.ReadPrivateKeyFile(env("CUSTODY_AGENT_KEY"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rt := client.NewRuntime(c, priv, env("CUSTODY_AGENT_NAME"), nil)
	grant := env("CUSTODY_GRANT")
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(*n) {
					return
				}
				step := client.Step{StepID: fmt.Sprintf("s%d", i), Action: "act", Target: "t/x", Auth: grant}
				if _, err := rt.Execute(context.Background(), step, func(context.Context) (client.Outcome, error) { return client.Outcome{}, nil }); err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		os.Exit(1)
	}
	fmt.Printf("steps %d seconds %.3f\n", *n, time.Since(start).Seconds())
}
