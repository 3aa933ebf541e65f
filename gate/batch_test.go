package gate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBudgetRunsOutInABatch: concurrent calls share batches of receipts
// (client.Runtime), and the budget runs out in the middle of one, which
// the gate could not foresee. The pending receipt that does not fit is
// denied limit_exceeded; the receipts after it in the batch are withdrawn
// by the ledger and signed again, so each call is judged on its own
// merits: calls that still fit the budget go through, the others are
// refused limit_exceeded, and the log holds no seq_mismatch DENIAL.
func TestBudgetRunsOutInABatch(t *testing.T) {
	const budget = 20
	w := newWorldLimits(t, `{"tools": {
  "write": {"capability": "fs.write", "target": "fs/{path}", "inert": ["text"], "reserve": {"writes": 1}},
  "echo": {"capability": "fs.write", "target": "fs/{path}", "inert": ["text"], "reserve": {"writes": 3}}
 }}`, map[string]int64{"writes": budget})
	const calls = 32
	var wg sync.WaitGroup
	isErr := make([]bool, calls)
	texts := make([]string, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool := "write"
			if i%3 == 0 {
				tool = "echo" // reserves 3
			}
			res, err := w.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"path": fmt.Sprintf("/allowed/%d", i), "text": "x"}})
			if err != nil {
				t.Error(err)
				return
			}
			isErr[i], texts[i] = res.IsError, res.Content[0].(*mcp.TextContent).Text
		}()
	}
	wg.Wait()

	refused := 0
	for i := range calls {
		if isErr[i] {
			refused++
			if !strings.HasPrefix(texts[i], "limit_exceeded: ") {
				t.Errorf("call %d refused for another reason than its budget: %q", i, texts[i])
			}
		} else if _, ok := w.files.wrote(fmt.Sprintf("/allowed/%d", i)); !ok && i%3 != 0 {
			t.Errorf("call %d succeeded but the upstream never wrote its file", i)
		}
	}
	// In log order: each pending receipt accepted fits what is left of the
	// budget, and each one denied did not fit; nothing else was denied.
	rs, denials := w.receipts(t)
	spent, accepted := int64(0), 0
	for _, r := range rs {
		if r.Result == "pending" {
			spent += r.Reserve["writes"]
			accepted++
		}
	}
	if spent > budget || accepted+refused != calls {
		t.Fatalf("%d pending receipts reserved %d of %d; %d calls refused of %d", accepted, spent, budget, refused, calls)
	}
	if refused == 0 {
		t.Fatal("no call ran out of budget: the test did not test anything")
	}
	for _, d := range denials {
		if d.ReasonCode != "limit_exceeded" {
			t.Errorf("a DENIAL %s of %s: %s", d.ReasonCode, d.StatementID, d.Reason)
		}
	}
	if len(denials) != refused {
		t.Errorf("%d DENIALs for %d refused calls", len(denials), refused)
	}
}
