package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/servertest"
)

// BenchmarkRuntimeReceipts measures one runtime's pending receipts
// against a ledger served on loopback HTTP, from 1 and from 32 concurrent
// callers: each a verified, durable append. At c32 concurrent appends
// share batch requests and the ledger's commits.
func BenchmarkRuntimeReceipts(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			lg := servertest.Start(b, server.Options{})
			alice := lg.Principal("user:alice")
			a, grant := lg.Agent(alice, "agent:a", "wf_bench", nil)
			rt := client.NewRuntime(lg.NewClient(), lg.KeyOf(a), "agent:a", nil)
			ctx := context.Background()
			work := make(chan int)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						if _, err := rt.Receipt(ctx, servertest.Pending(grant, fmt.Sprintf("s%d", i), nil)); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			for i := 0; i < b.N; i++ {
				work <- i
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "receipts/s")
		})
	}
}
