package entryview

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	_ "github.com/custodylog/custody/storage/badgerstore"
)

// TestEntryAndDenial: a PRINCIPAL, the same key enrolled again (denied),
// and a STOP whose reason holds a bidi override: the text escapes the
// reason, and the DENIAL shows the decision and the statement it denied.
func TestEntryAndDenial(t *testing.T) {
	_, admin, _ := sign.GenerateKey()
	l, err := ledger.Init(t.TempDir(), "example.com/view", ledger.InitOptions{AdminKey: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pub, _, _ := sign.GenerateKey()
	for seq, name := range []string{"user:eve", "user:eve2"} {
		st := &statement.PrincipalDoc{Header: statement.Header{Type: statement.Principal, Timestamp: statement.FormatTimestamp(time.Now()),
			Actor: "admin", Log: l.Origin(), Seq: uint64(seq + 2)}, PrincipalID: "p" + string(rune('1'+seq)), Op: statement.OpEnroll,
			Name: name, PublicKey: sign.EncodePublicKey(pub)}
		_, raw, err := statement.Sign(admin, st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), raw); err != nil {
			t.Fatal(err)
		}
	}
	stop := &statement.StopDoc{Header: statement.Header{Type: statement.Stop, Timestamp: statement.FormatTimestamp(time.Now()),
		Actor: "admin", Log: l.Origin(), Seq: 4}, RequestID: "stop_1", Workflow: "wf_1", StopScope: statement.StopChain,
		TakeoverMode: statement.TakeoverHuman, Reason: "all clear\u202e"}
	_, raw, err := statement.Sign(admin, stop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	e, err := l.Entry(3)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	Describe(e).WriteText(&b, 4)
	if strings.ContainsRune(b.String(), '\u202e') || !strings.Contains(b.String(), `all clear\u202e`) {
		t.Errorf("the override is not escaped:\n%s", b.String())
	}
	e, err = l.Entry(1)
	if err != nil {
		t.Fatal(err)
	}
	v := Describe(e)
	b.Reset()
	v.WriteText(&b, 3)
	text := b.String()
	for _, want := range []string{"entry 1 of 3\n", "kind              PRINCIPAL\n", "trust_head        0\n",
		`"name": "user:eve"`, "key id            " + sign.KeyID(admin.Public().(ed25519.PublicKey)) + "\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	doc, _ := json.Marshal(v)
	if strings.Contains(string(doc), `"leaf":`) || !strings.Contains(string(doc), `"leaf_hash":`) || strings.Contains(string(doc), `"denial"`) {
		t.Errorf("the JSON form: %s", doc)
	}
	var st map[string]any
	if err := json.Unmarshal(v.Statement, &st); err != nil || st["name"] != "user:eve" {
		t.Errorf("the JSON form's statement is not the logged bytes: %v %v", st, err)
	}

	e, err = l.Entry(2)
	if err != nil {
		t.Fatal(err)
	}
	v = Describe(e)
	if v.Kind != "DENIAL" || v.Denial == nil || v.Denial.StatementID != "p2" || v.Denial.StatementType != "PRINCIPAL" || v.Denial.Statement == nil {
		t.Fatalf("denial: %+v %+v", v, v.Denial)
	}
	b.Reset()
	v.WriteText(&b, 3)
	for _, want := range []string{"decision          denied PRINCIPAL p2: " + v.Denial.ReasonCode + ": ", "denied statement:\n{\n", `"name": "user:eve2"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("denial text lacks %q:\n%s", want, b.String())
		}
	}
}
