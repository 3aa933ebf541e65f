package statement

import "testing"

func TestKindOf(t *testing.T) {
	for st, want := range map[Statement]Kind{
		&GenesisDoc{}: Genesis, &PrincipalDoc{}: Principal, &ConfirmDoc{}: Confirm, &DelegateDoc{}: Delegate,
		&RevokeDoc{}: Revoke, &ReceiptDoc{}: Receipt, &StopDoc{}: Stop, &ResumeDoc{}: Resume,
		&ApprovalDoc{}: Approval, &DenialDoc{}: Denial,
	} {
		if got := KindOf(st); got != want {
			t.Errorf("KindOf(%T) = %s, want %s", st, got, want)
		}
	}
}
