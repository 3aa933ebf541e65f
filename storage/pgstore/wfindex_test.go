package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testlog"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage/storagetest"
)

// A workflow reaching 256 entries fills a page of the ledger's workflow
// index, which the batch that fills it writes twice; on PostgreSQL that
// batch, and so the log, used to fail for good ("ON CONFLICT DO UPDATE
// command cannot affect row a second time"). One append per batch makes
// the 256th entry end its batch.
func TestWorkflowPageFills(t *testing.T) {
	const origin = "example.com/wf"
	url := storagetest.PostgresURL(t)
	admin := testlog.NewActor("admin")
	l, err := ledger.Init(url, origin, ledger.InitOptions{AdminKey: admin.Priv, Options: ledger.Options{LeaseTTL: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	admin.Seq = 1 // GENESIS
	au := testlog.NewAuthor(origin, testlog.NewClock(time.Now()))
	alice, agent := testlog.NewActor("user:alice"), testlog.NewActor("agent:a0")
	add := func(a *testlog.Actor, st statement.Statement) {
		t.Helper()
		_, raw, err := a.Sign(st)
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Append(context.Background(), raw)
		if err != nil {
			t.Fatalf("appending %s (log size %d): %v", st.ID(), l.Head().Size, err)
		}
		if r.Verdict != authority.Accepted {
			t.Fatalf("%s: %s %s: %s", st.ID(), r.Verdict, r.Code, r.Reason)
		}
	}
	add(admin, au.Enroll(admin, alice, "p_alice"))
	add(alice, au.Confirm(alice, "c_0", testlog.NewGrant(agent, "wf_0", []string{"t/x"}, []string{"pay"}, []string{"s1"}, nil, 3600)))
	for n := range 300 {
		add(agent, au.Pending(agent, fmt.Sprintf("r_%d", n), "c_0", "s1", "pay", "t/x", nil))
	}
}
