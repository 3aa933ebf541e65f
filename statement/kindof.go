package statement

// KindOf is the kind of a statement value by its Go type (a statement
// being built may not have its header's type set yet): DENIAL for a
// *DenialDoc and for any type not of this package.
func KindOf(st Statement) Kind {
	switch st.(type) {
	case *GenesisDoc:
		return Genesis
	case *PrincipalDoc:
		return Principal
	case *ConfirmDoc:
		return Confirm
	case *DelegateDoc:
		return Delegate
	case *RevokeDoc:
		return Revoke
	case *ReceiptDoc:
		return Receipt
	case *StopDoc:
		return Stop
	case *ResumeDoc:
		return Resume
	case *ApprovalDoc:
		return Approval
	}
	return Denial
}
