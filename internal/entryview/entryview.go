// Package entryview is how custody shows one entry of a log: the fields
// of its leaf and statement (index, logged time, kind, signer, back-links,
// leaf hash), a DENIAL's decision and the statement it denied, and the
// statement itself.
//
// It promises that every free-text value an agent could have written is
// escaped for the terminal (internal/textsafe) in the text form, and that
// the JSON form (Entry) holds the statement's bytes as they were logged.
package entryview

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"github.com/custodylog/custody/internal/textsafe"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/server"
	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/statement"
)

// Entry is how an entry is shown; it is what custody get prints with
// --json: the server's entry document without the leaf's bytes (its hash
// is shown), and a DENIAL's decision.
type Entry struct {
	api.Entry
	// Leaf hides api.Entry's (a shallower field of the same JSON name
	// wins): left nil, it is not printed.
	Leaf   []byte  `json:"leaf,omitempty"`
	Denial *Denial `json:"denial,omitempty"`
}

// Denial is what a DENIAL entry says of the statement it denied.
type Denial struct {
	ReasonCode    string          `json:"reason_code"`
	Reason        string          `json:"reason"`
	StatementType string          `json:"statement_type"`
	StatementID   string          `json:"statement_id,omitempty"`
	SignerKeyID   string          `json:"signer_keyid"`
	Statement     json.RawMessage `json:"denied_statement,omitempty"` // the denied payload, if it is JSON
}

// Describe is how e is shown.
func Describe(e *ledger.Entry) Entry {
	out := Entry{Entry: server.EntryDoc(e)}
	out.Entry.Leaf = nil
	if d, ok := e.Statement.(*statement.DenialDoc); ok {
		out.Denial = &Denial{ReasonCode: d.ReasonCode, Reason: d.Reason, StatementType: string(d.StatementType),
			StatementID: d.StatementID, SignerKeyID: d.SignerKeyID}
		if d.Envelope != nil {
			if p, err := base64.StdEncoding.DecodeString(d.Envelope.Payload); err == nil && json.Valid(p) {
				out.Denial.Statement = p
			}
		}
	}
	return out
}

// WriteText prints e for people, in a log of size entries: one field a
// line, free text escaped (textsafe), then the statement (and a DENIAL's
// denied statement) indented.
func (e Entry) WriteText(w io.Writer, size uint64) {
	fmt.Fprintf(w, "entry %d of %d\n", e.Index, size)
	row := func(k, v string) { fmt.Fprintf(w, "%-17s %s\n", k, v) }
	row("logged_at", e.LoggedAt)
	row("kind", e.Kind)
	row("id", textsafe.Text(e.ID))
	row("actor", textsafe.Text(e.Actor))
	row("key id", e.KeyID)
	row("seq", fmt.Sprint(e.Seq))
	if e.Workflow != "" {
		row("workflow", textsafe.Text(e.Workflow))
	}
	switch {
	case e.PrevInWorkflow != nil:
		row("prev_in_workflow", fmt.Sprint(*e.PrevInWorkflow))
	case e.Kind == string(statement.Genesis) || e.Kind == string(statement.Principal):
		row("prev_in_workflow", "none (first of the trust chain)")
	case e.Workflow != "":
		row("prev_in_workflow", "none (first of its workflow)")
	}
	row("trust_head", fmt.Sprint(e.TrustHead))
	row("leaf hash", e.LeafHash)
	if d := e.Denial; d != nil {
		id := ""
		if d.StatementID != "" {
			id = " " + textsafe.Text(d.StatementID)
		}
		row("decision", fmt.Sprintf("denied %s%s: %s: %s", d.StatementType, id, d.ReasonCode, textsafe.Text(d.Reason)))
		row("signer key id", d.SignerKeyID)
	}
	fmt.Fprintf(w, "statement:\n%s\n", textsafe.PrettyJSON(e.Statement))
	if e.Denial != nil && e.Denial.Statement != nil {
		fmt.Fprintf(w, "denied statement:\n%s\n", textsafe.PrettyJSON(e.Denial.Statement))
	}
}
