package testlog

import (
	"context"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/verify"
)

// Origin is the origin of every log this package makes unless told otherwise.
const Origin = "custody.test/log"

// Log is what the standard scenario needs of a log: a World decides, a
// Rogue obeys.
type Log interface {
	// Statements is the log's statement builder.
	Statements() *Author
	// AdminActor is the log's admin key.
	AdminActor() *Actor
	// Accept logs st signed by a, requiring it to be accepted, and returns
	// its index.
	Accept(a *Actor, st statement.Statement) uint64
	// Deny logs st signed by a, requiring it to be denied with code, and
	// returns the index of its DENIAL.
	Deny(a *Actor, st statement.Statement, code authority.Code) uint64
}

// WorldOptions configure a World. The zero value is a log of origin Origin
// with keys derived from "admin" and the origin, at T0.
type WorldOptions struct {
	Origin        string
	Admin, LogKey *Actor
	Clock         *Clock
	Init          ledger.InitOptions // keys, clock and origin are set from the fields above
	// Location is where the log is created: a folder or a postgres://
	// URL (default: a new folder under tb.TempDir()).
	Location string
}

// World is a real ledger in a temporary folder, with a clock and helpers.
// It closes the ledger when the test ends.
type World struct {
	TB     testing.TB
	L      *ledger.Ledger
	Dir    string
	Origin string
	Clock  *Clock
	Admin  *Actor // seq 1 after GENESIS
	LogKey *Actor
	Author *Author
}

// NewWorld creates a ledger with ledger.Init in tb.TempDir().
func NewWorld(tb testing.TB, o WorldOptions) *World {
	tb.Helper()
	if o.Origin == "" {
		o.Origin = Origin
	}
	if o.Admin == nil {
		o.Admin = NewActor("admin")
	}
	if o.LogKey == nil {
		o.LogKey = NewActor(o.Origin)
	}
	if o.Clock == nil {
		o.Clock = NewClock(T0)
	}
	if o.Location == "" {
		o.Location = tb.TempDir()
	}
	w := &World{TB: tb, Dir: o.Location, Origin: o.Origin, Clock: o.Clock, Admin: o.Admin, LogKey: o.LogKey,
		Author: NewAuthor(o.Origin, o.Clock)}
	init := o.Init
	init.AdminName, init.AdminKey, init.LogKey = o.Admin.Name, o.Admin.Priv, o.LogKey.Priv
	init.Options.Clock = o.Clock.Now
	l, err := ledger.Init(w.Dir, o.Origin, init)
	if err != nil {
		tb.Fatal(err)
	}
	w.Admin.Seq = 1
	w.L = l
	tb.Cleanup(func() { l.Close() })
	return w
}

// Statements implements Log.
func (w *World) Statements() *Author { return w.Author }

// AdminActor implements Log.
func (w *World) AdminActor() *Actor { return w.Admin }

// VerifierKey is the log's checkpoint verifier key.
func (w *World) VerifierKey() string { return w.L.VerifierKey() }

// TrySubmit seals st, signs it with a's key and appends it. On a denial it
// gives a's seq back (denied statements consume none).
func (w *World) TrySubmit(a *Actor, st statement.Statement) (*ledger.Result, error) {
	if err := statement.Seal(st); err != nil {
		w.TB.Fatalf("sealing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	_, raw, err := statement.Sign(a.Priv, st)
	if err != nil {
		w.TB.Fatalf("signing %s %s: %v", st.Head().Type, st.ID(), err)
	}
	res, err := w.L.Append(context.Background(), raw)
	if err != nil || res.Verdict != authority.Accepted {
		a.Seq--
	}
	return res, err
}

// Submit is TrySubmit, failing the test if nothing was logged.
func (w *World) Submit(a *Actor, st statement.Statement) *ledger.Result {
	w.TB.Helper()
	res, err := w.TrySubmit(a, st)
	if err != nil {
		w.TB.Fatalf("%s %s: %v", st.Head().Type, st.ID(), err)
	}
	return res
}

// Must submits st and requires the given verdict and code.
func (w *World) Must(a *Actor, st statement.Statement, want authority.Verdict, code authority.Code) *ledger.Result {
	w.TB.Helper()
	res := w.Submit(a, st)
	if res.Verdict != want || res.Code != code {
		w.TB.Fatalf("%s %s: got %s %s (%s), want %s %s", st.Head().Type, st.ID(), res.Verdict, res.Code, res.Reason, want, code)
	}
	return res
}

// Accept implements Log.
func (w *World) Accept(a *Actor, st statement.Statement) uint64 {
	w.TB.Helper()
	return w.Must(a, st, authority.Accepted, "").Index
}

// Deny implements Log.
func (w *World) Deny(a *Actor, st statement.Statement, code authority.Code) uint64 {
	w.TB.Helper()
	return w.Must(a, st, authority.Denied, code).Index
}

// Enroll has the admin enroll p.
func (w *World) Enroll(p *Actor, id string) *ledger.Result {
	w.TB.Helper()
	return w.Must(w.Admin, w.Author.Enroll(w.Admin, p, id), authority.Accepted, "")
}

// Confirm submits p's CONFIRM of g.
func (w *World) Confirm(p *Actor, id string, g statement.Grant) *ledger.Result {
	w.TB.Helper()
	return w.Submit(p, w.Author.Confirm(p, id, g))
}

// Delegate submits a's DELEGATE of g under parent.
func (w *World) Delegate(a *Actor, id, parent string, g statement.Grant) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.Delegate(a, id, parent, g))
}

// Pending submits a's pending RECEIPT under auth.
func (w *World) Pending(a *Actor, id, auth, step, action, target string, reserve map[string]int64) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.Pending(a, id, auth, step, action, target, reserve))
}

// Outcome submits a's outcome RECEIPT of pendingRef.
func (w *World) Outcome(a *Actor, id, pendingRef, result string, consumed map[string]int64) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.Outcome(a, id, pendingRef, result, consumed))
}

// Revoke submits a's REVOKE of target.
func (w *World) Revoke(a *Actor, id, target, reason string) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.Revoke(a, id, target, reason))
}

// StopChain submits a's chain STOP of wf.
func (w *World) StopChain(a *Actor, id, wf, reason string) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.StopChain(a, id, wf, reason))
}

// StopStep submits a's STOP of one step.
func (w *World) StopStep(a *Actor, id, wf, step, reason string) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.StopStep(a, id, wf, step, reason))
}

// Resume submits a's RESUME of stopRef.
func (w *World) Resume(a *Actor, id, wf, stopRef string) *ledger.Result {
	w.TB.Helper()
	return w.Submit(a, w.Author.Resume(a, id, wf, stopRef))
}

// Prove returns ledger.Prove's bundle, failing the test on error.
func (w *World) Prove(subject uint64, wholeWorkflow bool) *verify.Bundle {
	w.TB.Helper()
	b, err := w.L.Prove(subject, wholeWorkflow)
	if err != nil {
		w.TB.Fatalf("prove %d: %v", subject, err)
	}
	return b
}

// Leaves returns every leaf of the log, in order.
func (w *World) Leaves() [][]byte {
	w.TB.Helper()
	n := w.L.Head().Size
	out := make([][]byte, n)
	for i := range n {
		leaf, err := w.L.LeafBytes(i)
		if err != nil {
			w.TB.Fatal(err)
		}
		out[i] = leaf
	}
	return out
}
