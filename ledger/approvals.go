package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/statement"
)

func (l *reader) StateView() *authority.Engine { return authority.New(recordStore{l.store}) }

// Held is a receipt on the log's list of held receipts, as GET
// /v1/approvals and `custody approvals` show it.
type Held struct {
	Pending *authority.PendingRec
	State   string // authority.HoldHeld, ... at the time asked
	Why     string
	Entry   *Entry
	Chain   []string // the grants above it, the CONFIRM first
}

// maxHeldListed bounds how many receipts one listing walks.
const maxHeldListed = 10000

func (l *reader) HeldReceipts(now time.Time, max int, keep func(*authority.PendingRec) bool) ([]Held, error) {
	v := l.StateView()
	var out []Held
	var ferr error
	v.HeldReceipts(maxHeldListed, func(p *authority.PendingRec) bool {
		state, why := v.HoldState(p, now)
		if state != authority.HoldHeld || (keep != nil && !keep(p)) {
			return true
		}
		e, err := l.Entry(p.Index)
		if err != nil {
			ferr = err
			return false
		}
		out = append(out, Held{Pending: p, State: state, Why: why, Entry: e, Chain: grantChain(v, p.Grant)})
		return len(out) < max
	})
	if ferr == nil {
		ferr = v.Err()
	}
	return out, ferr
}

func (l *reader) HeldReceipt(id string, now time.Time) (*Held, error) {
	v := l.StateView()
	p := v.Pending(id)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("pending receipt %q: %w", id, ErrNotFound)
	}
	if p.Hold == nil {
		return nil, fmt.Errorf("receipt %q was not held for approval: %w", id, ErrNotHeld)
	}
	state, why := v.HoldState(p, now)
	e, err := l.Entry(p.Index)
	if err != nil {
		return nil, err
	}
	return &Held{Pending: p, State: state, Why: why, Entry: e, Chain: grantChain(v, p.Grant)}, nil
}

// ErrNotHeld: the receipt exists but no approval rule held it.
var ErrNotHeld = errors.New("not held")

// grantChain lists a grant and its ancestors, the CONFIRM first.
func grantChain(v *authority.Engine, id string) []string {
	var ids []string
	for g := v.Grant(id); g != nil && len(ids) <= 64; g = v.Grant(g.Parent) {
		ids = append([]string{g.ID}, ids...)
		if g.Parent == "" {
			break
		}
	}
	return ids
}

func (l *reader) Approvals(wf, receiptID string, after uint64) ([]*Entry, error) {
	idx, err := l.WorkflowIndexesAfter(wf, after)
	if err != nil {
		return nil, err
	}
	var out []*Entry
	for _, i := range idx {
		e, err := l.Entry(i)
		if err != nil {
			return nil, err
		}
		if a, ok := e.Statement.(*statement.ApprovalDoc); ok && a.ReceiptRef == receiptID {
			out = append(out, e)
		}
	}
	return out, nil
}
